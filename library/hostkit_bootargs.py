#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: kernel arguments in the boot config (GRUB drop-in), replacing what others set."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hostkit_bootargs
short_description: Set and remove kernel arguments through /etc/default/grub.d/hostkit.cfg
description:
  - Removes the managed arguments (those to set and those to remove) from GRUB_CMDLINE_LINUX and
    GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, so an isolcpus= set by another tool is replaced,
    never duplicated; writes the arguments to set into the hostkit drop-in. Single- and double-quoted
    values are both understood; a rewritten value keeps its single quotes (else is double-quoted).
  - Every file change is journaled first. Reports the bootloader command to regenerate the config
    (update-grub, grub2-mkconfig) and whether /proc/cmdline differs from the plan (reboot required).
  - With simulate_reboot (lab sysroots only), rewrites the sysroot's proc/cmdline as a reboot would.
options:
  sysroot: {type: str, default: '', description: Root the paths are under.}
  set: {type: dict, default: {}, description: Arguments to set (value null for a bare flag).}
  remove: {type: list, elements: str, default: [], description: Argument names to remove.}
  simulate_reboot: {type: bool, default: false, description: Lab only - rewrite proc/cmdline.}
  run_id: {type: str, required: true, description: Journal run id.}
  role: {type: str, default: '', description: Role name recorded in the journal.}
"""

import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_journal import (Journal, JournalError, change_file, file_state,
                                                  journaled_module_options)
from ansible.module_utils.hostkit_kernel_args import (arg_name, cmdline_tokens, format_arg, remove_grub_args,
                                                      split_cmdline)
from ansible.module_utils.hostkit_sysroot import is_live, sysroot_path

GRUB = "/etc/default/grub"
DROPIN = "/etc/default/grub.d/hostkit.cfg"
CMDLINE = "/proc/cmdline"
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:/=-]*$")


class Failure(Exception):
    """The module fails with this message (bad input or host state found before any change)."""


def wanted_args(params):
    """The arguments to set as name -> str value (None: a bare flag), checked; params only."""
    want = dict((k, None if v is None else str(v)) for k, v in params["set"].items())
    for k, v in sorted(want.items()):
        if not NAME_RE.match(k) or (v is not None and not VALUE_RE.match(v)):
            raise Failure("refusing kernel argument %r=%r: only letters, digits and _.,:/=- are allowed" % (k, v))
    for k in params["remove"]:
        if not NAME_RE.match(k):
            raise Failure("refusing to remove kernel argument %r: a name is letters, digits and _.- only" % (k,))
    if params["simulate_reboot"] and is_live(params["sysroot"]):
        raise Failure("simulate_reboot is for lab sysroots only; on a real host reboot it")
    return want


def read_host(sysroot, simulate_reboot):
    """What the decision needs from the host: the boot config files and the booted command line."""
    try:
        with open(sysroot_path(sysroot, CMDLINE)) as f:
            booted = f.read().strip()
    except (IOError, OSError) as exc:
        raise Failure("cannot read %s under the sysroot %r: %s" % (CMDLINE, sysroot, exc))
    return {"grub": file_state(sysroot_path(sysroot, GRUB)),
            "dropin": file_state(sysroot_path(sysroot, DROPIN)),
            "booted": booted,
            "cmdline": file_state(sysroot_path(sysroot, CMDLINE)) if simulate_reboot else None}


def dropin_text(want):
    return ("# Managed by hostkit: kernel arguments for latency-critical inference.\n"
            "# Remove with `hostkit rollback`; edits here are overwritten by `hostkit apply`.\n"
            'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} %s"\n'
            % " ".join(format_arg(k, v) for k, v in sorted(want.items())))


def decide(params, want, seen):
    """Pure: the file changes (path, before state, new text or None to remove, in the order they
    are made) and the module's result, from the parameters and what ``read_host`` saw."""
    managed = set(want) | set(params["remove"])
    changes = []
    bootloader = "grub" if seen["grub"]["exists"] else None
    if bootloader:
        grub = seen["grub"]
        new = remove_grub_args(grub.get("content", ""), managed)
        if new != grub.get("content", ""):
            changes.append({"path": GRUB, "before": grub, "content": new})
        dropin = seen["dropin"]
        if want:
            text = dropin_text(want)
            if dropin.get("content") != text:
                changes.append({"path": DROPIN, "before": dropin, "content": text})
        elif dropin["exists"]:
            changes.append({"path": DROPIN, "before": dropin, "content": None})
    args = split_cmdline(seen["booted"])
    pending = ([k for k, v in want.items() if k not in args or args[k] != v]
               + [k for k in params["remove"] if k in args])
    result = dict(bootloader=bootloader, commands=[["update-grub"]] if changes else [],
                  reboot_required=bool(pending), pending_args=sorted(pending), booted_cmdline=seen["booted"],
                  not_applicable=bootloader is None)
    if bootloader is None:
        result["msg"] = "no /etc/default/grub under the sysroot: boot config not managed here"
    if params["simulate_reboot"] and pending and bootloader is not None:
        kept = [t for t in cmdline_tokens(seen["booted"]) if arg_name(t) not in managed]
        new_cmdline = " ".join(kept + [format_arg(k, v) for k, v in sorted(want.items())]) + "\n"
        changes.append({"path": CMDLINE, "before": seen["cmdline"], "content": new_cmdline})
        result.update(simulated_reboot=True, reboot_required=False, pending_args=[])
    result["changed"] = bool(changes)
    result["files"] = [c["path"] for c in changes]
    return changes, result


def diff(changes):
    return [dict(before_header=c["path"], after_header=c["path"], before=c["before"].get("content", ""),
                 after=c["content"] or "") for c in changes]


def do(params, journal, changes):
    """Journal each change, then make it; a journal that cannot be written stops before that file."""
    for c in changes:
        before = c["before"]
        data = None if c["content"] is None else c["content"].encode("utf-8")
        mode = int(before["mode"], 8) if before["exists"] else 0o644
        try:
            change_file(journal, params["role"], c["path"], sysroot_path(params["sysroot"], c["path"]), before,
                        data, mode=mode)
        except JournalError as exc:
            raise Failure("cannot write the journal %s (stopped before %s): %s" % (exc.path, c["path"], exc.reason))


def main():
    module = AnsibleModule(
        argument_spec=journaled_module_options(
            set=dict(type="dict", default={}),
            remove=dict(type="list", elements="str", default=[]),
            simulate_reboot=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        want = wanted_args(p)
        journal = Journal(p["sysroot"], p["run_id"])
        changes, result = decide(p, want, read_host(p["sysroot"], p["simulate_reboot"]))
        if module._diff:
            result["diff"] = diff(changes)
        if changes and not module.check_mode:
            do(p, journal, changes)
    except (Failure, ValueError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
