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
  retries:
    description: Run the command again up to this many times (O(delay) seconds apart) until it succeeds.
    type: int
    default: 0
  delay:
    description: Seconds between two attempts (O(retries)).
    type: float
    default: 1.0
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

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_change_run import OPTIONS, work
from ansible.module_utils.hostkit_journal_io import ModuleFailure


def main():
    module = AnsibleModule(
        argument_spec=dict(sysroot=dict(type="str", default=""), **OPTIONS), supports_check_mode=True
    )
    try:
        result = work(module.params, None, module.check_mode)
    except ModuleFailure as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
