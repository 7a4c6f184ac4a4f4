#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: the host-side lock that keeps two hostkit runs off one host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hostkit_lock
short_description: Take or release <sysroot>/var/lib/hostkit/lock for one run
description:
  - O(state=acquired) creates the lock atomically (O_EXCL) with the run id, the controller and the time;
    when another run holds it, the module fails naming the holder and changes nothing.
  - O(state=released) removes the lock only when this run holds it (or when O(force) is set, which is how
    C(hostkit unlock) clears the lock of a dead run).
author: hostkit maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Runs in check mode and does what it does outside it.
    support: partial
    details:
      - The lock is hostkit's own state, not the host's - it is taken and released in check mode too,
        so a check run and an apply never overlap on one host.
extends_documentation_fragment:
  - hostkit.tuning.host
  - hostkit.tuning.host.no_diff
options:
  run_id:
    description: This run.
    type: str
    required: true
  state:
    description: Take or release the lock.
    type: str
    default: acquired
    choices: [acquired, released]
  controller:
    description: C(host:pid) of the controller, recorded for stale-lock detection.
    type: str
    default: ''
  force:
    description: Release the lock whoever holds it.
    type: bool
    default: false
  min_free_mb:
    description: Refuse (before any change) when the journal's filesystem has less free space (MiB).
    type: int
    default: 16
"""

EXAMPLES = r"""
- name: Take the host-side lock (a second run is refused, naming this one)
  hostkit.tuning.hostkit_lock:
    run_id: "{{ hostkit_run_id }}"
    controller: "{{ hostkit_controller | default('') }}"

- name: Release the host-side lock
  hostkit.tuning.hostkit_lock:
    run_id: "{{ hostkit_run_id }}"
    state: released
"""

RETURN = r"""
acquired:
  description: The lock was taken by this call.
  returned: when O(state=acquired) and the lock was free
  type: bool
  sample: true
lock:
  description: The lock file (under O(sysroot)).
  returned: when O(state=acquired) and the lock was free
  type: str
  sample: /var/lib/hostkit/lock
released:
  description: The lock was removed by this call.
  returned: when O(state=released) and this run (or O(force)) held it
  type: bool
  sample: true
holder:
  description: The lock's content (run_id, controller, time, check) as found.
  returned: when a lock was found; also on the failure naming another run
  type: dict
  sample: {"run_id": "20261130-055000-ab12", "controller": "ctl:4242", "time": 1796018400.0, "check": false}
locked:
  description: Set on the failure when another run holds the lock.
  returned: failure
  type: bool
  sample: true
journal_free_mb:
  description: Free MiB under the journal's directory, on the failure for too little space.
  returned: failure
  type: float
  sample: 3.5
"""

import errno
import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_journal_io import ModuleFailure
from ansible.module_utils.hostkit_sysroot import sysroot_path

LOCK = "/var/lib/hostkit/lock"
UNKNOWN_HOLDER = {"run_id": "unknown", "controller": "unknown", "time": 0}


def read_holder(path):
    """The lock's content; None when there is no lock, UNKNOWN_HOLDER when it is unreadable."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (IOError, OSError, ValueError) as exc:
        if getattr(exc, "errno", None) == errno.ENOENT:
            return None
        return dict(UNKNOWN_HOLDER)
    return doc if isinstance(doc, dict) else dict(UNKNOWN_HOLDER)


def free_mb(path):
    """Free MiB on the filesystem ``path`` is (or will be created) on."""
    d = path
    while d and not os.path.isdir(d):
        d = os.path.dirname(d)
    st = os.statvfs(d or ".")
    return st.f_bavail * st.f_frsize / 1048576.0


def read_host(params):
    path = sysroot_path(params["sysroot"], LOCK)
    seen = {"path": path, "holder": read_holder(path)}
    if params["state"] == "acquired":
        seen["free_mb"] = free_mb(os.path.dirname(path))
    return seen


def decide(params, seen, now):
    """Pure: what to do with the lock ('create', 'remove' or None) and the result, or a ModuleFailure."""
    holder = seen["holder"]
    if params["state"] == "released":
        if holder is None:
            return None, dict(changed=False, msg="not locked")
        if holder.get("run_id") != params["run_id"] and not params["force"]:
            return None, dict(changed=False, holder=holder, msg="held by another run; left alone")
        return "remove", dict(changed=False, released=True, holder=holder)
    if seen["free_mb"] < params["min_free_mb"]:
        raise ModuleFailure("only %.1f MiB free for the journal under %s (need %d): refusing before any change"
                            % (seen["free_mb"], os.path.dirname(seen["path"]), params["min_free_mb"]),
                            journal_free_mb=seen["free_mb"])
    if holder is not None:
        if holder.get("run_id") == params["run_id"]:
            return None, dict(changed=False, holder=holder)
        age = now - float(holder.get("time") or 0)
        raise ModuleFailure("host locked by hostkit run %s (controller %s, %.0f s ago); nothing changed. If that "
                            "run is dead, clear the lock with `hostkit unlock`"
                            % (holder.get("run_id"), holder.get("controller"), age), holder=holder, locked=True)
    return "create", dict(changed=False, acquired=True, lock=seen["path"])


def do(params, action, path, check_mode):
    """Create the lock atomically (O_EXCL), or remove it. False when another run created it first."""
    if action == "remove":
        try:
            os.unlink(path)
        except OSError as exc:  # gone already: released all the same
            if exc.errno != errno.ENOENT:
                raise ModuleFailure("cannot remove the lock %s: %s" % (path, exc))
        return True
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        os.makedirs(d, 0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            return False
        raise ModuleFailure("cannot create the lock %s: %s" % (path, exc))
    with os.fdopen(fd, "w") as f:
        json.dump({"run_id": params["run_id"], "controller": params["controller"], "time": time.time(),
                   "check": check_mode}, f)
    return True


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysroot=dict(type="str", default=""),
            run_id=dict(type="str", required=True),
            state=dict(type="str", default="acquired", choices=["acquired", "released"]),
            controller=dict(type="str", default=""),
            force=dict(type="bool", default=False),
            min_free_mb=dict(type="int", default=16),
        ),
        supports_check_mode=True,
    )
    p = module.params
    # The lock is hostkit's own state, not the host's: it is taken and released in check mode
    # too, so a check run and an apply never overlap on one host.
    try:
        for _attempt in range(3):
            seen = read_host(p)
            action, result = decide(p, seen, time.time())
            # False: another run took the lock between the read and the create; decide again.
            if action is None or do(p, action, seen["path"], module.check_mode):
                break
        else:
            raise ModuleFailure("the lock %s keeps changing under this run; nothing changed" % seen["path"])
    except ModuleFailure as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
