# -*- coding: utf-8 -*-
"""Kernel threads on the live kernel: which may move, where to, moving them journaled, putting them back.

A kernel thread (``PF_KTHREAD`` in ``/proc/<pid>/stat``'s flags) *may be moved* unless the kernel
forbids it: ``PF_NO_SETAFFINITY`` (``kthread_bind()`` sets it on every per-CPU thread -
``ksoftirqd/N``, ``migration/N``, ``cpuhp/N``, ``kworker/N:*`` - and workqueue workers follow
the workqueue cpumask instead), where ``sched_setaffinity(2)`` fails with EINVAL. Threaded IRQ
handlers (``irq/<n>-<name>``) are left too: the kernel sets their affinity from their IRQ's
(``irq_thread_check_affinity``), which the ``irq_affinity`` role owns. tuned's scheduler plugin
(``isolated_cores``) tries every thread and ignores the failures of bound ones; its new affinity
is the thread's current one intersected with the non-isolated CPUs, or all non-isolated CPUs when
that is empty - :func:`target` is the same rule, so a per-node thread (``kswapd<N>``,
``kcompactd<N>``, allowed on its node's CPUs) goes to its node's housekeeping CPUs.

Only a live host has threads: under a sysroot other than ``/`` nothing here reads or moves
anything. Each move is journaled before it is made, keyed by boot id, pid *and* start time, so
rollback puts back only the same thread (a pid reused by another thread, or the same pid and tick in
a later boot, is left alone).

Shared by the agent (facts, rollback) and the ``hostkit_kthreads`` module (as
``module_utils/hostkit_kthreads.py``, a symlink to this file), and run at every boot by the
``kthreads`` role's unit (``roles/kthreads/files/`` links here and to ``cpulist.py``; the role
installs both side by side)::

    python3 hostkit_kthreads.py --housekeeping 0-1,8-9 --isolated 2-7,10-15

Standard library only; Python 2-compatible syntax because Ansible may load it anywhere.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import sys

try:  # in the hostkit package (the agent zipapp, the controller)
    from hostkit.core.cpulist import format_cpulist, parse_cpulist
except ImportError:
    try:  # inside an Ansible module
        from ansible.module_utils.hostkit_cpulist import format_cpulist, parse_cpulist
    except ImportError:  # the boot-time unit: the kthreads role installs cpulist.py beside this file
        from hostkit_cpulist import format_cpulist, parse_cpulist

PF_KTHREAD = 0x00200000
PF_NO_SETAFFINITY = 0x04000000
IRQ_THREAD_PREFIX = "irq/"
NOT_LIVE = "not available (sysroot): a sysroot has no live kernel threads"
ENTRY_KIND = "kthreads"


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except (IOError, OSError):
        return None


def read_thread(pid, proc="/proc"):
    """One task's ``{pid, comm, flags, start, cpus}`` (``start``: clock ticks after boot, field 22
    of its stat; ``cpus``: its Cpus_allowed_list), or None when it is gone."""
    stat = _read("%s/%d/stat" % (proc, pid))
    status = _read("%s/%d/status" % (proc, pid))
    if stat is None or status is None:
        return None
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()  # fields[0] is field 3 (state)
    cpus = None
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            cpus = line.split(":", 1)[1].strip()
    if cpus is None:
        return None
    return {"pid": pid, "comm": comm, "flags": int(fields[6]), "start": int(fields[19]), "cpus": cpus}


def kernel_threads(proc="/proc"):
    """Every kernel thread now running, by pid."""
    out = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        t = read_thread(int(name), proc)
        if t is not None and t["flags"] & PF_KTHREAD:
            out.append(t)
    return sorted(out, key=lambda t: t["pid"])


def movable(thread):
    """True for a kernel thread hostkit may move (see the module docstring)."""
    return not thread["flags"] & PF_NO_SETAFFINITY and not thread["comm"].startswith(IRQ_THREAD_PREFIX)


def target(cpus, housekeeping):
    """Where a thread allowed on ``cpus`` goes: those of them that are housekeeping, else every
    housekeeping CPU (tuned's rule: a per-node thread stays on its node)."""
    return (cpus & housekeeping) or housekeeping


def allowed_on(threads, cpus):
    """The threads (anything with a ``cpus`` cpulist: live threads, facts entries) allowed on any of ``cpus``."""
    return [t for t in threads if parse_cpulist(t["cpus"]) & cpus]


def strays(threads, isolated):
    """The movable threads allowed on an isolated CPU."""
    return [t for t in allowed_on(threads, isolated) if movable(t)]


def facts(live, proc="/proc"):
    """``facts["kthreads"]``: every movable kernel thread and its allowed CPUs (live hosts)."""
    if not live:
        return {"available": False, "reason": NOT_LIVE, "movable": [], "bound": None}
    threads = kernel_threads(proc)
    return {
        "available": True,
        "reason": None,
        "movable": [{"pid": t["pid"], "comm": t["comm"], "cpus": t["cpus"]} for t in threads if movable(t)],
        "bound": sum(1 for t in threads if not movable(t)),
    }


def boot_id(proc="/proc"):
    """This boot's id: a pid and start time (ticks since boot) name a thread within one boot only
    (kthreadd is pid 2 at the same tick in every boot)."""
    return (_read(proc + "/sys/kernel/random/boot_id") or "").strip() or None


def plan_moves(threads, housekeeping, isolated, boot=None):
    """Pure: ``[{pid, start, boot, comm, path, before, after}]`` for every stray thread."""
    out = []
    for t in strays(threads, isolated):
        after = format_cpulist(target(parse_cpulist(t["cpus"]), housekeeping))
        out.append(
            {
                "pid": t["pid"],
                "start": t["start"],
                "boot": boot,
                "comm": t["comm"],
                "path": "/proc/%d" % t["pid"],
                "before": t["cpus"],
                "after": after,
            }
        )
    return out


def _set(pid, cpus):
    """sched_setaffinity; returns None, or why it did not happen (``gone``, ``refused: ...``)."""
    try:
        os.sched_setaffinity(pid, parse_cpulist(cpus))
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return "gone"
        if exc.errno in (errno.EINVAL, errno.EPERM):
            return "refused: %s" % os.strerror(exc.errno)
        raise
    return None


def apply_moves(journal, role, todo):
    """Journal every move of ``todo`` (:func:`plan_moves`) in one entry, then make them. Returns
    ``(moved, refused, gone)``; a thread the kernel refuses, or one that exited meanwhile, is
    dropped from the journal (nothing changed there)."""
    try:
        entry = journal.record({"kind": ENTRY_KIND, "role": role, "items": todo})
    except (IOError, OSError) as exc:
        raise IOError("cannot write the journal %s (no thread moved): %s" % (journal.path, exc))
    moved, refused, gone = [], [], []  # type: list, list, list
    for t in todo:
        why = _set(t["pid"], t["after"])
        if why is None:
            moved.append(t)
        else:
            (gone if why == "gone" else refused).append(dict(t, error=why))
    if refused or gone:
        journal.drop_items(entry["seq"], [t["path"] for t in refused + gone])
    return moved, refused, gone


def same_thread(item, proc="/proc"):
    """The thread an item names, when it still runs (same boot, pid and start time), else None."""
    if item.get("boot") != boot_id(proc):
        return None
    t = read_thread(item["pid"], proc)
    return t if t is not None and t["start"] == item["start"] else None


def restore(item, check=False, proc="/proc"):
    """Put one journaled thread back: ``("unchanged" | "gone" | "restored" | "refused: ...", current)``."""
    t = same_thread(item, proc)
    if t is None:
        return "gone", None
    if parse_cpulist(t["cpus"]) == parse_cpulist(item["before"]):
        return "unchanged", t["cpus"]
    if check:
        return "restored", t["cpus"]
    why = _set(item["pid"], item["before"])
    return ("restored" if why is None else ("gone" if why == "gone" else why)), t["cpus"]


def verify(item, proc="/proc"):
    """None when the journaled thread is back on its ``before`` CPUs (or gone), else what it has."""
    t = same_thread(item, proc)
    if t is None or parse_cpulist(t["cpus"]) == parse_cpulist(item["before"]):
        return None
    return t["cpus"]


def boot(argv=None, proc="/proc"):
    """The boot-time unit: the same moves as :func:`move`, logged on stdout (the unit's journal),
    not journaled (the unit file is, and rollback removes it). Exit 0; 2 on bad arguments."""
    import argparse

    ap = argparse.ArgumentParser(description="Move the kernel threads that may move off the isolated CPUs.")
    ap.add_argument("--housekeeping", required=True, help="cpulist the threads go to")
    ap.add_argument("--isolated", required=True, help="cpulist no movable kernel thread may stay on")
    args = ap.parse_args(argv)
    try:
        housekeeping, isolated = parse_cpulist(args.housekeeping), parse_cpulist(args.isolated)
    except ValueError as exc:
        ap.error(str(exc))
    if not housekeeping:
        ap.error("--housekeeping is empty")
    for t in plan_moves(kernel_threads(proc), housekeeping, isolated, boot_id(proc)):
        why = _set(t["pid"], t["after"])
        sys.stdout.write(
            "%s %d (%s): %s -> %s\n" % ("moved" if why is None else why, t["pid"], t["comm"], t["before"], t["after"])
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(boot())
