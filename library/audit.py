#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: hostkit's audit of a host.

Its work is the action plugin's (plugins/action/audit.py); this file documents it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: audit
short_description: Audit a host's live tuning against its plan
description:
  - The checks of C(hostkit audit) on the host, the live state (kernel command line, sysctls, governors,
    IRQ affinities, containerd and kubelet, boot-time units) against the plan of its facts and profile.
  - Drift fails the host; a pending reboot fails it only with O(strict).
author: hostkit maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Reads only; runs the same in check mode.
    support: full
extends_documentation_fragment:
  - hostkit.tuning.host
  - hostkit.tuning.host.action
options:
  profile:
    description: The profile to audit against (default the host's C(hostkit_profile)).
    type: str
  force:
    description: Plan isolation on a VM as an apply with O(force) did.
    type: bool
    default: false
  strict:
    description: A pending reboot fails the host.
    type: bool
    default: false"""

EXAMPLES = r"""
- name: Audit, a pending reboot failing the host
  hostkit.tuning.audit:
    strict: true"""

RETURN = r"""
audit:
  description: The host's audit document (C(hostkit audit --json)'s per-host entry).
  returned: success
  type: dict
status:
  description: pass, drift, pending_reboot or refused.
  returned: success
  type: str
  sample: pass"""

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC = dict(
    sysroot={"type": "str", "default": ""},
    profile={"type": "str"},
    force={"type": "bool", "default": False},
    strict={"type": "bool", "default": False},
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(
        msg="hostkit.tuning.audit runs as an action plugin on the controller; "
        "call it as a task of a play (the hostkit Python package must be importable there)"
    )


if __name__ == "__main__":
    main()
