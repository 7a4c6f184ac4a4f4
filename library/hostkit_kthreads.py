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
from ansible.module_utils.hostkit_change_kthreads import OPTIONS, work
from ansible.module_utils.hostkit_journal_io import journaled_module_options, run_journaled


def main():
    module = AnsibleModule(
        argument_spec=journaled_module_options(role_default="kthreads", **OPTIONS), supports_check_mode=True
    )
    run_journaled(module, work)


if __name__ == "__main__":
    main()
