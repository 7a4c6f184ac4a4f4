# -*- coding: utf-8 -*-
"""A file under the sysroot written, edited or removed, journaled first and validated before install:
the work of the module ``hostkit_file`` and of a ``file`` change of ``hostkit_changes``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import subprocess
import tempfile

try:  # as Ansible ships it (AnsiballZ), and in-process beside the project's module_utils
    from ansible.module_utils.hostkit_journal_io import JournalError, ModuleFailure, change_file, file_state
    from ansible.module_utils.hostkit_sysroot import sysroot_path
except ImportError:  # in hostkit's agent on the host, which carries no Ansible
    from hostkit.agent.journal_io import JournalError, ModuleFailure, change_file, file_state
    from hostkit.core.sysroot import sysroot_path

OPTIONS = dict(
    path=dict(type="path", required=True),
    content=dict(type="str"),
    state=dict(type="str", default="present", choices=["present", "absent"]),
    mode=dict(type="str", default="0644"),
    validate=dict(type="list", elements="str"),
    remove_regex=dict(type="str"),
    append=dict(type="str"),
    missing=dict(type="str", default="skip", choices=["skip", "create"]),
)
RULES = dict(
    required_if=[("state", "present", ["content", "remove_regex", "append"], True)],
    mutually_exclusive=[("content", "remove_regex"), ("content", "append")],
)


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


def work(params, journal, check_mode=False, diff_mode=False):
    """Decide, then (unless in check mode) validate, journal and change; the result."""
    check_params(params)
    before = file_state(sysroot_path(params["sysroot"], params["path"]))
    change, result = decide(params, before, diff_mode)
    if change and not check_mode:
        try:
            do(params, journal, before, change)
        except ModuleFailure as exc:  # a failed validation or journal keeps the decided result (diff)
            raise ModuleFailure(str(exc), **dict(result, **exc.fields))
    return result
