"""Exact rollback from a host's journal, newest change first.

Files come back with their content, mode and owner (or are removed when
hostkit created them, with the directories it created); runtime values come
back as they were. Entries whose change never happened (a run cut off
mid-way) restore a state that is already there: a no-op. A second rollback
therefore changes nothing.

On a sysroot other than ``/``, commands that act on the machine (update-grub,
systemctl) are recorded as "would run", never run.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
from dataclasses import dataclass, field

from hostkit.agent.journal import ROLLBACK_SUFFIX, journal_dir, load_runs
from hostkit.agent.journal_io import file_state, now, record_would_run, state_bytes
from hostkit.core import kthreads
from hostkit.core.sysroot import atomic_write, is_live, sysroot_path
from hostkit.core.values import normalise, same
from hostkit.errors import BadInput
from hostkit.tunables import follow_ups, resolve_follow_up, unit_removal_follow_up

IRQ_AFFINITY = re.compile(r"^/proc/irq/[0-9]+/smp_affinity_list$")

# A restored file that a service reads: the command that makes it take effect (hostkit.tunables).
FOLLOW_UP = follow_ups()


def select_runs(sysroot: str, run_id: str | None, all_runs: bool) -> list[dict]:
    runs = load_runs(sysroot)
    if run_id:
        chosen = [r for r in runs if r.get("run_id") == run_id]
        if not chosen:
            raise BadInput(
                f"no run {run_id!r} in {journal_dir(sysroot)} (runs: {', '.join(r['run_id'] for r in runs) or 'none'})"
            )
        return chosen
    runs = [r for r in runs if r.get("entries")]
    if all_runs:
        return list(reversed(runs))
    return runs[-1:]


def _file_matches(current: dict, before: dict) -> bool:
    if not before.get("exists"):
        return not current.get("exists")
    return (
        current.get("exists")
        and current.get("sha256") == before.get("sha256")
        and current.get("mode") == before.get("mode")
        and current.get("uid") == before.get("uid")
        and current.get("gid") == before.get("gid")
    )


@dataclass
class _Pass:
    """What one rollback pass has done so far, newest journal entry first."""

    sysroot: str
    check: bool
    diff: bool
    actions: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    unchanged: int = 0
    follow_ups: list[list[str]] = field(default_factory=list)
    reboot_required: bool = False
    dirs_to_remove: list[str] = field(default_factory=list)
    restored: dict[str, str | None] = field(default_factory=dict)  # path -> the text put back (oldest run wins)

    def follow_up(self, argv: list[str], first: bool = False) -> None:
        if argv not in self.follow_ups:
            self.follow_ups.insert(0, argv) if first else self.follow_ups.append(argv)


def _restore_kthreads(p: _Pass, run_id: str, entry: dict) -> None:
    """The live kernel's threads, by pid + start time."""
    for item in reversed(entry.get("items", [])):
        outcome, current = kthreads.restore(item, check=p.check)
        if outcome in ("unchanged", "gone"):
            p.unchanged += 1
            continue
        act = {
            "run_id": run_id,
            "path": item["path"],
            "kind": "kthread",
            "comm": item["comm"],
            "from": current,
            "to": item["before"],
        }
        if outcome != "restored":
            act["refused"] = outcome
        p.actions.append(act)


def _restore_values(p: _Pass, run_id: str, entry: dict) -> None:
    """Runtime values (/proc/sys, /sys), compared as their kind compares them."""
    for item in reversed(entry.get("items", [])):
        full = sysroot_path(p.sysroot, item["path"])
        try:
            with open(full) as f:
                current = f.read().rstrip("\n")
        except OSError as exc:
            p.errors.append({"path": item["path"], "error": f"cannot read: {exc.strerror}"})
            continue
        kind = item.get("kind", "str")
        if same(kind, item["before"], current):
            p.unchanged += 1
            continue
        act = {"run_id": run_id, "path": item["path"], "kind": "value", "from": current, "to": item["before"]}
        if not p.check:
            try:
                # a choice file ("always [madvise] never") takes its bracketed word back
                text = normalise(kind, item["before"]) if kind == "choice" else item["before"]
                with open(full, "w") as f:
                    f.write(text + "\n")
            except OSError as exc:
                if exc.errno not in (errno.EIO, errno.EPERM, errno.EINVAL):
                    p.errors.append({"path": item["path"], "error": str(exc)})
                    continue
                act["refused"] = f"the kernel refused the write ({errno.errorcode[exc.errno]})"
        p.actions.append(act)


