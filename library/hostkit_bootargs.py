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
    never duplicated; writes the arguments to set into the hostkit drop-in.
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

import os
import re
import shlex

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_journal import Journal, atomic_write, file_state, is_live, missing_parents, sysroot_path

GRUB = "/etc/default/grub"
DROPIN = "/etc/default/grub.d/hostkit.cfg"
VAR_RE = re.compile(r'^(\s*(?:export\s+)?)(GRUB_CMDLINE_LINUX(?:_DEFAULT)?)=(.*)$')


def fmt(key, value):
    return key if value is None else "%s=%s" % (key, value)


def strip_args(text, names):
    """Remove arguments named in ``names`` from a GRUB variable's (quoted) value."""
    raw = text.strip()
    quote = raw[0] if raw[:1] in ("'", '"') else ""
    inner = raw[1:-1] if quote and raw.endswith(quote) else raw
    kept = [tok for tok in inner.split() if tok.split("=", 1)[0] not in names]
    if kept == inner.split():
        return text
    return '"%s"' % " ".join(kept)


def parse_cmdline(text):
    args = {}
    try:
        tokens = shlex.split(text)
    except ValueError:
        tokens = text.split()
    if "--" in tokens:
        tokens = tokens[:tokens.index("--")]
    for tok in tokens:
        k, sep, v = tok.partition("=")
        args[k] = v if sep else None
    return args, tokens


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysroot=dict(type="str", default=""),
            set=dict(type="dict", default={}),
            remove=dict(type="list", elements="str", default=[]),
            simulate_reboot=dict(type="bool", default=False),
            run_id=dict(type="str", required=True),
            role=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    p = module.params
    want = dict((k, None if v is None else str(v)) for k, v in p["set"].items())
    managed = set(want) | set(p["remove"])
    for k, v in want.items():
        if not re.match(r"^[A-Za-z0-9_.-]+$", k) or (v is not None and not re.match(r"^[A-Za-z0-9_.,:/=-]*$", v)):
            module.fail_json(msg="refusing kernel argument %r=%r: only letters, digits and _.,:/=- are allowed" % (k, v))
    live = is_live(p["sysroot"])
    if p["simulate_reboot"] and live:
        module.fail_json(msg="simulate_reboot is for lab sysroots only; on a real host reboot it")
    journal = Journal(p["sysroot"], p["run_id"])
    changes = []

    grub_full = sysroot_path(p["sysroot"], GRUB)
    bootloader = None
    if os.path.exists(grub_full):
        bootloader = "grub"
        before = file_state(grub_full)
        lines = before["content"].splitlines(True)
        new_lines = []
        for line in lines:
            m = VAR_RE.match(line.rstrip("\n"))
            if m:
                line = "%s%s=%s\n" % (m.group(1), m.group(2), strip_args(m.group(3), managed))
            new_lines.append(line)
        new = "".join(new_lines)
        if new != before["content"]:
            changes.append((GRUB, grub_full, before, new))
        dropin_full = sysroot_path(p["sysroot"], DROPIN)
        dbefore = file_state(dropin_full)
        if want:
            dnew = ("# Managed by hostkit: kernel arguments for latency-critical inference.\n"
                    "# Remove with `hostkit rollback`; edits here are overwritten by `hostkit apply`.\n"
                    'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} %s"\n'
                    % " ".join(fmt(k, v) for k, v in sorted(want.items())))
            if dbefore.get("content") != dnew:
                changes.append((DROPIN, dropin_full, dbefore, dnew))
        elif dbefore["exists"]:
            changes.append((DROPIN, dropin_full, dbefore, None))
    commands = []
    if changes:
        if os.path.exists(sysroot_path(p["sysroot"], "/usr/sbin/update-grub")) or bootloader == "grub":
            commands.append(["update-grub"])

    proc_full = sysroot_path(p["sysroot"], "/proc/cmdline")
    with open(proc_full) as f:
        booted = f.read().strip()
    args, tokens = parse_cmdline(booted)
    pending = [k for k, v in want.items() if k not in args or args[k] != v] + [k for k in p["remove"] if k in args]
    result = dict(bootloader=bootloader, commands=commands, reboot_required=bool(pending),
                  pending_args=sorted(pending), booted_cmdline=booted, not_applicable=bootloader is None)
    if bootloader is None:
        result["msg"] = "no /etc/default/grub under the sysroot: boot config not managed here"

    if p["simulate_reboot"] and pending and bootloader is not None:
        kept = [t for t in tokens if t.split("=", 1)[0] not in managed]
        new_cmdline = " ".join(kept + [fmt(k, v) for k, v in sorted(want.items())]) + "\n"
        changes.append(("/proc/cmdline", proc_full, file_state(proc_full), new_cmdline))
        result["simulated_reboot"] = True
        result["reboot_required"] = False
        result["pending_args"] = []

    result["changed"] = bool(changes)
    result["files"] = [c[0] for c in changes]
    if module._diff:
        result["diff"] = [dict(before_header=c[0], after_header=c[0], before=c[2].get("content", ""),
                               after=c[3] or "") for c in changes]
    if not changes or module.check_mode:
        module.exit_json(**result)
    for path, full, before, new in changes:
        try:
            created = [d[len(full) - len(path):] for d in missing_parents(full)] if new is not None else []
            journal.record({"kind": "file", "role": p["role"], "path": path, "before": before,
                            "after": {"exists": new is not None}, "created_dirs": created})
        except (IOError, OSError) as exc:
            module.fail_json(msg="cannot write the journal %s (stopped before %s): %s" % (journal.path, path, exc))
        if new is None:
            os.unlink(full)
        else:
            mode = int(before["mode"], 8) if before["exists"] else 0o644
            atomic_write(full, new.encode("utf-8"), mode=mode,
                         uid=before.get("uid"), gid=before.get("gid"))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
