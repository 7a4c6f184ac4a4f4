#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: the host-side lock that keeps two hostkit runs off one host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hostkit_lock
short_description: Take or release <sysroot>/var/lib/hostkit/lock for one run
description:
  - C(state=acquired) creates the lock atomically (O_EXCL) with the run id, the controller and the time;
    when another run holds it, the module fails naming the holder and changes nothing.
  - C(state=released) removes the lock only when this run holds it (or when C(force) is set, which is how
    `hostkit unlock` clears the lock of a dead run).
options:
  sysroot: {type: str, default: '', description: Root the host lives under.}
  run_id: {type: str, required: true, description: This run.}
  state: {type: str, default: acquired, choices: [acquired, released], description: Take or release.}
  controller: {type: str, default: '', description: "host:pid of the controller, recorded for stale-lock detection."}
  force: {type: bool, default: false, description: Release whoever holds it.}
  min_free_mb: {type: int, default: 16, description: "Refuse (before any change) when the journal's filesystem has less free space."}
"""

import errno
import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_journal import sysroot_path

LOCK = "/var/lib/hostkit/lock"


def read_holder(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (IOError, OSError, ValueError):
        return {"run_id": "unknown", "controller": "unknown", "time": 0}


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
    path = sysroot_path(p["sysroot"], LOCK)
    if p["state"] == "released":
        if not os.path.exists(path):
            module.exit_json(changed=False, msg="not locked")
        holder = read_holder(path)
        if holder.get("run_id") != p["run_id"] and not p["force"]:
            module.exit_json(changed=False, holder=holder, msg="held by another run; left alone")
        os.unlink(path)
        module.exit_json(changed=False, released=True, holder=holder)
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        os.makedirs(d, 0o700)
    st = os.statvfs(d)
    free_mb = st.f_bavail * st.f_frsize / 1048576.0
    if free_mb < p["min_free_mb"]:
        module.fail_json(msg="only %.1f MiB free for the journal under %s (need %d): refusing before any change"
                             % (free_mb, d, p["min_free_mb"]), journal_free_mb=free_mb)
    doc = {"run_id": p["run_id"], "controller": p["controller"], "time": time.time(), "check": module.check_mode}
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        if exc.errno != errno.EEXIST:
            module.fail_json(msg="cannot create the lock %s: %s" % (path, exc))
        holder = read_holder(path)
        if holder.get("run_id") == p["run_id"]:
            module.exit_json(changed=False, holder=holder)
        age = time.time() - float(holder.get("time") or 0)
        module.fail_json(msg="host locked by hostkit run %s (controller %s, %.0f s ago); nothing changed. If that "
                             "run is dead, clear the lock with `hostkit unlock`" % (holder.get("run_id"),
                                                                                   holder.get("controller"), age),
                         holder=holder, locked=True)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)
    module.exit_json(changed=False, acquired=True, lock=path)


if __name__ == "__main__":
    main()
