#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: remove kubelet CPU/memory manager state files whose policy differs from the plan."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hostkit_kubelet_state
short_description: Remove cpu_manager_state / memory_manager_state when the manager policy changes
description:
  - kubelet refuses to start (and crash-loops) when its CPU or memory manager policy differs from
    the policyName recorded in its state file. The state file is journaled (content included) and
    removed, so rollback puts it back.
  - A state file that does not parse counts as differing (kubelet fails on it too).
author: hostkit maintainers (!UNKNOWN)
attributes:
  diff_mode:
    description: No diff is returned; RV(removed) names each file with its recorded and wanted policy.
    support: none
extends_documentation_fragment:
  - hostkit.tuning.host
  - hostkit.tuning.host.journal
options:
  state_dir:
    description: kubelet's state directory.
    type: path
    default: /var/lib/kubelet
  policies:
    description:
      - "State file name (V(cpu_manager_state) or V(memory_manager_state)) -> the policy kubelet
        will be configured with, for example V({cpu_manager_state: static})."
    type: dict
    required: true
  role:
    default: kubelet
"""

EXAMPLES = r"""
- name: Remove a state file whose policy differs before kubelet restarts with the static policy
  hostkit.tuning.hostkit_kubelet_state:
    policies:
      cpu_manager_state: static
      memory_manager_state: Static
    run_id: "{{ hostkit_run_id }}"
"""

RETURN = r"""
removed:
  description: The state files removed (to be removed, in check mode); empty when every policy matches.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The state file's path on the host.
      type: str
      sample: /var/lib/kubelet/cpu_manager_state
    policy:
      description: The policy the file recorded (null when it did not parse).
      type: str
      sample: none
    wanted:
      description: The policy kubelet will run with.
      type: str
      sample: static
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_change_kubelet_state import OPTIONS, work
from ansible.module_utils.hostkit_journal_io import journaled_module_options, run_journaled


def main():
    module = AnsibleModule(
        argument_spec=journaled_module_options(role_default="kubelet", **OPTIONS), supports_check_mode=True
    )
    run_journaled(module, work)


if __name__ == "__main__":
    main()
