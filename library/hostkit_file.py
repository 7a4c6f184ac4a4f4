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
  - Edit mode (O(substitute), O(remove_regex), O(prepend) and/or O(append) instead of O(content))
    changes only what they name in the current content and keeps the file's mode.
  - Rendered mode (O(source_argv) with the edit options) edits a command's output instead, on the
    host - for example an installed program's default configuration - and writes it with O(mode).
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
    description:
      - Wanted content (O(state=present)). Mutually exclusive with the edit options (O(substitute),
        O(remove_regex), O(prepend), O(append)) and O(source_argv).
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
  substitute:
    description:
      - Edit mode - replacements made first, in order, each a mapping C(regex) (multiline) and
        C(replace) (with C(\1) for its groups).
    type: list
    elements: dict
  prepend:
    description: Edit mode - text put before the result (a header; a newline is added when it lacks one).
    type: str
  source_argv:
    description:
      - Rendered mode - a command (an argv list, no shell) run on the host, also in check mode; its
        standard output is the text the edit options change, instead of the file's content. The
        result is written with O(mode) whether the file exists or not. A command that fails fails
        the module and nothing is changed.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Install containerd's config, rendered from its own defaults, once containerd accepts it
  hostkit.tuning.hostkit_file:
    path: /etc/containerd/config.toml
    source_argv: [containerd, config, default]
    substitute:
      - {regex: 'SystemdCgroup = false', replace: 'SystemdCgroup = true'}
    prepend: "# Managed by hostkit"
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
source_rc:
  description: Exit status of the O(source_argv) command when it failed.
  returned: failure of the source command
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
