#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: run a command that acts on the machine itself - or, under a lab sysroot, record it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hostkit_run
short_description: Run update-grub / systemctl / restarts for real, or record them as "would run"
description:
  - Lab hosts share this machine's kernel, boot loader and services. When the sysroot is not V(/),
    the exact argv is appended to C(<sysroot>/var/lib/hostkit/would-run.jsonl) and returned, never run.
  - The argv is executed without a shell. C(systemctl) on a host where systemd is not running
    (a container, a minimal VM) is skipped and reported in RV(skipped_reason).
author: hostkit maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Reports the command as would-run; neither runs nor records it.
    support: full
extends_documentation_fragment:
  - hostkit.tuning.host
  - hostkit.tuning.host.no_diff
options:
  argv:
    description: The command, one list item per argument.
    type: list
    elements: str
    required: true
  reason:
    description: Why it runs (recorded in the would-run log).
    type: str
    default: ''
"""

EXAMPLES = r"""
- name: Regenerate the GRUB config
  hostkit.tuning.hostkit_run:
    argv: [update-grub]
    reason: kernel arguments changed

- name: Restart containerd
  hostkit.tuning.hostkit_run:
    argv: [systemctl, restart, containerd]
    reason: config.toml changed
"""

RETURN = r"""
argv:
  description: The command.
  returned: always
  type: list
  elements: str
  sample: [systemctl, restart, containerd]
would_run:
  description: True when the command was only recorded (lab sysroot) or reported (check mode), not run.
  returned: always
  type: bool
  sample: false
skipped_reason:
  description: Why a C(systemctl) command was not run.
  returned: when systemd is not running on the host
  type: str
  sample: systemd is not running on this host
rc:
  description: The command's exit status.
  returned: when the command ran
  type: int
  sample: 0
stdout:
  description: The command's standard output.
  returned: when the command ran
  type: str
  sample: ''
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_journal import record_would_run
from ansible.module_utils.hostkit_sysroot import is_live


def decide(params, live, systemd_running, check_mode):
    """Pure: what to do with the command - 'record' (lab sysroot), 'run', or None (check mode,
    or systemctl with no systemd) - and the result; None and a message for bad input."""
    argv = params["argv"]
    if not argv:
        return None, dict(failed=True, msg="argv must not be empty")
    shown = " ".join(argv)
    if not live:
        action = None if check_mode else "record"
        return action, dict(changed=False, would_run=True, argv=argv, msg="would run (lab sysroot): %s" % shown)
    if check_mode:
        return None, dict(changed=True, would_run=True, argv=argv)
    if os.path.basename(argv[0]) == "systemctl" and not systemd_running:
        # A container or a minimal VM: no systemd to talk to. Nothing to restart or reload.
        return None, dict(changed=False, would_run=False, skipped_reason="systemd is not running on this host",
                          argv=argv, msg="skipped (systemd is not running): %s" % shown)
    return "run", dict(changed=True, would_run=False, argv=argv)


def do(module, action, result):
    """Record the command as would-run, or run it; a command that fails fails the module."""
    argv = module.params["argv"]
    if action == "record":
        record_would_run(module.params["sysroot"], argv, module.params["reason"])
    elif action == "run":
        rc, out, err = module.run_command(argv)
        if rc != 0:
            module.fail_json(msg="%s failed (rc=%d): %s" % (" ".join(argv), rc, (err or out).strip()[-500:]),
                             rc=rc, argv=argv)
        result.update(rc=rc, stdout=out)


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
    action, result = decide(p, is_live(p["sysroot"]), os.path.isdir("/run/systemd/system"), module.check_mode)
    if result.pop("failed", False):
        module.fail_json(**result)
    do(module, action, result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