def _restore_file(p: _Pass, run_id: str, entry: dict) -> None:
    """A file: its content, mode and owner back, or removed when hostkit created it; then what
    makes it take effect (hostkit.tunables)."""
    path = entry["path"]
    full = sysroot_path(p.sysroot, path)
    before = entry["before"]
    p.restored[path] = before.get("content") if before.get("exists") else None
    current = file_state(full)
    p.dirs_to_remove += [sysroot_path(p.sysroot, d) for d in entry.get("created_dirs", [])]
    if _file_matches(current, before):
        p.unchanged += 1
        return
    act = {"run_id": run_id, "path": path, "kind": "file", "action": "restore" if before.get("exists") else "remove"}
    if p.diff:
        act["diff"] = {"before": current.get("content", ""), "after": before.get("content", "")}
    if not p.check:
        try:
            if before.get("exists"):
                atomic_write(
                    full, state_bytes(before), mode=int(before["mode"], 8), uid=before.get("uid"), gid=before.get("gid")
                )
            else:
                os.unlink(full)
        except OSError as exc:
            p.errors.append({"path": path, "error": str(exc)})
            return
    p.actions.append(act)
    if not before.get("exists"):
        disable = unit_removal_follow_up(path)
        if disable:
            p.follow_up(disable, first=True)  # before the unit file is gone for good
    for prefix, argv, reboot in FOLLOW_UP:
        if path.startswith(prefix):
            if argv:  # empty: the next boot reads it
                p.follow_up(list(argv))
            p.reboot_required = p.reboot_required or reboot


# How each kind of journal entry is restored; an entry without a kind is a file.
RESTORE = {kthreads.ENTRY_KIND: _restore_kthreads, "values": _restore_values}


def _remove_created_dirs(p: _Pass) -> None:
    """Directories hostkit created, deepest first, when they are empty again."""
    for d in sorted(set(p.dirs_to_remove), key=len, reverse=True):
        if os.path.isdir(d) and not os.listdir(d):
            if not p.check:
                os.rmdir(d)
            p.actions.append({"path": d[len(sysroot_path(p.sysroot, "/")) - 1 :], "kind": "dir", "action": "remove"})


def _run_follow_ups(p: _Pass, follow_ups: list[list[str]]) -> tuple[list[dict], list[list[str]]]:
    """(what ran, what would run): on the live machine the commands run; under another sysroot they
    are recorded as "would run"."""
    ran: list[dict] = []
    would_run: list[list[str]] = []
    live = is_live(p.sysroot)
    for argv in follow_ups:
        if live and argv[0] == "systemctl" and not os.path.isdir("/run/systemd/system"):
            ran.append({"argv": argv, "skipped": "systemd is not running on this host"})
        elif live:
            try:
                proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
                ran.append({"argv": argv, "rc": proc.returncode, "stderr": proc.stderr.strip()[-300:]})
            except FileNotFoundError:
                ran.append({"argv": argv, "skipped": f"{argv[0]} is not installed"})
        else:
            record_would_run(p.sysroot, argv, "rollback restored a file this command reads")
            would_run.append(argv)
    return ran, would_run


