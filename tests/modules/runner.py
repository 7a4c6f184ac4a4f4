"""Run one of hostkit's Ansible modules on a temporary sysroot and check what it did to the files.

A case (``tests/module_cases/<module>.json``, in the spirit of pyinfra's operation tests)::

    {"name": "...", "covers": ["change", "journal"],       # what the case is evidence for
     "params": {...},                                       # sysroot defaults to the temporary tree
     "check_mode": false, "diff": false,
     "files": {"/etc/x": "text" | {"content": "text", "mode": "0600"}},   # the tree before
     "result": {"changed": true, ...},                      # fields the result must hold exactly
     "msg_contains": ["..."],                               # substrings of result["msg"]
     "files_after": {"/etc/x": "new" | {"content":, "mode":} | {"json": {...}} | null},
     "journal": [{"kind": "file", "path": "/etc/x"}, {"kind": "values", "paths": [...]}],
     "would_run": [["update-grub"]],
     "second_run": {"result": {"changed": false}}}          # the same params again

``{tree}`` anywhere in a string stands for the temporary tree. What the runner asserts, on the
files themselves and not on what the module says:

- every file and directory not named in ``files_after`` is byte-identical afterwards (content and
  mode), named files are as given (``null``: absent), and no other file or directory appeared;
- the journal (``var/lib/hostkit/journal/<run>.json``) holds exactly the ``journal`` entries, in
  order (none, and no journal file, when not given); each entry's recorded "before" is the file
  or value as it was in ``files``; the journal is mode 0600;
- for modules that journal, every file that changed is named by a journal entry, and every
  directory that appeared by an entry's ``created_dirs``;
- in-process, each entry was on disk while its paths still held their "before" state: the journal
  was written before the change;
- the would-run log holds exactly ``would_run`` (no log when not given);
- ``second_run``: running again changes no byte at all (journal and logs included);
- for modules that journal, the agent's rollback of the run puts every host file and directory
  back as the case had it, byte for byte and mode for mode.

The module runs in-process (``ansible.module_utils.testing.patch_module_args``) or as a
subprocess (``python library/X.py args.json``, as Ansible runs it, with ``PYTHONPATH`` a tree
where ``ansible.module_utils.hostkit_*`` resolve and ``hostkit`` does not import);
``hostkit_changes`` and ``hostkit_lock`` also through the agent, as their action plugin runs them
(:func:`run_agent_route`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import ansible
import ansible.module_utils
from ansible.module_utils.testing import patch_module_args

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "library"
MODULE_UTILS = REPO / "module_utils"
CASES_DIR = REPO / "tests" / "module_cases"
JOURNAL_DIR = "var/lib/hostkit/journal"
WOULD_RUN_LOG = "var/lib/hostkit/would-run.jsonl"
STATE_PREFIX = "var/lib/hostkit/"
MODES = ("inprocess", "subprocess")
# Modules that also run as their action plugin runs them with hostkit on the controller: the
# options checked here, the work done by the agent zipapp in a python3 of its own
# (hostkit.actions.AGENT_MODULES).
AGENT_MODULES = {"hostkit_changes": "agent", "hostkit_lock": "agent"}

# In-process, ``ansible.module_utils.hostkit_*`` are the project's module_utils files.
if str(MODULE_UTILS) not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(str(MODULE_UTILS))


# ----------------------------------------------------------------------------- cases


def load_cases() -> list[tuple[str, str, dict, bool]]:
    """(id, module, case, journals_changes) for every case of every file, in file order."""
    out = []
    for f in sorted(CASES_DIR.glob("*.json")):
        doc = json.loads(f.read_text())
        for case in doc["cases"]:
            out.append((f"{doc['module']}: {case['name']}", doc["module"], case, doc.get("journals_changes", True)))
    return out


def substitute(value, tree: Path):
    if isinstance(value, str):
        return value.replace("{tree}", str(tree))
    if isinstance(value, list):
        return [substitute(v, tree) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, tree) for k, v in value.items()}
    return value


# ----------------------------------------------------------------------------- trees


def rel(path: str) -> str:
    return path.lstrip("/")


def write_tree(root: Path, files: dict) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for path, spec in files.items():
        full = root / rel(path)
        full.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(spec, dict) and spec.get("dir"):
            full.mkdir(exist_ok=True)
            continue
        content = spec if isinstance(spec, str) else spec["content"]
        full.write_bytes(content.encode("utf-8"))
        full.chmod(int(spec.get("mode", "0644"), 8) if isinstance(spec, dict) else 0o644)


def snapshot(root: Path) -> tuple[dict[str, tuple[bytes, str]], set[str]]:
    """Every file (content, mode) and every directory under ``root``, by path relative to it."""
    files, dirs = {}, set()
    for dirpath, dirnames, filenames in os.walk(root):
        base = os.path.relpath(dirpath, root)
        for d in dirnames:
            dirs.add(os.path.normpath(os.path.join(base, d)))
        for name in filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            data = os.readlink(full).encode() if stat.S_ISLNK(st.st_mode) else Path(full).read_bytes()
            files[os.path.normpath(os.path.join(base, name))] = (data, "%04o" % (st.st_mode & 0o7777))
    return files, dirs


def host_files(files: dict) -> dict:
    """Without hostkit's journal and would-run log (checked on their own)."""
    return {k: v for k, v in files.items() if not k.startswith(JOURNAL_DIR + "/") and k != WOULD_RUN_LOG}


