#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: move the kernel threads that may move off the isolated CPUs (live hosts), journaled."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hostkit_kthreads
short_description: Move movable kernel threads (kthreadd, kswapd, kcompactd, rcu, ...) onto housekeeping CPUs
description:
  - Every kernel thread whose allowed CPUs include an isolated CPU and that the kernel lets move
    (no C(PF_NO_SETAFFINITY); threaded IRQ handlers follow their IRQ and are left) gets the
    housekeeping CPUs among its allowed ones, or every housekeeping CPU when it has none (a per-node
    thread such as C(kswapd1) stays on its node).
  - Each thread's previous C(Cpus_allowed_list) is journaled before the move, keyed by boot id, pid and
    start time, so rollback restores only the same thread.
  - Under a sysroot other than V(/) there are no live kernel threads, so nothing is read or changed, and
    RV(skipped_reason) says so (hostkit reports the step skipped, with that reason, never ok).
author: hostkit maintainers (!UNKNOWN)
extends_documentation_fragment:
  - hostkit.tuning.host
  - hostkit.tuning.host.journal
options:
  housekeeping:
    description: The housekeeping CPUs (a kernel cpulist) the threads go to.
    type: str
    required: true
  isolated:
    description: The isolated CPUs (a kernel cpulist) no movable kernel thread may stay allowed on.
    type: str
    required: true
  role:
    default: kthreads
"""

EXAMPLES = r"""
- name: Move the movable kernel threads onto the housekeeping CPUs
  hostkit.tuning.hostkit_kthreads:
    housekeeping: 0-1,8-9
    isolated: 2-7,10-15
    run_id: "{{ hostkit_run_id }}"
"""

RETURN = r"""
moved:
  description: The threads moved (to be moved, in check mode).
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: The thread's pid.
      type: int
      sample: 97
    comm:
      description: Its name.
      type: str
      sample: kswapd0
    before:
      description: Its Cpus_allowed_list before.
      type: str
      sample: 0-15
    after:
      description: Its Cpus_allowed_list after.
      type: str
      sample: 0-1
unchanged:
  description: How many movable kernel threads were already off the isolated CPUs.
  returned: always
  type: int
  sample: 12
kernel_refused:
  description: Threads the kernel refused to move (sched_setaffinity EINVAL/EPERM), dropped from the journal.
  returned: always
  type: list
  elements: dict
gone:
  description: Threads that exited before they were moved, dropped from the journal.
  returned: always
  type: list
  elements: dict
skipped_reason:
  description: Why nothing was moved on this host.
  returned: under a sysroot other than V(/)
  type: str
  sample: "not available (sysroot): a sysroot has no live kernel threads (/srv/lab/h1): no kernel thread to move"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_cpulist import parse_cpulist
from ansible.module_utils.hostkit_journal import ModuleFailure, is_live, journaled_module_options, run_journaled
from ansible.module_utils.hostkit_kthreads import NOT_LIVE, apply_moves, boot_id, kernel_threads, movable, plan_moves

SHOWN = ("pid", "comm", "before", "after")


def check_params(params):
    """The two cpulists, parsed: housekeeping non-empty, sharing no CPU with isolated."""
    try:
        housekeeping, isolated = parse_cpulist(params["housekeeping"]), parse_cpulist(params["isolated"])
    except ValueError as exc:
        raise ModuleFailure("bad cpulist: %s; nothing changed" % exc)
    if not housekeeping or housekeeping & isolated:
        raise ModuleFailure("housekeeping %r must be non-empty and share no CPU with isolated %r; nothing changed"
                            % (params["housekeeping"], params["isolated"]))
    return housekeeping, isolated


def decide(params, threads, boot=None):
    """Pure: the moves to make (``threads``: the live kernel threads, None under a sysroot; ``boot``:
    this boot's id, journaled with each thread) and the result."""
    housekeeping, isolated = check_params(params)
    if threads is None:
        return [], dict(changed=False, moved=[], unchanged=0, kernel_refused=[], gone=[],
                        skipped_reason="%s (%s): no kernel thread to move" % (NOT_LIVE, params["sysroot"]))
    todo = plan_moves(threads, housekeeping, isolated, boot)
    return todo, dict(changed=bool(todo), moved=[dict((k, t[k]) for k in SHOWN) for t in todo],
                      unchanged=sum(1 for t in threads if movable(t)) - len(todo), kernel_refused=[], gone=[])


def diff(todo):
    """Each thread to move, as ``comm (pid) = cpus`` lines before and after."""
    return dict(before="".join("%s (%d) = %s\n" % (t["comm"], t["pid"], t["before"]) for t in todo),
                after="".join("%s (%d) = %s\n" % (t["comm"], t["pid"], t["after"]) for t in todo))


def do(params, journal, todo, result):
    """Journal the moves, make them; what the kernel refused or what exited is reported, not moved."""
    try:
        moved, refused, gone = apply_moves(journal, params["role"], todo)
    except IOError as exc:
        raise ModuleFailure(str(exc))
    result.update(changed=bool(moved), moved=[dict((k, t[k]) for k in SHOWN) for t in moved],
                  kernel_refused=refused, gone=gone)


def main():
    module = AnsibleModule(
        argument_spec=journaled_module_options(
            role_default="kthreads",
            housekeeping=dict(type="str", required=True),
            isolated=dict(type="str", required=True),
        ),
        supports_check_mode=True,
    )

    def work(p, journal):
        live = is_live(p["sysroot"])
        todo, result = decide(p, kernel_threads() if live else None, boot_id() if live else None)
        if module._diff and todo:
            result["diff"] = diff(todo)
        if todo and not module.check_mode:
            do(p, journal, todo, result)
        return result

    run_journaled(module, work)


if __name__ == "__main__":
    main()
