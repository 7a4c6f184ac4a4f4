#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: run a command that acts on the machine itself - or, under a lab sysroot, record it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hostkit_run
short_description: Run update-grub / systemctl / restarts for real, or record them as "would run"
description:
  - Lab hosts share this machine's kernel, boot loader and services. When the sysroot is not '/',
    the exact argv is appended to <sysroot>/var/lib/hostkit/would-run.jsonl and returned, never run.
  - The argv is executed without a shell.
options:
  sysroot: {type: str, default: '', description: Root the host lives under.}
  argv: {type: list, elements: str, required: true, description: The command.}
  reason: {type: str, default: '', description: Why it runs (recorded).}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_journal import is_live, record_would_run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysroot=dict(type="str", default=""),
            argv=dict(type="list", elements="str", required=True),
            reason=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not p["argv"]:
        module.fail_json(msg="argv must not be empty")
    if not is_live(p["sysroot"]):
        if not module.check_mode:
            record_would_run(p["sysroot"], p["argv"], p["reason"])
        module.exit_json(changed=False, would_run=True, argv=p["argv"],
                         msg="would run (lab sysroot): %s" % " ".join(p["argv"]))
    if module.check_mode:
        module.exit_json(changed=True, would_run=True, argv=p["argv"])
    if os.path.basename(p["argv"][0]) == "systemctl" and not os.path.isdir("/run/systemd/system"):
        # A container or a minimal VM: no systemd to talk to. Nothing to restart or reload.
        module.exit_json(changed=False, would_run=False, skipped_reason="systemd is not running on this host",
                         argv=p["argv"], msg="skipped (systemd is not running): %s" % " ".join(p["argv"]))
    rc, out, err = module.run_command(p["argv"])
    if rc != 0:
        module.fail_json(msg="%s failed (rc=%d): %s" % (" ".join(p["argv"]), rc, (err or out).strip()[-500:]),
                         rc=rc, argv=p["argv"])
    module.exit_json(changed=True, would_run=False, argv=p["argv"], rc=rc, stdout=out)


if __name__ == "__main__":
    main()
