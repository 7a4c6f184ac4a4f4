#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: write or remove a file under the sysroot, journaled first, validated before install."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hostkit_file
short_description: Write, edit or remove a file under hostkit_sysroot, journaling the previous state first
description:
  - Compares the wanted content and mode with the file; when they differ, records the previous
    content (or its absence), hash, mode and owner in the run's journal, validates the new content
    with an optional command, then replaces the file atomically (keeping its owner).
  - Edit mode (O(remove_regex) and/or O(append) instead of O(content)) changes only the matching
    lines of the current content and keeps the file's mode.
author: hostkit maintainers (!UNKNOWN)
extends_documentation_fragment:
  - hostkit.tuning.host
  - hostkit.tuning.host.journal
options:
  path:
    description: Absolute path on the host.
    type: path
    required: true
  content:
    description: Wanted content (O(state=present)). Mutually exclusive with O(remove_regex) and O(append).
    type: str
  state:
    description: Whether the file is present or absent.
    type: str
    default: present
    choices: [present, absent]
  mode:
    description: File mode of a file written from O(content) (an octal string).
    type: str
    default: '0644'
  validate:
    description:
      - Command (an argv list, no shell) run on a temporary copy of the new content; V(%s) is
        replaced by its path. A non-zero exit fails the module and nothing is installed.
    type: list
    elements: str
  remove_regex:
    description: Edit mode - remove what this (multiline) regular expression matches in the current content.
    type: str
  append:
    description: Edit mode - text appended after the removal (nothing when empty).
    type: str
  missing:
    description: Edit mode - when the file does not exist, skip it (reporting RV(missing)) or create it.
    type: str
    default: skip
    choices: [skip, create]
"""

EXAMPLES = r"""
- name: Install containerd's config once containerd itself accepts it
  hostkit.tuning.hostkit_file:
    path: /etc/containerd/config.toml
    content: "{{ lookup('ansible.builtin.template', 'config.toml.j2') }}"
    validate: [containerd, --config, "%s", config, dump]
    run_id: "{{ hostkit_run_id }}"
    role: containerd

- name: Ban CPUs 2-15 in irqbalance, keeping the rest of its environment file (skipped when absent)
  hostkit.tuning.hostkit_file:
    path: /etc/default/irqbalance
    remove_regex: '^\s*#?\s*IRQBALANCE_BANNED_CPULIST=.*\n?'
    append: IRQBALANCE_BANNED_CPULIST=2-15
    missing: skip
    run_id: "{{ hostkit_run_id }}"
    role: irq_affinity

- name: Remove the boot-time IRQ affinity unit (rollback restores it from the journal)
  hostkit.tuning.hostkit_file:
    path: /etc/systemd/system/hostkit-irq-affinity.service
    state: absent
    run_id: "{{ hostkit_run_id }}"
"""

RETURN = r"""
path:
  description: The path on the host, as given.
  returned: always
  type: str
  sample: /etc/containerd/config.toml
full_path:
  description: The path under O(sysroot) the module read and wrote.
  returned: always
  type: str
  sample: /srv/lab/host1/etc/containerd/config.toml
missing:
  description: Edit mode with O(missing=skip) only - the file does not exist, so nothing was done.
  returned: always
  type: bool
  sample: false
validate_rc:
  description: Exit status of the O(validate) command when it rejected the new content.
  returned: failure of the validate command
  type: int
  sample: 1
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_change_file import OPTIONS, RULES, work
from ansible.module_utils.hostkit_journal_io import journaled_module_options, run_journaled


def main():
    module = AnsibleModule(argument_spec=journaled_module_options(**OPTIONS), supports_check_mode=True, **RULES)
    run_journaled(module, work)


if __name__ == "__main__":
    main()
