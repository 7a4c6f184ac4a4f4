#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: the smoke gate on a host.

Its work is the action plugin's (plugins/action/smoke.py); this file documents it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: smoke
short_description: Run hostkit's shared-memory inference smoke test on a host and gate on its p999
description:
  - Runs the smoke test of C(hostkit smoke) on the host and returns its report.
  - With O(gate), the host fails when the verdict is MISSED (p999 deschedule above the target on enough
    samples) or the run failed, and INCONCLUSIVE (too few samples for a credible p999) never fails it, the
    rule of the smoke gate of C(hostkit rollout).
  - An option O(options) does not give is the profile's (C(smoke.transport), C(smoke.target_p999_ms)).
author: hostkit maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Measures only; runs the same in check mode.
    support: full
extends_documentation_fragment:
  - hostkit.tuning.host
  - hostkit.tuning.host.action
options:
  profile:
    description: The profile whose smoke settings apply (default the host's C(hostkit_profile)).
    type: str
  options:
    description:
      - Smoke options by name, as C(hostkit smoke)'s options without the dashes (V(duration), V(requests),
        V(target_p999_ms), V(transport), V(clients), V(inject_stall), ...); the CLI's bounds apply.
    type: dict
    default: {}
  gate:
    description: Fail the host on MISSED or a failed run.
    type: bool
    default: true"""

EXAMPLES = r"""
- name: Smoke gate of 2 s (INCONCLUSIVE is reported and does not fail)
  hostkit.tuning.smoke:
    options:
      duration: 2"""

RETURN = r"""
smoke:
  description: The smoke report (C(hostkit smoke --json)); null when the run failed.
  returned: always
  type: dict
verdict:
  description: PASSED, MISSED, INCONCLUSIVE or FAILED (the run gave no report).
  returned: always
  type: str
  sample: INCONCLUSIVE
why:
  description: The verdict in one line (p999 against the target, samples, diagnosis).
  returned: always
  type: str
p999_ms:
  description: p999 deschedule latency.
  returned: always
  type: float"""

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC = dict(
    sysroot={"type": "str", "default": ""},
    profile={"type": "str"},
    options={"type": "dict", "default": {}},
    gate={"type": "bool", "default": True},
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(
        msg="hostkit.tuning.smoke runs as an action plugin on the controller; "
        "call it as a task of a play (the hostkit Python package must be importable there)"
    )


if __name__ == "__main__":
    main()
