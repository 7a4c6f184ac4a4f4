#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: hostkit's exact rollback of a run on a host.

Its work is the action plugin's (plugins/action/rollback.py); this file documents it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: rollback
short_description: Roll a hostkit run back on a host, byte for byte
description:
  - hostkit's agent restores every change of the run O(run_id) (else the newest run) from the host's
    journal, newest first, then re-checks every journaled path; the host fails unless all of them hold
    their recorded content again.
  - Kernel arguments restored take effect at the next boot (RV(reboot_required)).
author: hostkit maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Reports what it would restore; changes nothing.
    support: full
extends_documentation_fragment:
  - hostkit.tuning.host
  - hostkit.tuning.host.action
options:
  run_id:
    description: The run to roll back (default the newest run in the host's journal).
    type: str
  check:
    description: Report what would be restored; change nothing.
    type: bool
    default: false"""

EXAMPLES = r"""
- name: Roll this run back
  hostkit.tuning.rollback:
    run_id: "{{ hostkit_run_id }}"
  register: hostkit_rolled_back"""

RETURN = r"""
rollback:
  description: The agent's rollback report (C(hostkit rollback --json)'s per-host entry).
  returned: success
  type: dict
reboot_required:
  description: Boot configuration was restored; the running kernel has the run's arguments until a reboot.
  returned: success
  type: bool
runs:
  description: The runs rolled back.
  returned: success
  type: list
  elements: str"""

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC = dict(
    sysroot={"type": "str", "default": ""},
    run_id={"type": "str"},
    check={"type": "bool", "default": False},
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(
        msg="hostkit.tuning.rollback runs as an action plugin on the controller; "
        "call it as a task of a play (the hostkit Python package must be importable there)"
    )


if __name__ == "__main__":
    main()
