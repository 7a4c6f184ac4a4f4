"""hostkit's Ansible modules (library/) on temporary sysroots: the JSON cases in
tests/module_cases/, each run in-process and as a subprocess (see tests/modules/runner.py), and
the checks that every module has cases for each behaviour the project promises."""

from __future__ import annotations

import ast
import errno
import json
import os

import pytest

from hostkit.actions import ARG_SPECS
from hostkit.core.kernel_args import remove_grub_args
from tests.modules.runner import (
    AGENT_MODULES,
    CASES_DIR,
    LIBRARY,
    MODES,
    MODULE_UTILS,
    REPO,
    load_cases,
    make_shim,
    run_case,
    run_inprocess,
    snapshot,
)
from tests.unit.test_agent import _python3_only

CASES = load_cases()
# The modules that run on hosts. The collection's action-plugin modules (facts, plan, smoke, audit,
# rollback: library/ holds only their documentation) run hostkit's code on the controller and are
# tests/unit/test_collection_actions.py's.
MODULES = sorted(p.stem for p in LIBRARY.glob("*.py") if p.stem not in ARG_SPECS)


@pytest.fixture(scope="session")
def shim(tmp_path_factory):
    return make_shim(tmp_path_factory.mktemp("ansible-shim"))


@pytest.mark.parametrize(
    "module, case, journals, mode",
    [
        pytest.param(m, c, j, mode, id=f"{i}-{mode}")
        for i, m, c, j in CASES
        for mode in MODES + ((AGENT_MODULES[m],) if m in AGENT_MODULES else ())
    ],
)
def test_module_case(module, case, journals, mode, tmp_path, shim):
    systemd = case.get("requires", {}).get("systemd")
    if systemd is not None and os.path.isdir("/run/systemd/system") != systemd:
        pytest.skip(f"needs a host where systemd is {'' if systemd else 'not '}running")
    run_case(module, case, journals, mode, tmp_path, shim)


# ----------------------------------------------------------------------------- the cases are evidence


def _covers(case: dict, journals: bool) -> set[str]:
    """What a case really shows, from its shape (its "covers" list is checked against this)."""
    result = case.get("result", {})
    after = case.get("files_after", {})
    shown = set()
    if not result.get("failed") and (after or case.get("would_run")) and not case.get("check_mode"):
        shown.add("change")
    if (case.get("second_run") or {}).get("result", {}).get("changed") is False:
        shown.add("idempotent")
    if case.get("check_mode") and all(p.startswith("/var/lib/hostkit/") for p in after):
        shown.add("check")
    if result.get("failed") and case.get("msg_contains") and not after and not case.get("journal"):
        shown.add("bad_input")
    if journals and case.get("journal") and not result.get("failed"):
        shown.add("journal")
    if (
        result.get("failed")
        and "/var/lib/hostkit/journal" in case.get("files", {})
        and not after
        and any("cannot write the journal" in m for m in case.get("msg_contains", []))
    ):
        shown.add("journal_first")
    return shown


@pytest.mark.parametrize("module, case, journals", [pytest.param(m, c, j, id=i) for i, m, c, j in CASES])
def test_case_covers_what_it_claims(module, case, journals):
    claimed = set(case.get("covers", []))
    assert claimed <= _covers(case, journals), f"claims {sorted(claimed - _covers(case, journals))} it does not show"


# A module that changes the live kernel alone (nothing under a sysroot, where it reports itself skipped):
# its change, journal and journal-first evidence is on this machine's real kernel, in the test named.
LIVE_KERNEL_ONLY = {"hostkit_kthreads": "tests/unit/test_kthreads.py"}


@pytest.mark.parametrize("module", MODULES)
def test_every_module_has_cases_for_each_behaviour(module):
    cases = [(c, j) for _, m, c, j in CASES if m == module]
    assert cases, f"no cases for library/{module}.py in {CASES_DIR}"
    journals = cases[0][1]
    needed = {"change", "idempotent", "check", "bad_input"} | ({"journal", "journal_first"} if journals else set())
    if module in LIVE_KERNEL_ONLY:
        needed -= {"change", "journal", "journal_first"}
    covered = set().union(*(set(c.get("covers", [])) for c, _ in cases))
    assert needed <= covered, f"{module}: no case covers {sorted(needed - covered)}"


