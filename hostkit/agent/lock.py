# -*- coding: utf-8 -*-
"""The host-side lock that keeps two hostkit runs off one host (``<sysroot>/var/lib/hostkit/lock``):
the work of the module ``hostkit_lock``, run by the module or, from its options, by the agent
(``hostkit-agent lock``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import time

try:  # as Ansible ships it (AnsiballZ), and in-process beside the project's module_utils
    from ansible.module_utils.hostkit_journal_io import ModuleFailure
    from ansible.module_utils.hostkit_sysroot import sysroot_path
except ImportError:  # in hostkit's agent on the host, which carries no Ansible
    from hostkit.agent.journal_io import ModuleFailure
    from hostkit.core.sysroot import sysroot_path

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
        raise ModuleFailure(
            "only %.1f MiB free for the journal under %s (need %d): refusing before any change"
            % (seen["free_mb"], os.path.dirname(seen["path"]), params["min_free_mb"]),
            journal_free_mb=seen["free_mb"],
        )
    if holder is not None:
        if holder.get("run_id") == params["run_id"]:
            return None, dict(changed=False, holder=holder)
        age = now - float(holder.get("time") or 0)
        raise ModuleFailure(
            "host locked by hostkit run %s (controller %s, %.0f s ago); nothing changed. If that "
            "run is dead, clear the lock with `hostkit unlock`" % (holder.get("run_id"), holder.get("controller"), age),
            holder=holder,
            locked=True,
        )
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
        json.dump(
            {"run_id": params["run_id"], "controller": params["controller"], "time": time.time(), "check": check_mode},
            f,
        )
    return True


ARGUMENT_SPEC = dict(
    sysroot=dict(type="str", default=""),
    run_id=dict(type="str", required=True),
    state=dict(type="str", default="acquired", choices=["acquired", "released"]),
    controller=dict(type="str", default=""),
    force=dict(type="bool", default=False),
    min_free_mb=dict(type="int", default=16),
)


def hold(params, check_mode):
    """Take or release the lock as ``params`` say; the module's result, or a ModuleFailure.

    The lock is hostkit's own state, not the host's: it is taken and released in check mode too,
    so a check run and an apply never overlap on one host."""
    for _attempt in range(3):
        seen = read_host(params)
        action, result = decide(params, seen, time.time())
        # False: another run took the lock between the read and the create; decide again.
        if action is None or do(params, action, seen["path"], check_mode):
            return result
    raise ModuleFailure("the lock %s keeps changing under this run; nothing changed" % seen["path"])


def run_request(req, sysroot):
    """The agent's side: ``req`` holds the module's options (checked on the controller) and
    ``check_mode``; the module's result, ``failed`` with ``msg`` when the lock cannot be had."""
    try:
        params = {k: req[k] for k in ARGUMENT_SPEC if k != "sysroot"}
        params["sysroot"] = sysroot
        check_mode = bool(req["check_mode"])
    except (KeyError, TypeError) as exc:
        return dict(
            failed=True, changed=False, msg="hostkit agent: not a hostkit_lock request (%s); nothing changed" % exc
        )
    try:
        return hold(params, check_mode)
    except ModuleFailure as exc:
        return dict(exc.fields, failed=True, changed=False, msg=str(exc))
