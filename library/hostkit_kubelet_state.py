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

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_journal import (JournalError, ModuleFailure, change_file, file_state,
                                                  journaled_module_options, run_journaled)
from ansible.module_utils.hostkit_sysroot import sysroot_path

STATE_FILES = ("cpu_manager_state", "memory_manager_state")


def check_policies(policies):
    for name in sorted(policies):
        if name not in STATE_FILES:
            raise ModuleFailure("unknown kubelet state file %r (one of %s)" % (name, ", ".join(STATE_FILES)))


def recorded_policy(full):
    """The policyName a state file records; '' when it has none, None when it is unreadable
    (kubelet fails on that too). Only called for files that exist."""
    try:
        with open(full) as f:
            doc = json.load(f)
    except (IOError, OSError, ValueError):
        return None
    return doc.get("policyName", "") if isinstance(doc, dict) else None


def read_host(sysroot, state_dir, policies):
    """For each state file named in ``policies``: whether it exists and the policy it records."""
    seen = {}
    for name in sorted(policies):
        full = sysroot_path(sysroot, os.path.join(state_dir, name))
        exists = os.path.exists(full)
        seen[name] = {"exists": exists, "policy": recorded_policy(full) if exists else None}
    return seen


def decide(params, seen):
    """Pure: the state files to remove (those whose policy differs from the wanted one) and the result."""
    stale = []
    for name, wanted in sorted(params["policies"].items()):
        s = seen[name]
        if s["exists"] and (s["policy"] is None or str(s["policy"]).lower() != str(wanted).lower()):
            stale.append({"path": os.path.join(params["state_dir"], name), "policy": s["policy"], "wanted": wanted})
    return stale, dict(changed=bool(stale), removed=stale)


def do(params, journal, stale):
    """Journal each state file (content included, so rollback puts it back), then remove it."""
    for s in stale:
        full = sysroot_path(params["sysroot"], s["path"])
        try:
            change_file(journal, params["role"], s["path"], full, file_state(full), None)
        except JournalError as exc:
            raise ModuleFailure("cannot write the journal %s (%s not removed): %s" % (exc.path, s["path"], exc.reason))


def main():
    module = AnsibleModule(
        argument_spec=journaled_module_options(
            role_default="kubelet",
            state_dir=dict(type="path", default="/var/lib/kubelet"),
            policies=dict(type="dict", required=True),
        ),
        supports_check_mode=True,
    )

    def work(p, journal):
        check_policies(p["policies"])
        stale, result = decide(p, read_host(p["sysroot"], p["state_dir"], p["policies"]))
        if stale and not module.check_mode:
            do(p, journal, stale)
        return result

    run_journaled(module, work)


if __name__ == "__main__":
    main()