def test_case_names_are_unique():
    ids = [i for i, _, _, _ in CASES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


# Each kind of change: the work of one module and of one kind of hostkit_changes' changes.
CHANGE_KINDS = sorted(p.stem for p in MODULE_UTILS.glob("hostkit_change_*.py") if p.stem != "hostkit_change_set")


@pytest.mark.parametrize("module", MODULES)
def test_module_keeps_python2_syntax_and_does_its_work_in_one_place(module):
    """A module's source keeps Python 2 syntax; its work is module_utils code the agent runs too (a
    kind of change, the set of them, the lock: hostkit/agent/), or the module's own decide() and do()."""
    source = (LIBRARY / f"{module}.py").read_text()
    tree = ast.parse(source)
    assert not _python3_only(tree), _python3_only(tree)
    assert "from __future__ import absolute_import, division, print_function" in source
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    utils = [
        n.module.split(".")[-1]
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("ansible.module_utils.hostkit_")
    ]
    shared = [
        u
        for u in utils
        if (MODULE_UTILS / f"{u}.py").resolve().is_relative_to(REPO / "hostkit" / "agent") and u != "hostkit_journal_io"
    ]
    if module == "hostkit_changes":  # the set of every kind, as the agent runs it too
        assert shared == ["hostkit_change_set"], shared
        from ansible.module_utils.hostkit_change_set import KINDS

        assert sorted(f"hostkit_change_{k}" for k in KINDS) == CHANGE_KINDS
    else:
        assert shared or {"decide", "do"} <= functions, f"{module}: no shared work, no decide() and do()"


@pytest.mark.parametrize("kind", CHANGE_KINDS)
def test_a_kind_of_change_keeps_python2_syntax_and_splits_decide_from_do(kind):
    source = (MODULE_UTILS / f"{kind}.py").read_text()
    tree = ast.parse(source)
    assert not _python3_only(tree), _python3_only(tree)
    assert "from __future__ import absolute_import, division, print_function" in source
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    names = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert {"decide", "work"} <= functions and {"OPTIONS", "RULES"} <= names, (kind, sorted(functions))
    assert "do" in functions or kind == "hostkit_change_irqs", kind  # irqs does its writing as values


# ----------------------------------------------------------------------------- what JSON cannot set up


def _case(module: str, name: str) -> tuple[dict, bool]:
    return next((c, j) for i, m, c, j in CASES if m == module and c["name"] == name)


def test_the_runner_catches_a_module_that_writes_before_journaling(tmp_path, shim):
    """A copy of hostkit_file that writes the file and then journals it: the in-process spy fails
    the normal case, and the unwritable-journal case fails in both modes."""
    library = tmp_path / "library"
    library.mkdir()
    work = (MODULE_UTILS / "hostkit_change_file.py").read_text()
    early = (
        "    if data is not None:\n"
        '        with open(sysroot_path(params["sysroot"], params["path"]), "wb") as f:\n'
        "            f.write(data)\n"
        "    try:\n        change_file("
    )
    mutated = work.replace("    try:\n        change_file(", early)
    assert mutated != work
    inlined = "\n".join(
        line for line in mutated.splitlines() if not line.startswith(("from __future__", "__metaclass__"))
    )
    shared = "from ansible.module_utils.hostkit_change_file import OPTIONS, RULES, work\n"
    source = (LIBRARY / "hostkit_file.py").read_text()
    assert shared in source
    (library / "hostkit_file.py").write_text(source.replace(shared, inlined + "\n"))
    case, journals = _case("hostkit_file", "an existing file gets the new content and mode")
    with pytest.raises(AssertionError, match="changed before its journal entry"):
        run_case("hostkit_file", case, journals, "inprocess", tmp_path / "a", shim, library)
    case, journals = _case("hostkit_file", "a journal that cannot be written leaves the file as it was")
    for mode in MODES:
        with pytest.raises(AssertionError, match="/etc/x.conf is b'new"):
            run_case("hostkit_file", case, journals, mode, tmp_path / mode, shim, library)


def _values_tree(tmp_path):
    tree = tmp_path / "tree"
    for irq in (30, 31):
        (tree / f"proc/irq/{irq}").mkdir(parents=True)
        (tree / f"proc/irq/{irq}/smp_affinity_list").write_text("0-7\n")
    items = [{"path": f"/proc/irq/{irq}/smp_affinity_list", "value": "0-1", "kind": "cpulist"} for irq in (30, 31)]
    return tree, items


def _values_work():
    """The values kind's module_utils, as hostkit_values and hostkit_changes import it in-process."""
    import ansible.module_utils.hostkit_change_values as values

    return values


def _refusing_open(refused_paths):
    import builtins

    def fake_open(path, mode="r", *args, **kwargs):
        if "w" in mode and any(str(path).endswith(p) for p in refused_paths):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return builtins.open(path, mode, *args, **kwargs)

    return fake_open


def test_values_a_write_the_kernel_refuses_is_reported_and_dropped_from_the_journal(tmp_path, monkeypatch):
    tree, items = _values_tree(tmp_path)
    monkeypatch.setattr(_values_work(), "open", _refusing_open(["/proc/irq/30/smp_affinity_list"]), raising=False)
    result, rc = run_inprocess(
        "hostkit_values", {"sysroot": str(tree), "run_id": "r1", "items": items, "tolerate_refused": True}
    )
    assert rc == 0 and result["changed"] is True and result["written"] == 1
    assert result["refused"] == [{"path": "/proc/irq/30/smp_affinity_list", "error": "Input/output error"}]
    assert (tree / "proc/irq/30/smp_affinity_list").read_text() == "0-7\n"
    assert (tree / "proc/irq/31/smp_affinity_list").read_text() == "0-1\n"
    entries = json.loads((tree / "var/lib/hostkit/journal/r1.json").read_text())["entries"]
    assert [[i["path"] for i in e["items"]] for e in entries] == [["/proc/irq/31/smp_affinity_list"]]


def test_values_nothing_written_leaves_no_journal_to_roll_back(tmp_path, monkeypatch):
    tree, items = _values_tree(tmp_path)
    monkeypatch.setattr(_values_work(), "open", _refusing_open(["smp_affinity_list"]), raising=False)
    result, rc = run_inprocess(
        "hostkit_values", {"sysroot": str(tree), "run_id": "r1", "items": items, "tolerate_refused": True}
    )
    assert rc == 0 and result["changed"] is False and result["written"] == 0 and len(result["refused"]) == 2
    assert not (tree / "var/lib/hostkit/journal/r1.json").exists()


def test_values_a_refused_write_without_tolerate_refused_fails_after_the_journal(tmp_path, monkeypatch):
    tree, items = _values_tree(tmp_path)
    monkeypatch.setattr(_values_work(), "open", _refusing_open(["/proc/irq/30/smp_affinity_list"]), raising=False)
    result, rc = run_inprocess("hostkit_values", {"sysroot": str(tree), "run_id": "r1", "items": items})
    assert rc == 1 and result["failed"] is True
    assert result["msg"].startswith("writing /proc/irq/30/smp_affinity_list failed")
    assert result["changes"][0]["path"] == "/proc/irq/30/smp_affinity_list"
    # Both items were journaled before the first write; the second was never written.
    entries = json.loads((tree / "var/lib/hostkit/journal/r1.json").read_text())["entries"]
    assert [len(e["items"]) for e in entries] == [2]
    assert (tree / "proc/irq/31/smp_affinity_list").read_text() == "0-7\n"


def test_lock_taken_by_another_run_between_read_and_create(tmp_path, monkeypatch):
    """The O_EXCL create loses the race: the module decides again on the winner's lock."""
    from ansible.module_utils import hostkit_host_lock as mod

    lock = tmp_path / "var/lib/hostkit/lock"
    lock.parent.mkdir(parents=True)
    lock.write_text(json.dumps({"run_id": "r1", "controller": "ctl:1", "time": 0}))
    real, calls = mod.read_holder, []

    def stale_first(path):
        calls.append(path)
        return None if len(calls) == 1 else real(path)

    monkeypatch.setattr(mod, "read_holder", stale_first)
    before = snapshot(tmp_path)
    result, rc = run_inprocess("hostkit_lock", {"sysroot": str(tmp_path), "run_id": "r2"})
    assert rc == 1 and result["locked"] is True and "host locked by hostkit run r1" in result["msg"]
    assert len(calls) == 2
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "live, systemd, check, action, changed",
    [
        (False, True, False, "record", False),
        (False, True, True, None, False),
        (True, True, True, None, True),
        (True, False, False, None, False),
        (True, True, False, "run", True),
    ],
)
def test_run_decides_from_the_host_it_is_on(live, systemd, check, action, changed):
    from ansible.module_utils.hostkit_change_run import decide

    decided, result = decide({"argv": ["systemctl", "daemon-reload"]}, live, systemd, check)
    assert decided == action and result["changed"] is changed


