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
    source_argv=dict(type="list", elements="str"),
    substitute=dict(type="list", elements="dict"),
    prepend=dict(type="str"),
)
RULES = dict(
    required_if=[("state", "present", ["content", "remove_regex", "append", "source_argv", "substitute"], True)],
    mutually_exclusive=[
        ("content", "remove_regex"),
        ("content", "append"),
        ("content", "source_argv"),
        ("content", "substitute"),
        ("content", "prepend"),
    ],
)


def _compiled(what, regex):
    try:
        return re.compile(regex, re.MULTILINE)
    except (re.error, TypeError) as exc:
        raise ModuleFailure("%s %r does not compile: %s" % (what, regex, exc))


def check_params(params):
    """Params only: an absolute path, an octal mode, regexes that compile, substitutions that are
    {regex, replace} pairs, a source command that is not empty."""
    if not os.path.isabs(params["path"]):
        raise ModuleFailure("path must be absolute: %s" % params["path"])
    try:
        int(params["mode"], 8)
    except ValueError:
        raise ModuleFailure("mode must be an octal string such as '0644', got %r" % (params["mode"],))
    if params.get("remove_regex"):
        _compiled("remove_regex", params["remove_regex"])
    for n, sub in enumerate(params.get("substitute") or [], 1):
        if sorted(sub) != ["regex", "replace"] or not all(isinstance(v, str) for v in sub.values()):
            raise ModuleFailure("substitute %d must be {regex: ..., replace: ...} (strings), got %r" % (n, sub))
        try:
            _compiled("substitute %d: regex" % n, sub["regex"]).sub(sub["replace"], "")
        except re.error as exc:  # a replacement naming a group the regex does not have
            raise ModuleFailure(
                "substitute %d: replace %r does not fit regex %r: %s" % (n, sub["replace"], sub["regex"], exc)
            )
    if params.get("source_argv") is not None and not params["source_argv"]:
        raise ModuleFailure("source_argv must name a command")


def source_text(params):
    """The standard output of ``source_argv`` (run on the host, also in check mode: it only reads),
    the text an edit starts from instead of the file's content; a command that fails fails the change."""
    argv = params["source_argv"]
    try:
        proc = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False
        )
    except OSError as exc:
        raise ModuleFailure("cannot run %s for %s: %s; nothing changed" % (argv[0], params["path"], exc))
    if proc.returncode != 0:
        raise ModuleFailure(
            "%s failed (rc=%d), so %s cannot be rendered; nothing changed: %s"
            % (
                " ".join(argv),
                proc.returncode,
                params["path"],
                (proc.stderr or proc.stdout).decode("utf-8", "replace").strip()[-500:],
            ),
            source_rc=proc.returncode,
        )
    return proc.stdout.decode("utf-8", "replace")


def edited(params, text):
    """Edit mode: ``text`` with each ``substitute`` applied, the remove_regex matches removed,
    ``prepend`` put before and ``append`` after."""
    for sub in params.get("substitute") or []:
        text = re.sub(sub["regex"], sub["replace"], text, flags=re.MULTILINE)
    if params.get("remove_regex"):
        text = re.sub(params["remove_regex"], "", text, flags=re.MULTILINE)
    if params.get("prepend"):
        text = params["prepend"] + ("" if params["prepend"].endswith("\n") else "\n") + text
    if params["append"]:
        if text and not text.endswith("\n"):
            text += "\n"
        text += params["append"] if params["append"].endswith("\n") else params["append"] + "\n"
    return text


def decide(params, before, diff_mode=False, source=None):
    """Pure: the change (None when the file is as wanted, or missing in edit mode with
    missing=skip) and the result, from the parameters, the file's current state and ``source``
    (source_argv's output, when the content is rendered from it)."""
    full = sysroot_path(params["sysroot"], params["path"])
    result = dict(changed=False, path=params["path"], full_path=full, missing=False)
    want_mode = int(params["mode"], 8)
    content = params["content"]
    if params["state"] == "present" and content is None and params.get("source_argv"):
        content = edited(params, source)  # rendered from source_argv's output: written with its mode
    elif params["state"] == "present" and content is None:  # edit mode
        if not before["exists"] and params["missing"] == "skip":
            result["missing"] = True
            return None, result
        content = edited(params, before.get("content", ""))
        if before["exists"]:
            want_mode = int(before["mode"], 8)  # an edit keeps the file's mode
    if params["state"] == "absent":
        change = {"content": None, "mode": None} if before["exists"] else None
    else:
        same = before["exists"] and before.get("content") == content and int(before["mode"], 8) == want_mode
        change = None if same else {"content": content, "mode": want_mode}
    result["changed"] = change is not None
    if diff_mode:
        result["diff"] = dict(
            before_header=params["path"],
            after_header=params["path"],
            before=before.get("content", ""),
            after=content if params["state"] == "present" else "",
        )
    return change, result


def validate(params, data):
    """Run the validate command on a temporary copy of the new content; a failure fails the module."""
    fd, tmp = tempfile.mkstemp(prefix=".hostkit-validate-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        argv = [a.replace("%s", tmp) for a in params["validate"]]
        try:
            proc = subprocess.run(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False
            )
        except OSError as exc:
            raise ModuleFailure(
                "cannot run the validate command %s; %s was not installed: %s"
                % (params["validate"][0], params["path"], exc)
            )
    finally:
        os.unlink(tmp)
    if proc.returncode != 0:
        raise ModuleFailure(
            "validation of %s failed; the file was not installed: %s"
            % (params["path"], (proc.stderr or proc.stdout).decode("utf-8", "replace").strip()[-800:]),
            validate_rc=proc.returncode,
        )


def do(params, journal, before, change):
    """Validate the new content, journal the change, then make it."""
    data = None if change["content"] is None else change["content"].encode("utf-8")
    if data is not None and params["validate"]:
        validate(params, data)
    try:
        change_file(
            journal,
            params["role"],
            params["path"],
            sysroot_path(params["sysroot"], params["path"]),
            before,
            data,
            mode=change["mode"],
            after={"exists": data is not None, "mode": params["mode"]},
        )
    except JournalError as exc:
        raise ModuleFailure("cannot write the journal %s (nothing changed): %s" % (exc.path, exc.reason))


def work(params, journal, check_mode=False, diff_mode=False):
    """Decide, then (unless in check mode) validate, journal and change; the result."""
    check_params(params)
    before = file_state(sysroot_path(params["sysroot"], params["path"]))
    source = source_text(params) if params.get("source_argv") and params["state"] == "present" else None
    change, result = decide(params, before, diff_mode, source)
    if change and not check_mode:
        try:
            do(params, journal, before, change)
        except ModuleFailure as exc:  # a failed validation or journal keeps the decided result (diff)
            raise ModuleFailure(str(exc), **dict(result, **exc.fields))
    return result
