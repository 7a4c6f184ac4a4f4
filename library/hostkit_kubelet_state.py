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
options:
  sysroot: {type: str, default: '', description: Root the paths are under.}
  state_dir: {type: path, default: /var/lib/kubelet, description: kubelet's state directory.}
  policies: {type: dict, required: true, description: "State file name -> wanted policy, e.g. {cpu_manager_state: static}."}
  run_id: {type: str, required: true, description: Journal run id.}
  role: {type: str, default: kubelet, description: Role name recorded in the journal.}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_journal import Journal, file_state, sysroot_path


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysroot=dict(type="str", default=""),
            state_dir=dict(type="path", default="/var/lib/kubelet"),
            policies=dict(type="dict", required=True),
            run_id=dict(type="str", required=True),
            role=dict(type="str", default="kubelet"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    stale = []
    for name, wanted in sorted(p["policies"].items()):
        if name not in ("cpu_manager_state", "memory_manager_state"):
            module.fail_json(msg="unknown kubelet state file %r" % name)
        path = os.path.join(p["state_dir"], name)
        full = sysroot_path(p["sysroot"], path)
        if not os.path.exists(full):
            continue
        try:
            with open(full) as f:
                current = json.load(f).get("policyName", "")
        except (IOError, OSError, ValueError):
            current = None  # unreadable state also makes kubelet fail: remove it
        if current is None or str(current).lower() != str(wanted).lower():
            stale.append({"path": path, "full": full, "policy": current, "wanted": wanted})
    result = dict(changed=bool(stale), removed=[dict(path=s["path"], policy=s["policy"], wanted=s["wanted"])
                                                 for s in stale])
    if not stale or module.check_mode:
        module.exit_json(**result)
    journal = Journal(p["sysroot"], p["run_id"])
    for s in stale:
        try:
            journal.record({"kind": "file", "role": p["role"], "path": s["path"], "before": file_state(s["full"]),
                            "after": {"exists": False}, "created_dirs": []})
        except (IOError, OSError) as exc:
            module.fail_json(msg="cannot write the journal %s (nothing removed): %s" % (journal.path, exc))
        os.unlink(s["full"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
