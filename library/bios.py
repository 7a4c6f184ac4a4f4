#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: a host's BIOS settings through its BMC, over Redfish.

Its work is the action plugin's (plugins/action/bios.py); this file documents it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: bios
short_description: Set a host's BIOS through its BMC from its profile's bios intents (on the controller)
description:
  - The bios intents of the host's profile (O(profile), else its C(hostkit_profile)) with its
    overrides (O(overrides), else its C(hostkit_overrides)) mapped to the BMC vendor's attributes, as
    C(hostkit bios apply) does.
  - What the vendor map or the BMC's attribute registry does not allow fails the host with one line;
    nothing is PATCHed then.
  - The old values are journaled on the controller (C(.hostkit/bios/HOST.json) under the working
    directory, or C(HOSTKIT_STATE_DIR)); the PATCH lands in C(Bios/Settings), pending until the next
    reset. A setting already pending is not changed again.
  - With O(reboot), one power cycle through C(ComputerSystem.Reset) (graceful, then forced); a setting
    still pending afterwards fails the host.
  - In check mode, the plan and its diff; nothing is PATCHed.
author: hostkit maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Plans only, reports the change it would make.
    support: full
  diff_mode:
    description: The attributes before and after.
    support: full
extends_documentation_fragment:
  - hostkit.tuning.host.action
options:
  profile:
    description: A shipped profile's name or a profile file on the controller.
    type: str
  overrides:
    description: >-
      Profile values, as the inventory's C(hostkit_overrides) (for example C({bios: {numa_per_socket: 2}})).
    type: dict
  reboot:
    description: Power-cycle the host through its BMC when a setting is pending, and check it took effect.
    type: bool
    default: false
  patch:
    description:
      - PATCH what the plan changes. False - the plan alone (RV(pending) is what the PATCH would leave pending), or
        with O(reboot) the power cycle alone. The tune role plans the BIOS with the OS, PATCHes it before the roles
        and power-cycles after them, so the BIOS settings and the new kernel arguments take one boot.
    type: bool
    default: true
  run_id:
    description:
      - The hostkit run this change belongs to (the tune role's C(hostkit_run_id)), journaled with each attribute it
        changes first; with O(rollback), the run whose changes are restored.
    type: str
  rollback:
    description:
      - Restore the journaled values instead of setting the profile's (those O(run_id) changed, or every one), pending
        until the next reset; with O(reboot) one power cycle. Nothing journaled for that run - nothing done.
    type: bool
    default: false"""

EXAMPLES = r"""
- name: NPS2 through the BMC, one power cycle
  hostkit.tuning.bios:
    overrides: {bios: {numa_per_socket: 2}}
    reboot: true

- name: The BIOS plan alone (nothing PATCHed); RV(pending) is what the PATCH would leave pending
  hostkit.tuning.bios:
    patch: false
  register: bios_plan"""

RETURN = r"""
plan:
  description: The BIOS plan (C(hostkit bios plan --json)'s per-host C(plan)).
  returned: success
  type: dict
pending:
  description: Attribute -> value of every setting pending the next reset (before the cycle).
  returned: success
  type: dict
cycles:
  description: Power cycles made (0 or 1).
  returned: success
  type: int
restore:
  description: With O(rollback), attribute -> the journaled value PATCHed back.
  returned: with O(rollback)
  type: dict"""

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC = dict(
    profile={"type": "str"},
    overrides={"type": "dict"},
    reboot={"type": "bool", "default": False},
    patch={"type": "bool", "default": True},
    run_id={"type": "str"},
    rollback={"type": "bool", "default": False},
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(
        msg="hostkit.tuning.bios runs as an action plugin on the controller; "
        "call it as a task of a play (the hostkit Python package must be importable there)"
    )


if __name__ == "__main__":
    main()
