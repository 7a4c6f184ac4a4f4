#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: what a host's BMC says of its BIOS, over Redfish.

Its work is the action plugin's (plugins/action/bios_facts.py); this file documents it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: bios_facts
short_description: Read a host's BIOS, processors and memory from its BMC (on the controller)
description:
  - The facts of C(hostkit bios facts) for the host, read from its BMC over Redfish (sushy) as the
    inventory's C(hostkit_bmc) says (address, username, password or password_env, ca_file or verify_tls).
  - Vendor, model, BIOS version; the attributes now and those pending the next reset; the BMC's
    attribute registry; processors and memory channels per socket.
  - Runs on the controller; the host itself is not contacted. The password is never returned.
author: hostkit maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Reads only; runs the same in check mode.
    support: full
extends_documentation_fragment:
  - hostkit.tuning.host.action
options: {}"""

EXAMPLES = r"""
- name: What the BMC says
  hostkit.tuning.bios_facts:"""

RETURN = r"""
bios:
  description: The host's BIOS facts (C(hostkit bios facts --json)'s per-host C(bios)), also the fact C(hostkit_bios).
  returned: success
  type: dict"""

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC = dict()


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(
        msg="hostkit.tuning.bios_facts runs as an action plugin on the controller; "
        "call it as a task of a play (the hostkit Python package must be importable there)"
    )


if __name__ == "__main__":
    main()