def parents(path: str) -> set[str]:
    out, p = set(), os.path.dirname(path)
    while p:
        out.add(p)
        p = os.path.dirname(p)
    return out


# ----------------------------------------------------------------------------- running a module

_loaded: dict[Path, object] = {}


def load_module(name: str, library: Path = LIBRARY):
    """``library/<name>.py`` as a Python module (loaded once)."""
    path = library / f"{name}.py"
    if path not in _loaded:
        spec = importlib.util.spec_from_file_location(f"hostkit_library_{name}_{len(_loaded)}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _loaded[path] = mod
    return _loaded[path]


def journal_class():
    from ansible.module_utils.hostkit_journal_io import Journal

    return Journal


class JournalSpy:
    """Wraps Journal.record: after each entry is recorded, checks that it is on disk and that the
    paths it names still hold their "before" state (nothing changed ahead of its journal)."""

    def __init__(self, sysroot: str):
        self.sysroot = sysroot
        self.problems: list[str] = []
        self.recorded = 0

    def check(self, journal, entry: dict) -> None:
        self.recorded += 1
        on_disk = json.loads(Path(journal.path).read_text())["entries"]
        if not any(e.get("seq") == entry["seq"] for e in on_disk):
            self.problems.append(f"entry {entry['seq']} not on disk after record()")
        root = Path(self.sysroot)
        if entry["kind"] == "values":
            for item in entry["items"]:
                full = root / rel(item["path"])
                now = full.read_text().rstrip("\n") if full.exists() else None
                if now != item["before"]:
                    self.problems.append(f"{item['path']} was {now!r} when journaled, before {item['before']!r}")
        else:
            full = root / rel(entry["path"])
            before = entry["before"]
            if os.path.lexists(full) != bool(before.get("exists")):
                self.problems.append(f"{entry['path']} existence changed before its journal entry")
            elif before.get("exists") and hashlib.sha256(full.read_bytes()).hexdigest() != before["sha256"]:
                self.problems.append(f"{entry['path']} changed before its journal entry")


@contextlib.contextmanager
def spying(spy: JournalSpy):
    journal = journal_class()
    original = journal.record

    def record(self, entry):
        recorded = original(self, entry)
        spy.check(self, recorded)
        return recorded

    journal.record = record
    try:
        yield
    finally:
        journal.record = original


def run_inprocess(name: str, args: dict, spy: JournalSpy | None = None, library: Path = LIBRARY) -> tuple[dict, int]:
    mod = load_module(name, library)
    out = io.StringIO()
    rc = 0
    with patch_module_args(args), contextlib.redirect_stdout(out), spying(spy) if spy else contextlib.nullcontext():
        try:
            mod.main()
        except SystemExit as exc:
            rc = exc.code or 0
    return json.loads(out.getvalue().strip().splitlines()[-1]), rc


def make_shim(dest: Path) -> Path:
    """A PYTHONPATH entry where ``ansible`` is the real package with the project's module_utils
    added (every entry a symlink), and ``hostkit`` fails to import, as on a managed host."""
    real = Path(ansible.__file__).parent
    pkg = dest / "ansible"
    (pkg / "module_utils").mkdir(parents=True)
    for entry in real.iterdir():
        if entry.name not in ("module_utils", "__pycache__"):
            (pkg / entry.name).symlink_to(entry)
    for entry in (real / "module_utils").iterdir():
        if entry.name != "__pycache__":
            (pkg / "module_utils" / entry.name).symlink_to(entry)
    for util in MODULE_UTILS.glob("*.py"):
        (pkg / "module_utils" / util.name).symlink_to(util.resolve())
    (dest / "hostkit").mkdir()
    (dest / "hostkit" / "__init__.py").write_text("raise ImportError('hostkit is not installed on managed hosts')\n")
    return dest


def run_subprocess(name: str, args: dict, shim: Path, workdir: Path, library: Path = LIBRARY) -> tuple[dict, int]:
    argsfile = workdir / "args.json"
    argsfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=str(shim))
    proc = subprocess.run(
        [sys.executable, str(library / f"{name}.py"), str(argsfile)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, f"{name} printed nothing (rc {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(lines[-1]), proc.returncode


class LocalRemote:
    """:class:`hostkit.actions.Remote` on this machine: the command lines an action plugin sends over
    its connection, through ``sh -c`` (the agent's cache under /var/cache/hostkit/agent). ``calls``:
    each command and whether it had input; ``rc``: the last one's exit status."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []
        self.rc: int | None = None

    def run(self, command: str, stdin: bytes | None = None) -> tuple[int, str, str]:
        self.calls.append((command, stdin is not None))
        proc = subprocess.run(["sh", "-c", command], input=stdin or b"", capture_output=True, timeout=300)
        self.rc = proc.returncode
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def run_agent_route(name: str, args: dict) -> tuple[dict, int]:
    """Module ``name`` through its action plugin's route: the module's options checked as the plugin
    checks them, the work done by the agent (:data:`hostkit.actions.AGENT_MODULES`). The exit code is
    the agent's; a task that failed before reaching the host (bad input) has 1 and ran nothing there."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    from hostkit import actions

    spec, work = actions.AGENT_MODULES[name]
    options = {k: v for k, v in args.items() if not k.startswith("_ansible_")}
    checked = ArgumentSpecValidator(spec).validate(options)
    if checked.error_messages:  # the plugin fails the task before anything runs on the host
        return {"failed": True, "msg": "; ".join(checked.error_messages)}, 1
    shell = LocalRemote()
    result = work(
        shell,
        checked.validated_parameters,
        check_mode=bool(args.get("_ansible_check_mode")),
        diff_mode=bool(args.get("_ansible_diff")),
        python="/usr/bin/python3",
    )
    if not shell.calls:
        assert result.get("failed"), f"the agent was never run, and the task did not fail: {result}"
        return result, 1
    return result, shell.rc


# ----------------------------------------------------------------------------- one case


def module_args(case: dict, tree: Path) -> dict:
    args = substitute(dict(case["params"]), tree)
    args.setdefault("sysroot", str(tree))
    if case.get("check_mode"):
        args["_ansible_check_mode"] = True
    if case.get("diff"):
        args["_ansible_diff"] = True
    return args


def check_result(result: dict, rc: int, expect: dict, msg_contains: list[str], where: str) -> None:
    failed = bool(expect.get("failed", False))
    assert bool(result.get("failed", False)) == failed, f"{where}: failed is {result.get('failed')}: {result}"
    assert rc == (1 if failed else 0), f"{where}: exit code {rc}: {result}"
    for key, value in expect.items():
        assert key in result, f"{where}: no {key!r} in the result {result}"
        assert result[key] == value, f"{where}: {key} is {result[key]!r}, expected {value!r}"
    for text in msg_contains:
        assert text in result.get("msg", ""), f"{where}: {text!r} not in the message {result.get('msg')!r}"


def expected_tree(before: dict, before_dirs: set, files_after: dict):
    """The tree the case expects: ``before`` with the ``files_after`` changes; json-subset files
    are returned apart."""
    files, loose = dict(before), {}
    for path, spec in files_after.items():
        r = rel(path)
        if spec is None:
            files.pop(r, None)
        elif isinstance(spec, str):
            files[r] = (spec.encode(), None)
        elif "json" in spec:
            files.pop(r, None)
            loose[r] = spec
        else:
            files[r] = (spec["content"].encode(), spec.get("mode"))
    dirs = set(before_dirs)
    for r in list(files) + list(loose):
        dirs |= parents(r)
    return files, loose, dirs


def check_tree(tree: Path, before: dict, before_dirs: set, files_after: dict) -> tuple[set[str], set[str]]:
    """Assert the host files against the case; return (changed files, new directories)."""
    all_now, now_dirs = snapshot(tree)
    now = host_files(all_now)
    before = host_files(before)
    want, loose, want_dirs = expected_tree(before, before_dirs, files_after)
    for r, spec in loose.items():
        assert r in now, f"/{r} missing afterwards"
        data, mode = now.pop(r)
        doc = json.loads(data)
        for k, v in spec["json"].items():
            assert doc.get(k) == v, f"/{r}: {k} is {doc.get(k)!r}, expected {v!r}"
        if "mode" in spec:
            assert mode == spec["mode"], f"/{r}: mode {mode}, expected {spec['mode']}"
    assert sorted(now) == sorted(want), (
        f"files appeared {sorted(set(now) - set(want))}, disappeared {sorted(set(want) - set(now))}"
    )
    for r, (data, mode) in want.items():
        got_data, got_mode = now[r]
        assert got_data == data, f"/{r} is {got_data!r}, expected {data!r}"
        if mode is not None:
            assert got_mode == mode, f"/{r}: mode {got_mode}, expected {mode}"
    state_dirs = set().union(*(parents(r) for r in all_now if r.startswith(STATE_PREFIX)))
    extra_dirs = now_dirs - want_dirs - state_dirs
    assert not extra_dirs, f"directories appeared: {sorted(extra_dirs)}"
    gone_dirs = want_dirs - now_dirs
    assert not gone_dirs, f"directories disappeared: {sorted(gone_dirs)}"
    changed = {r for r in set(now) | set(loose) if r not in before or (r in now and now[r] != before[r])}
    changed |= {r for r in before if r not in now and r not in loose}
    return changed, now_dirs - before_dirs - state_dirs


def journal_docs(tree: Path) -> dict[str, dict]:
    d = tree / JOURNAL_DIR
    return {p.name: json.loads(p.read_text()) for p in sorted(d.glob("*.json"))} if d.is_dir() else {}


def project(entry: dict, keys) -> dict:
    out = {"kind": entry["kind"]}
    if entry["kind"] == "values":
        out["paths"] = [i["path"] for i in entry["items"]]
    else:
        out["path"] = entry["path"]
    if "role" in keys:
        out["role"] = entry.get("role")
    return out


def check_journal(tree: Path, run_id: str | None, expected: list[dict], before: dict) -> list[dict]:
    docs = journal_docs(tree)
    if not expected:
        assert not docs, f"a journal was written: {sorted(docs)}"
        return []
    assert list(docs) == [f"{run_id}.json"], f"journal files {sorted(docs)}, expected {run_id}.json"
    path = tree / JOURNAL_DIR / f"{run_id}.json"
    assert "%04o" % (path.stat().st_mode & 0o7777) == "0600", "the journal is not mode 0600"
    entries = docs[f"{run_id}.json"]["entries"]
    got = [project(e, set().union(*(x.keys() for x in expected))) for e in entries]
    assert got == expected, f"journal entries {got}, expected {expected}"
    for e in entries:  # each "before" is the file or value as the case had it
        if e["kind"] == "values":
            for item in e["items"]:
                data = before.get(rel(item["path"]))
                assert data is not None and data[0].decode().rstrip("\n") == item["before"], (
                    f"journal: {item['path']} before {item['before']!r}, the case had {data}"
                )
        else:
            data = before.get(rel(e["path"]))
            b = e["before"]
            assert bool(b.get("exists")) == (data is not None), f"journal: {e['path']} exists {b.get('exists')}"
            if data is not None:
                assert b["sha256"] == hashlib.sha256(data[0]).hexdigest() and b["mode"] == data[1], (
                    f"journal: {e['path']} before state differs from the case's file"
                )
    return entries


def check_would_run(tree: Path, expected: list) -> None:
    log = tree / WOULD_RUN_LOG
    if not expected:
        assert not log.exists(), f"would-run log written: {log.read_text()}"
        return
    got = [json.loads(line)["argv"] for line in log.read_text().splitlines()]
    assert got == expected, f"would run {got}, expected {expected}"


def run_case(
    module: str,
    case: dict,
    journals_changes: bool,
    mode: str,
    workdir: Path,
    shim: Path | None,
    library: Path = LIBRARY,
) -> None:
    tree = workdir / "tree"
    write_tree(tree, case.get("files", {}))
    before, before_dirs = snapshot(tree)
    args = module_args(case, tree)
    if os.path.realpath(args["sysroot"] or "/") == "/":  # this machine: only commands, or changing nothing
        assert module == "hostkit_run" or case.get("check_mode"), "a live-sysroot case must be check mode"
    spy = JournalSpy(args["sysroot"]) if mode == "inprocess" else None

    def run():
        if mode == "inprocess":
            return run_inprocess(module, args, spy, library)
        if mode == "agent":
            return run_agent_route(module, args)
        return run_subprocess(module, args, shim, workdir, library)

    result, rc = run()
    expect = substitute(case.get("result", {}), tree)
    check_result(result, rc, expect, substitute(case.get("msg_contains", []), tree), "first run")
    changed, new_dirs = check_tree(tree, before, before_dirs, substitute(case.get("files_after", {}), tree))
    entries = check_journal(tree, args.get("run_id"), case.get("journal", []), before)
    check_would_run(tree, substitute(case.get("would_run", []), tree))
    if journals_changes:
        # hostkit's own state under var/lib/hostkit (the lock a hostkit_changes call with lock takes)
        # is not the host's: it is never journaled, and rollback leaves it (see the check below).
        changed = {r for r in changed if not r.startswith(STATE_PREFIX)}
        journaled = {rel(e["path"]) for e in entries if e["kind"] != "values"}
        journaled |= {rel(i["path"]) for e in entries if e["kind"] == "values" for i in e["items"]}
        assert changed <= journaled, f"changed without a journal entry: {sorted(changed - journaled)}"
        created = {rel(d) for e in entries for d in e.get("created_dirs", [])}
        assert new_dirs <= created, f"directories made without a journal entry: {sorted(new_dirs - created)}"
    if spy:
        assert not spy.problems, spy.problems
        assert spy.recorded == len(entries)

    again = case.get("second_run")
    if again is not None:
        after, after_dirs = snapshot(tree)
        result, rc = run()
        check_result(result, rc, substitute(again.get("result", {}), tree), [], "second run")
        now, now_dirs = snapshot(tree)
        if "would_run" in again:
            check_would_run(tree, substitute(again["would_run"], tree))
            now.pop(WOULD_RUN_LOG, None)
            after.pop(WOULD_RUN_LOG, None)
        assert now == after and now_dirs == after_dirs, "the second run changed bytes: " + ", ".join(
            sorted(k for k in set(now) | set(after) if now.get(k) != after.get(k)) or ["directories"]
        )

    if journals_changes and entries:
        check_rollback(tree, before, before_dirs)


def check_rollback(tree: Path, before: dict, before_dirs: set) -> None:
    """The journal is enough to undo the run exactly: roll it back with the agent's rollback."""
    from hostkit.agent.rollback import rollback

    done = rollback(str(tree))
    assert not done["errors"] and done["verify"]["ok"], done
    now, now_dirs = snapshot(tree)
    now = {k: v for k, v in now.items() if not k.startswith(STATE_PREFIX)}
    was = {k: v for k, v in before.items() if not k.startswith(STATE_PREFIX)}
    assert now == was, "rollback left " + ", ".join(sorted(k for k in set(now) | set(was) if now.get(k) != was.get(k)))
    state_dirs = set().union(*(parents(r) for r in snapshot(tree)[0] if r.startswith(STATE_PREFIX)))
    assert now_dirs - state_dirs == before_dirs - state_dirs, "rollback left directories: " + ", ".join(
        sorted((now_dirs - state_dirs) ^ (before_dirs - state_dirs))
    )
