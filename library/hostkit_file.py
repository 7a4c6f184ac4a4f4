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

import os
import re
import subprocess
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_journal import (JournalError, ModuleFailure, change_file, run_journaled,
                                                  file_state, journaled_module_options)
from ansible.module_utils.hostkit_sysroot import sysroot_path


def check_params(params):
    """Params only: an absolute path, an octal mode, a regex that compiles."""
    if not os.path.isabs(params["path"]):
        raise ModuleFailure("path must be absolute: %s" % params["path"])
    try:
        int(params["mode"], 8)
    except ValueError:
        raise ModuleFailure("mode must be an octal string such as '0644', got %r" % (params["mode"],))
    if params["remove_regex"]:
        try:
            re.compile(params["remove_regex"], re.MULTILINE)
        except re.error as exc:
            raise ModuleFailure("remove_regex %r does not compile: %s" % (params["remove_regex"], exc))


def edited(params, text):
    """Edit mode: ``text`` with the remove_regex matches removed and ``append`` added."""
    if params["remove_regex"]:
        text = re.sub(params["remove_regex"], "", text, flags=re.MULTILINE)
    if params["append"]:
        if text and not text.endswith("\n"):
            text += "\n"
        text += params["append"] if params["append"].endswith("\n") else params["append"] + "\n"
    return text


def decide(params, before, diff_mode=False):
    """Pure: the change (None when the file is as wanted, or missing in edit mode with
    missing=skip) and the result, from the parameters and the file's current state."""
    full = sysroot_path(params["sysroot"], params["path"])
    result = dict(changed=False, path=params["path"], full_path=full, missing=False)
    want_mode = int(params["mode"], 8)
    content = params["content"]
    if params["state"] == "present" and content is None:  # edit mode
        if not before["exists"] and params["missing"] == "skip":
            result["missing"] = True
            return None, result
        content = edited(params, before.get("content", ""))
        if before["exists"]:
            want_mode = int(before["mode"], 8)  # an edit keeps the file's mode
    if params["state"] == "absent":
        change = {"content": None, "mode": None} if before["exists"] else None
    else:
        same = (before["exists"] and before.get("content") == content and int(before["mode"], 8) == want_mode)
        change = None if same else {"content": content, "mode": want_mode}
    result["changed"] = change is not None
    if diff_mode:
        result["diff"] = dict(before_header=params["path"], after_header=params["path"],
                              before=before.get("content", ""),
                              after=content if params["state"] == "present" else "")
    return change, result


def validate(params, data):
    """Run the validate command on a temporary copy of the new content; a failure fails the module."""
    fd, tmp = tempfile.mkstemp(prefix=".hostkit-validate-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        argv = [a.replace("%s", tmp) for a in params["validate"]]
        try:
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        except OSError as exc:
            raise ModuleFailure("cannot run the validate command %s; %s was not installed: %s"
                                % (params["validate"][0], params["path"], exc))
    finally:
        os.unlink(tmp)
    if proc.returncode != 0:
        raise ModuleFailure("validation of %s failed; the file was not installed: %s"
                            % (params["path"], (proc.stderr or proc.stdout).decode("utf-8", "replace").strip()[-800:]),
                            validate_rc=proc.returncode)


def do(params, journal, before, change):
    """Validate the new content, journal the change, then make it."""
    data = None if change["content"] is None else change["content"].encode("utf-8")
    if data is not None and params["validate"]:
        validate(params, data)
    try:
        change_file(journal, params["role"], params["path"], sysroot_path(params["sysroot"], params["path"]),
                    before, data, mode=change["mode"],
                    after={"exists": data is not None, "mode": params["mode"]})
    except JournalError as exc:
        raise ModuleFailure("cannot write the journal %s (nothing changed): %s" % (exc.path, exc.reason))


def main():
    module = AnsibleModule(
        argument_spec=journaled_module_options(
            path=dict(type="path", required=True),
            content=dict(type="str"),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            mode=dict(type="str", default="0644"),
            validate=dict(type="list", elements="str"),
            remove_regex=dict(type="str"),
            append=dict(type="str"),
            missing=dict(type="str", default="skip", choices=["skip", "create"]),
        ),
        required_if=[("state", "present", ["content", "remove_regex", "append"], True)],
        mutually_exclusive=[("content", "remove_regex"), ("content", "append")],
        supports_check_mode=True,
    )

    def work(p, journal):
        check_params(p)
        before = file_state(sysroot_path(p["sysroot"], p["path"]))
        change, result = decide(p, before, module._diff)
        if change and not module.check_mode:
            try:
                do(p, journal, before, change)
            except ModuleFailure as exc:  # a failed validation or journal keeps the decided result (diff)
                raise ModuleFailure(str(exc), **dict(result, **exc.fields))
        return result

    run_journaled(module, work)


if __name__ == "__main__":
    main()
