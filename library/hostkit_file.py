#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: write or remove a file under the sysroot, journaled first, validated before install."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hostkit_file
short_description: Write or remove a file under hostkit_sysroot, journaling the previous state first
description:
  - Compares the wanted content and mode with the file; when they differ, records the previous
    content (or its absence), hash, mode and owner in the run's journal, validates the new content
    with an optional command, then replaces the file atomically.
  - Supports check mode and diff mode.
options:
  sysroot: {description: Root the path is under ('' or '/' is the real root)., type: str, default: ''}
  path: {description: Absolute path on the host., type: path, required: true}
  content: {description: Wanted content (state=present)., type: str}
  state: {description: present or absent., type: str, default: present, choices: [present, absent]}
  mode: {description: File mode for a new file (octal string)., type: str, default: '0644'}
  validate: {description: "argv list run on a temp copy; '%s' is replaced by its path.", type: list, elements: str}
  remove_regex: {description: "Edit mode - remove lines matching this (multiline) regex from the current content.", type: str}
  append: {description: "Edit mode - text appended after the removal (nothing when empty).", type: str}
  missing: {description: "Edit mode - when the file does not exist, skip (report missing) or create it.", type: str, default: skip, choices: [skip, create]}
  run_id: {description: Journal run id., type: str, required: true}
  role: {description: Role name recorded in the journal., type: str, default: ''}
"""

import os
import re
import subprocess
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_journal import Journal, atomic_write, file_state, missing_parents, sysroot_path


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysroot=dict(type="str", default=""),
            path=dict(type="path", required=True),
            content=dict(type="str"),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            mode=dict(type="str", default="0644"),
            validate=dict(type="list", elements="str"),
            remove_regex=dict(type="str"),
            append=dict(type="str"),
            missing=dict(type="str", default="skip", choices=["skip", "create"]),
            run_id=dict(type="str", required=True),
            role=dict(type="str", default=""),
        ),
        required_if=[("state", "present", ["content", "remove_regex", "append"], True)],
        mutually_exclusive=[("content", "remove_regex"), ("content", "append")],
        supports_check_mode=True,
    )
    p = module.params
    if not os.path.isabs(p["path"]):
        module.fail_json(msg="path must be absolute: %s" % p["path"])
    full = sysroot_path(p["sysroot"], p["path"])
    before = file_state(full)
    want_mode = int(p["mode"], 8)
    edit = p["content"] is None and p["state"] == "present"
    if edit:
        if not before["exists"] and p["missing"] == "skip":
            module.exit_json(changed=False, missing=True, path=p["path"], full_path=full)
        text = before.get("content", "")
        if p["remove_regex"]:
            text = re.sub(p["remove_regex"], "", text, flags=re.MULTILINE)
        if p["append"]:
            if text and not text.endswith("\n"):
                text += "\n"
            text += p["append"] if p["append"].endswith("\n") else p["append"] + "\n"
        p["content"] = text
        if before["exists"]:
            want_mode = int(before["mode"], 8)  # an edit keeps the file's mode
    if p["state"] == "absent":
        changed = before["exists"]
        after_text = ""
    else:
        data = p["content"].encode("utf-8")
        after_text = p["content"]
        same_content = before["exists"] and before.get("content") == p["content"]
        same_mode = before["exists"] and int(before["mode"], 8) == want_mode
        changed = not (same_content and same_mode)
    result = dict(changed=changed, path=p["path"], full_path=full, missing=False)
    if module._diff:
        result["diff"] = dict(before_header=p["path"], after_header=p["path"],
                              before=before.get("content", ""), after=after_text)
    if not changed or module.check_mode:
        module.exit_json(**result)

    if p["state"] == "present" and p["validate"]:
        fd, tmp = tempfile.mkstemp(prefix=".hostkit-validate-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            argv = [a.replace("%s", tmp) for a in p["validate"]]
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if proc.returncode != 0:
                module.fail_json(msg="validation of %s failed; the file was not installed: %s"
                                 % (p["path"], (proc.stderr or proc.stdout).decode("utf-8", "replace").strip()[-800:]),
                                 validate_rc=proc.returncode, **result)
        finally:
            os.unlink(tmp)

    journal = Journal(p["sysroot"], p["run_id"])
    try:
        created = [d[len(full) - len(p["path"]):] for d in missing_parents(full)] if p["state"] == "present" else []
        journal.record({"kind": "file", "role": p["role"], "path": p["path"], "before": before,
                        "after": {"exists": p["state"] == "present", "mode": p["mode"]},
                        "created_dirs": created})
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot write the journal %s (nothing changed): %s" % (journal.path, exc), **result)
    if p["state"] == "absent":
        os.unlink(full)
    else:
        keep_owner = before["exists"]
        atomic_write(full, data, mode=want_mode,
                     uid=before.get("uid") if keep_owner else None, gid=before.get("gid") if keep_owner else None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
