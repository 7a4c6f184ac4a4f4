#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: hostkit's plan of a host from its facts.

Its work is the action plugin's (plugins/action/plan.py); this file documents it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: plan
short_description: Compute hostkit's tuning plan of a host (on the controller)
description:
  - The planner of C(hostkit plan) on the host's facts (O(facts), else the fact C(hostkit_facts)) and
    profile (O(profile), else the host's C(hostkit_profile), else C(bare-metal-inference)) with
    overrides (O(overrides), else the host's C(hostkit_overrides)).
  - A plan refused (isolation on a VM without O(force), a topology that cannot be trusted, a smoke gate
    before the reboot the plan needs) fails the host with the reasons in one line; bad profiles and
    overrides fail it the same way. Nothing is contacted or changed.
  - Outside check mode the plan is for an apply, so a read-only C(hostkit_sysroot) (the facts'
    C(sysroot_writable)) is bad input.
author: hostkit maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Computes only; runs the same in check mode.
    support: full
extends_documentation_fragment:
  - hostkit.tuning.host.action
options:
  facts:
    description: The host's hostkit facts (default the fact C(hostkit_facts) of M(hostkit.tuning.facts)).
    type: dict
  profile:
    description: A shipped profile's name or a profile file on the controller.
    type: str
  overrides:
    description: Profile values and pinned plan values, as the inventory's C(hostkit_overrides).
    type: dict
  force:
    description: Plan CPU isolation on a virtual machine or a topology hostkit cannot trust.
    type: bool
    default: false
  smoke_gate:
    description:
      - A smoke gate follows the apply; refuse a plan whose kernel arguments need a boot first unless O(reboot).
    type: bool
    default: false
  reboot:
    description: The run reboots into changed kernel arguments before the smoke gate.
    type: bool
    default: false
  bios_after:
    description:
      - After a power cycle through the host's BMC (M(hostkit.tuning.bios)), the topology its BIOS now says
        (its result's C(plan.after_cycle)). The host fails, unplanned, when its facts show other NUMA nodes per socket
        or threads per core than that (a cross-layer mismatch).
    type: dict
  bios_pending:
    description:
      - Before that power cycle, what it changes of the topology (M(hostkit.tuning.bios)'s C(plan.cycle_changes), NUMA
        nodes per socket and threads per core, from its settings pending or about to be PATCHed). The plan is made for
        that topology (its NUMA nodes per socket,
        each socket's cores split in order), so the OS tuning and the new BIOS settings take one power cycle. A
        topology with no one answer before the boot (threads per core changing) is planned as the host is now and
        planned again after the cycle (RV(after_bios)).
    type: dict
  planned_before:
    description:
      - After that power cycle, the plan applied before it (for the topology predicted then); RV(prediction) says
        whether the booted host's plan is the same.
    type: dict"""

EXAMPLES = r"""
- name: Plan the host
  hostkit.tuning.plan:
    profile: bare-metal-inference
  register: hostkit_planned"""

RETURN = r"""
plan:
  description: The plan document (C(hostkit plan --json)), the input of the apply roles (C(hostkit_plan)).
  returned: success
  type: dict
profile:
  description: The profile's name.
  returned: success
  type: str
  sample: bare-metal-inference
reboot_needed:
  description: The plan changes kernel arguments the running kernel was not booted with.
  returned: success
  type: bool
run_id:
  description: A new hostkit run id (the journal's name of an apply of this plan).
  returned: success
  type: str
  sample: 20261202T010000Z-ab12cd
refusals:
  description: Every reason the plan was refused (the host fails; C(hostkit apply) reports it as refused, exit 3).
  returned: when refused
  type: list
  elements: str
after_bios:
  description:
    - With O(bios_pending) changing the topology, C(predicted) (true - the plan is for that topology; C(notes) says
      what was assumed, C(numa_nodes) how many nodes it has) or false and C(why); C(changes) is O(bios_pending).
  returned: when O(bios_pending) changes the NUMA nodes per socket or the threads per core
  type: dict
prediction:
  description:
    - With O(planned_before), C(held) (the booted host's plan is the one applied before the cycle) and C(misses), one
      line per part of the plan that differs (applied by the roles' second pass; a second boot when kernel arguments
      differ).
  returned: when O(planned_before) is given
  type: dict
bad_input:
  description: The host failed on bad input (its profile, overrides or sysroot; C(hostkit apply) stops every host, exit 2).
  returned: on bad input
  type: bool"""

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC = dict(
    facts={"type": "dict"},
    profile={"type": "str"},
    overrides={"type": "dict"},
    force={"type": "bool", "default": False},
    smoke_gate={"type": "bool", "default": False},
    reboot={"type": "bool", "default": False},
    bios_after={"type": "dict"},
    bios_pending={"type": "dict"},
    planned_before={"type": "dict"},
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(
        msg="hostkit.tuning.plan runs as an action plugin on the controller; "
        "call it as a task of a play (the hostkit Python package must be importable there)"
    )


if __name__ == "__main__":
    main()
