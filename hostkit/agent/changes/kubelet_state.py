# -*- coding: utf-8 -*-
"""kubelet's CPU and memory manager state files removed when they record another policy than the
one configured (kubelet crash-loops on that otherwise), each journaled with its content first: the
work of the module ``hostkit_kubelet_state`` and of a ``kubelet_state`` change of ``hostkit_changes``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

try:  # as Ansible ships it (AnsiballZ), and in-process beside the project's module_utils
    from ansible.module_utils.hostkit_journal_io import JournalError, ModuleFailure, change_file, file_state
    from ansible.module_utils.hostkit_sysroot import sysroot_path
except ImportError:  # in hostkit's agent on the host, which carries no Ansible
    from hostkit.agent.journal_io import JournalError, ModuleFailure, change_file, file_state
    from hostkit.core.sysroot import sysroot_path

OPTIONS = dict(
    state_dir=dict(type="path", default="/var/lib/kubelet"),
    policies=dict(type="dict", required=True),
)
RULES = {}
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


def work(params, journal, check_mode=False, diff_mode=False):
    """Check the policies, read the state files, decide, then (unless in check mode) remove."""
    check_policies(params["policies"])
    stale, result = decide(params, read_host(params["sysroot"], params["state_dir"], params["policies"]))
    if stale and not check_mode:
        do(params, journal, stale)
    return result
