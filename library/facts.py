#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: hostkit's facts of a host as Ansible facts.

Its work is the action plugin's (plugins/action/facts.py); this file documents it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: facts
short_description: Gather hostkit's facts of a host (topology, kernel, boot loader, IRQs, services)
description:
  - Runs hostkit's agent on the host (kept in the host's cache, copied once per agent version) and
    publishes its facts document as the Ansible fact C(hostkit_facts), the input of M(hostkit.tuning.plan).
author: hostkit maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Reads only; runs the same in check mode.
    support: full
extends_documentation_fragment:
  - hostkit.tuning.host
  - hostkit.tuning.host.action
options:
  {}"""

EXAMPLES = r"""
- name: Gather hostkit facts
  hostkit.tuning.facts:
"""

RETURN = r"""
ansible_facts:
  description: The facts.
  returned: success
  type: dict
  contains:
    hostkit_facts:
      description: hostkit's facts document (C(hostkit facts --json) prints the same).
      type: dict
      returned: success"""

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC = dict(
    sysroot={"type": "str", "default": ""},
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(
        msg="hostkit.tuning.facts runs as an action plugin on the controller; "
        "call it as a task of a play (the hostkit Python package must be importable there)"
    )


if __name__ == "__main__":
    main()