def test_run_retries_a_command_until_it_succeeds_then_fails_with_its_output():
    from ansible.module_utils.hostkit_change_run import ModuleFailure, do

    calls, slept = [], []
    answers = iter([(1, "", "connection refused"), (1, "", "connection refused"), (0, "v1.7", "")])
    result = {}
    do(
        {"argv": ["ctr", "version"], "retries": 5, "delay": 0.5},
        "run",
        result,
        runner=lambda argv: calls.append(argv) or next(answers),
        sleep=slept.append,
    )
    assert (len(calls), slept, result["rc"], result["stdout"]) == (3, [0.5, 0.5], 0, "v1.7")
    with pytest.raises(ModuleFailure, match=r"ctr version failed \(rc=1\): connection refused"):
        do(
            {"argv": ["ctr", "version"], "retries": 2, "delay": 0},
            "run",
            {},
            runner=lambda argv: (1, "", "connection refused"),
            sleep=lambda s: None,
        )


# ----------------------------------------------------------------------------- the shared parsers the modules use


@pytest.mark.parametrize(
    "text, names, expected",
    [
        ('GRUB_CMDLINE_LINUX="a isolcpus=1 b"\n', {"isolcpus"}, 'GRUB_CMDLINE_LINUX="a b"\n'),
        ("GRUB_CMDLINE_LINUX='a isolcpus=1'\r\n", {"isolcpus"}, "GRUB_CMDLINE_LINUX='a'\r\n"),
        ("GRUB_CMDLINE_LINUX=isolcpus=1\n", {"isolcpus"}, 'GRUB_CMDLINE_LINUX=""\n'),
        ('GRUB_CMDLINE_LINUX="a \\"isolcpus=1 2\\" b"\n', {"isolcpus"}, 'GRUB_CMDLINE_LINUX="a b"\n'),
        ('GRUB_CMDLINE_LINUX="a isolcpus=1  b" # x\n', {"nohz"}, 'GRUB_CMDLINE_LINUX="a isolcpus=1  b" # x\n'),
        ('GRUB_CMDLINE_LINUX="a isolcpus=1\n', {"isolcpus"}, 'GRUB_CMDLINE_LINUX="a"\n'),  # unbalanced quote
        (
            '  GRUB_CMDLINE_LINUX_DEFAULT="isolcpus"\nX="isolcpus=1"\n',
            {"isolcpus"},
            '  GRUB_CMDLINE_LINUX_DEFAULT=""\nX="isolcpus=1"\n',
        ),
    ],
)
def test_remove_grub_args(text, names, expected):
    assert remove_grub_args(text, names) == expected
