# -*- coding: utf-8 -*-
"""A command that acts on the host (update-grub, systemctl, a restart): run for real on the host
itself, recorded as "would run" under a lab sysroot (which shares this machine's kernel, boot loader
and services). The work of the module ``hostkit_run`` and of a ``run`` change of ``hostkit_changes``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import time

try:  # as Ansible ships it (AnsiballZ), and in-process beside the project's module_utils
    from ansible.module_utils.hostkit_journal_io import ModuleFailure, record_would_run
    from ansible.module_utils.hostkit_sysroot import is_live
except ImportError:  # in hostkit's agent on the host, which carries no Ansible
    from hostkit.agent.journal_io import ModuleFailure, record_would_run
    from hostkit.core.sysroot import is_live

OPTIONS = dict(
    argv=dict(type="list", elements="str", required=True),
    reason=dict(type="str", default=""),
    retries=dict(type="int", default=0),
    delay=dict(type="float", default=1.0),
)
RULES = {}
MAX_RETRIES = 120


def decide(params, live, systemd_running, check_mode):
    """Pure: what to do with the command - 'record' (lab sysroot), 'run', or None (check mode,
    or systemctl with no systemd) - and the result; a ModuleFailure for bad input."""
    argv = params["argv"]
    if not argv:
        raise ModuleFailure("argv must not be empty")
    if not 0 <= params.get("retries", 0) <= MAX_RETRIES or params.get("delay", 1.0) < 0:
        raise ModuleFailure(
            "retries must be 0-%d and delay 0 or more, got %r and %r"
            % (MAX_RETRIES, params.get("retries"), params.get("delay"))
        )
    shown = " ".join(argv)
    if not live:
        action = None if check_mode else "record"
        return action, dict(changed=False, would_run=True, argv=argv, msg="would run (lab sysroot): %s" % shown)
    if check_mode:
        return None, dict(changed=True, would_run=True, argv=argv)
    if os.path.basename(argv[0]) == "systemctl" and not systemd_running:
        # A container or a minimal VM: no systemd to talk to. Nothing to restart or reload.
        return None, dict(
            changed=False,
            would_run=False,
            skipped_reason="systemd is not running on this host",
            argv=argv,
            msg="skipped (systemd is not running): %s" % shown,
        )
    return "run", dict(changed=True, would_run=False, argv=argv)


def run(argv):
    """(rc, stdout, stderr) of ``argv`` run without a shell; rc 127 when it cannot start."""
    try:
        proc = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False
        )
    except OSError as exc:
        return 127, "", str(exc)
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def do(params, action, result, runner=run, sleep=time.sleep):
    """Record the command as would-run, or run it (``retries`` more times, ``delay`` s apart,
    until it succeeds); a command that still fails fails the module."""
    argv = params["argv"]
    if action == "record":
        record_would_run(params["sysroot"], argv, params.get("reason", ""))
        return
    if action != "run":
        return
    for attempt in range(params.get("retries", 0) + 1):
        if attempt:
            sleep(params.get("delay", 1.0))
        rc, out, err = runner(argv)
        if rc == 0:
            break
    if rc != 0:
        raise ModuleFailure(
            "%s failed (rc=%d): %s" % (" ".join(argv), rc, (err or out).strip()[-500:]), rc=rc, argv=argv
        )
    result.update(rc=rc, stdout=out)


def work(params, journal=None, check_mode=False, diff_mode=False):
    """Decide, then run or record the command; the result. (Nothing to journal: a command is not
    undone; what it acts on is journaled by the change that made it necessary.)"""
    action, result = decide(params, is_live(params["sysroot"]), os.path.isdir("/run/systemd/system"), check_mode)
    do(params, action, result)
    return result
