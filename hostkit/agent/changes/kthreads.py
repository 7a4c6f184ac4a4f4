# -*- coding: utf-8 -*-
"""The kernel threads that may move, moved onto the housekeeping CPUs (live host only), each move
journaled first: the work of the module ``hostkit_kthreads`` and of a ``kthreads`` change of
``hostkit_changes``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:  # as Ansible ships it (AnsiballZ), and in-process beside the project's module_utils
    from ansible.module_utils.hostkit_cpulist import parse_cpulist
    from ansible.module_utils.hostkit_journal_io import ModuleFailure, is_live
    from ansible.module_utils.hostkit_kthreads import (
        NOT_LIVE,
        apply_moves,
        boot_id,
        kernel_threads,
        movable,
        plan_moves,
    )
except ImportError:  # in hostkit's agent on the host, which carries no Ansible
    from hostkit.agent.journal_io import ModuleFailure, is_live
    from hostkit.core.cpulist import parse_cpulist
    from hostkit.core.kthreads import NOT_LIVE, apply_moves, boot_id, kernel_threads, movable, plan_moves

OPTIONS = dict(
    housekeeping=dict(type="str", required=True),
    isolated=dict(type="str", required=True),
)
RULES = {}
SHOWN = ("pid", "comm", "before", "after")


def check_params(params):
    """The two cpulists, parsed: housekeeping non-empty, sharing no CPU with isolated."""
    try:
        housekeeping, isolated = parse_cpulist(params["housekeeping"]), parse_cpulist(params["isolated"])
    except ValueError as exc:
        raise ModuleFailure("bad cpulist: %s; nothing changed" % exc)
    if not housekeeping or housekeeping & isolated:
        raise ModuleFailure(
            "housekeeping %r must be non-empty and share no CPU with isolated %r; nothing changed"
            % (params["housekeeping"], params["isolated"])
        )
    return housekeeping, isolated


def decide(params, threads, boot=None):
    """Pure: the moves to make (``threads``: the live kernel threads, None under a sysroot; ``boot``:
    this boot's id, journaled with each thread) and the result."""
    housekeeping, isolated = check_params(params)
    if threads is None:
        return [], dict(
            changed=False,
            moved=[],
            unchanged=0,
            kernel_refused=[],
            gone=[],
            skipped_reason="%s (%s): no kernel thread to move" % (NOT_LIVE, params["sysroot"]),
        )
    todo = plan_moves(threads, housekeeping, isolated, boot)
    return todo, dict(
        changed=bool(todo),
        moved=[{k: t[k] for k in SHOWN} for t in todo],
        unchanged=sum(1 for t in threads if movable(t)) - len(todo),
        kernel_refused=[],
        gone=[],
    )


def diff(todo):
    """Each thread to move, as ``comm (pid) = cpus`` lines before and after."""
    return dict(
        before="".join("%s (%d) = %s\n" % (t["comm"], t["pid"], t["before"]) for t in todo),
        after="".join("%s (%d) = %s\n" % (t["comm"], t["pid"], t["after"]) for t in todo),
    )


def do(params, journal, todo, result):
    """Journal the moves, make them; what the kernel refused or what exited is reported, not moved."""
    try:
        moved, refused, gone = apply_moves(journal, params["role"], todo)
    except IOError as exc:
        raise ModuleFailure(str(exc))
    result.update(
        changed=bool(moved), moved=[{k: t[k] for k in SHOWN} for t in moved], kernel_refused=refused, gone=gone
    )


def work(params, journal, check_mode=False, diff_mode=False):
    """Read the live threads (none under a lab sysroot), decide, then (unless in check mode) move."""
    live = is_live(params["sysroot"])
    todo, result = decide(params, kernel_threads() if live else None, boot_id() if live else None)
    if diff_mode and todo:
        result["diff"] = diff(todo)
    if todo and not check_mode:
        do(params, journal, todo, result)
    return result
