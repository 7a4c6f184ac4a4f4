#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: the host-side lock that keeps two hostkit runs off one host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hostkit_lock
short_description: Take or release <sysroot>/var/lib/hostkit/lock for one run
description:
  - O(state=acquired) creates the lock atomically (O_EXCL) with the run id, the controller and the time;
    when another run holds it, the module fails naming the holder and changes nothing.
  - O(state=released) removes the lock only when this run holds it (or when O(force) is set, which is how
    C(hostkit unlock) clears the lock of a dead run).
author: hostkit maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Runs in check mode and does what it does outside it.
    support: partial
    details:
      - The lock is hostkit's own state, not the host's - it is taken and released in check mode too,
        so a check run and an apply never overlap on one host.
extends_documentation_fragment:
  - hostkit.tuning.host
  - hostkit.tuning.host.no_diff
options:
  run_id:
    description: This run.
    type: str
    required: true
  state:
    description: Take or release the lock.
    type: str
    default: acquired
    choices: [acquired, released]
  controller:
    description: C(host:pid) of the controller, recorded for stale-lock detection.
    type: str
    default: ''
  force:
    description: Release the lock whoever holds it.
    type: bool
    default: false
  min_free_mb:
    description: Refuse (before any change) when the journal's filesystem has less free space (MiB).
    type: int
    default: 16
"""

EXAMPLES = r"""
- name: Take the host-side lock (a second run is refused, naming this one)
  hostkit.tuning.hostkit_lock:
    run_id: "{{ hostkit_run_id }}"
    controller: "{{ hostkit_controller | default('') }}"

- name: Release the host-side lock
  hostkit.tuning.hostkit_lock:
    run_id: "{{ hostkit_run_id }}"
    state: released
"""

RETURN = r"""
acquired:
  description: The lock was taken by this call.
  returned: when O(state=acquired) and the lock was free
  type: bool
  sample: true
lock:
  description: The lock file (under O(sysroot)).
  returned: when O(state=acquired) and the lock was free
  type: str
  sample: /var/lib/hostkit/lock
released:
  description: The lock was removed by this call.
  returned: when O(state=released) and this run (or O(force)) held it
  type: bool
  sample: true
holder:
  description: The lock's content (run_id, controller, time, check) as found.
  returned: when a lock was found; also on the failure naming another run
  type: dict
  sample: {"run_id": "20261130-055000-ab12", "controller": "ctl:4242", "time": 1796018400.0, "check": false}
locked:
  description: Set on the failure when another run holds the lock.
  returned: failure
  type: bool
  sample: true
journal_free_mb:
  description: Free MiB under the journal's directory, on the failure for too little space.
  returned: failure
  type: float
  sample: 3.5
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_host_lock import ARGUMENT_SPEC, ModuleFailure, hold


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = hold(module.params, module.check_mode)
    except ModuleFailure as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