def rollback(
    sysroot: str = "/", run_id: str | None = None, all_runs: bool = False, check: bool = False, diff: bool = False
) -> dict:
    runs = select_runs(sysroot, run_id, all_runs)
    p = _Pass(sysroot, check, diff)
    for run in runs:
        for entry in reversed(run.get("entries", [])):
            RESTORE.get(entry.get("kind"), _restore_file)(p, run["run_id"], entry)
    _remove_created_dirs(p)
    # A placeholder (tuned's previous profile) is resolved from the files as rollback leaves them
    # (also in check mode, where nothing is written).
    follow_ups = [
        resolve_follow_up(
            a,
            lambda path: (
                p.restored[path] if path in p.restored else file_state(sysroot_path(sysroot, path)).get("content")
            ),
        )
        for a in p.follow_ups
    ]
    ran, would_run = [], follow_ups
    if not check:
        ran, would_run = _run_follow_ups(p, follow_ups)
        for run in runs:
            marker = os.path.join(journal_dir(sysroot), run["run_id"] + ROLLBACK_SUFFIX)
            atomic_write(marker, (json.dumps({"time": now(), "actions": len(p.actions)}) + "\n").encode(), mode=0o600)
    # A restarted irqbalance owns IRQ placement again from the moment it starts: it may move an
    # IRQ the rollback just put back before the re-check reads it (seen on a real kernel).
    irqbalance_back = any("irqbalance" in " ".join(r["argv"]) and r.get("rc") == 0 for r in ran)
    verify = verify_restored(sysroot, runs, irqbalance_owns_irqs=irqbalance_back) if not check else None
    return {
        "changed": bool(p.actions),
        "check": check,
        "runs": [r["run_id"] for r in runs],
        "actions": p.actions,
        "unchanged": p.unchanged,
        "errors": p.errors,
        "ran": ran,
        "would_run": would_run,
        "reboot_required": p.reboot_required and bool(p.actions),
        "verify": verify,
    }


def restored(doc: dict) -> bool:
    """The one rule for "rolled back": a rollback report (:func:`rollback`) with no error and whose
    re-check found nothing still off (no re-check: a check-mode run). The agent's exit status, the
    CLI's and a gate's "run ... rolled back" all read it."""
    return not doc["errors"] and (doc["verify"] is None or bool(doc["verify"]["ok"]))


def verify_restored(sysroot: str, runs: list[dict], irqbalance_owns_irqs: bool = False) -> dict:
    """Re-check: every journaled path holds its oldest recorded 'before' again. With
    ``irqbalance_owns_irqs``, an IRQ affinity that differs is listed as moved by irqbalance,
    not as a mismatch (the IRQs were handed back to it)."""
    expected: dict[str, tuple] = {}
    for run in runs:  # newest first: the oldest run's 'before' is written last and wins
        for entry in reversed(run.get("entries", [])):
            if entry.get("kind") == kthreads.ENTRY_KIND:
                for item in reversed(entry.get("items", [])):
                    expected[item["path"]] = ("kthread", None, item)
            elif entry.get("kind") == "values":
                for item in reversed(entry.get("items", [])):
                    expected[item["path"]] = ("value", item.get("kind", "str"), item["before"])
            else:
                expected[entry["path"]] = ("file", None, entry["before"])
    mismatches = []
    for path, (kind, vkind, before) in expected.items():
        full = sysroot_path(sysroot, path)
        if kind == "kthread":
            got = kthreads.verify(before)
            if got is not None:
                mismatches.append({"path": path, "expected": before["before"], "got": got})
        elif kind == "file":
            if not _file_matches(file_state(full), before):
                mismatches.append(
                    {
                        "path": path,
                        "expected": "absent"
                        if not before.get("exists")
                        else f"sha256 {before['sha256'][:12]} mode {before['mode']}",
                        "got": "present" if os.path.exists(full) else "absent",
                    }
                )
        else:
            try:
                with open(full) as f:
                    current = f.read().rstrip("\n")
            except OSError:
                current = None
            if current is None or not same(vkind, before, current):
                mismatches.append({"path": path, "expected": before, "got": current})
    moved = []
    if irqbalance_owns_irqs:
        moved = [m for m in mismatches if IRQ_AFFINITY.match(m["path"])]
        mismatches = [m for m in mismatches if not IRQ_AFFINITY.match(m["path"])]
    return {"ok": not mismatches, "checked": len(expected), "mismatches": mismatches, "moved_by_irqbalance": moved}
