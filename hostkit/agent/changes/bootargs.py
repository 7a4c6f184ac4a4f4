# -*- coding: utf-8 -*-
"""Kernel arguments set and removed where the host's boot loader keeps them (GRUB with its grub.d
drop-ins, BLS entries and grubenv, systemd-boot), journaled first: the work of the module
``hostkit_bootargs`` and of a ``bootargs`` change of ``hostkit_changes``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

try:  # as Ansible ships it (AnsiballZ), and in-process beside the project's module_utils
    from ansible.module_utils.hostkit_boot_loader import (
        BootConfigError,
        describe_none,
        describe_uki,
        detect,
        edit,
        next_boot,
        real_path,
    )
    from ansible.module_utils.hostkit_change_run import decide as decide_run
    from ansible.module_utils.hostkit_change_run import do as do_run
    from ansible.module_utils.hostkit_journal_io import JournalError, ModuleFailure, change_file, file_state
    from ansible.module_utils.hostkit_kernel_args import (
        arg_name,
        cmdline_tokens,
        domain_isolated,
        format_arg,
        split_cmdline,
    )
    from ansible.module_utils.hostkit_sysroot import is_live, sysroot_path
except ImportError:  # in hostkit's agent on the host, which carries no Ansible
    from hostkit.agent.changes.run import decide as decide_run
    from hostkit.agent.changes.run import do as do_run
    from hostkit.agent.journal_io import JournalError, ModuleFailure, change_file, file_state
    from hostkit.core.boot_loader import (
        BootConfigError,
        describe_none,
        describe_uki,
        detect,
        edit,
        next_boot,
        real_path,
    )
    from hostkit.core.kernel_args import arg_name, cmdline_tokens, domain_isolated, format_arg, split_cmdline
    from hostkit.core.sysroot import is_live, sysroot_path

OPTIONS = dict(
    set=dict(type="dict", default={}),
    remove=dict(type="list", elements="str", default=[]),
    simulate_reboot=dict(type="bool", default=False),
    regenerate=dict(type="bool", default=False),
)
RULES = {}
CMDLINE = "/proc/cmdline"
ISOLATED = "/sys/devices/system/cpu/isolated"  # what a booted kernel lists as domain-isolated
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:/=-]*$")


def wanted_args(params):
    """The arguments to set as name -> str value (None: a bare flag), checked; params only."""
    want = {k: None if v is None else str(v) for k, v in params["set"].items()}
    for k, v in sorted(want.items()):
        if not NAME_RE.match(k) or (v is not None and not VALUE_RE.match(v)):
            raise ModuleFailure("refusing kernel argument %r=%r: only letters, digits and _.,:/=- are allowed" % (k, v))
    for k in params["remove"]:
        if not NAME_RE.match(k):
            raise ModuleFailure("refusing to remove kernel argument %r: a name is letters, digits and _.- only" % (k,))
    if params["simulate_reboot"] and is_live(params["sysroot"]):
        raise ModuleFailure("simulate_reboot is for lab sysroots only; on a real host reboot it")
    return want


def read_host(sysroot, simulate_reboot):
    """What the decision needs from the host: its boot configuration (backend, files and their
    state) and the booted command line."""
    try:
        with open(sysroot_path(sysroot, CMDLINE)) as f:
            booted = f.read().strip()
    except (IOError, OSError) as exc:
        raise ModuleFailure("cannot read %s under the sysroot %r: %s" % (CMDLINE, sysroot, exc))
    cfg = detect(sysroot)
    return {
        "boot": cfg,
        "states": {p: file_state(sysroot_path(sysroot, real_path(cfg, p))) for p in cfg["files"]},
        "booted": booted,
        "cmdline": file_state(sysroot_path(sysroot, CMDLINE)) if simulate_reboot else None,
        "isolated": file_state(sysroot_path(sysroot, ISOLATED)) if simulate_reboot else None,
    }


def decide(params, want, seen):
    """Pure: the file changes (path, before state, new text or None to remove, in the order they
    are made) and the module's result, from the parameters and what ``read_host`` saw."""
    managed = set(want) | set(params["remove"])
    cfg = seen["boot"]
    backend = cfg["backend"]
    args = split_cmdline(seen["booted"])
    pending = [k for k, v in want.items() if k not in args or args[k] != v] + [k for k in params["remove"] if k in args]
    if backend in ("none", "uki"):  # nowhere hostkit can write kernel arguments
        why = describe_uki(cfg) if backend == "uki" else describe_none(cfg)
        if want or pending:  # something to change and nowhere to write it: never "ok"
            raise ModuleFailure(
                "%s: the kernel arguments %s cannot be set here" % (why, ", ".join(sorted(set(want) | set(pending))))
            )
        return [], dict(
            changed=False,
            bootloader=None,
            commands=[],
            reboot_required=False,
            pending_args=[],
            booted_cmdline=seen["booted"],
            not_applicable=True,
            files=[],
            msg=why + ": nothing to set or remove",
        )
    try:
        new = edit(cfg, want, params["remove"])
    except BootConfigError as exc:
        raise ModuleFailure(str(exc))
    changes = []
    for path in sorted(new, key=lambda p: (cfg["files"] + [p]).index(p)):
        before = seen["states"].get(path) or {"exists": False}
        changes.append({"path": real_path(cfg, path), "before": before, "content": new[path]})
    after = dict(cfg, texts={p: t for p, t in list(cfg["texts"].items()) + list(new.items()) if t is not None})
    next_line, source = next_boot(after, seen["booted"])
    result = dict(
        bootloader=backend,
        commands=[["update-grub"]] if changes and backend == "grub-debian" else [],
        reboot_required=bool(pending),
        pending_args=sorted(pending),
        booted_cmdline=seen["booted"],
        not_applicable=False,
        next_boot_cmdline=next_line,
        next_boot_source=source,
    )
    if params["simulate_reboot"] and pending:
        kept = [t for t in cmdline_tokens(seen["booted"]) if arg_name(t) not in managed]
        new_cmdline = " ".join(kept + [format_arg(k, v) for k, v in sorted(want.items())]) + "\n"
        changes.append({"path": CMDLINE, "before": seen["cmdline"], "content": new_cmdline})
        isolated = seen.get("isolated") or {"exists": False}
        if isolated["exists"]:  # the kernel's own list, as the simulated boot would show it
            listed = domain_isolated(split_cmdline(new_cmdline).get("isolcpus")) + "\n"
            if listed != isolated.get("content"):
                changes.append({"path": ISOLATED, "before": isolated, "content": listed})
        result.update(simulated_reboot=True, reboot_required=False, pending_args=[])
    result["changed"] = bool(changes)
    result["files"] = [c["path"] for c in changes]
    return changes, result


def diff(changes):
    return [
        dict(
            before_header=c["path"],
            after_header=c["path"],
            before=c["before"].get("content", ""),
            after=c["content"] or "",
        )
        for c in changes
    ]


def do(params, journal, changes):
    """Journal each change, then make it; a journal that cannot be written stops before that file."""
    for c in changes:
        before = c["before"]
        data = None if c["content"] is None else c["content"].encode("utf-8")
        mode = int(before["mode"], 8) if before["exists"] else 0o644
        try:
            change_file(
                journal, params["role"], c["path"], sysroot_path(params["sysroot"], c["path"]), before, data, mode=mode
            )
        except JournalError as exc:
            raise ModuleFailure(
                "cannot write the journal %s (stopped before %s): %s" % (exc.path, c["path"], exc.reason)
            )


def regenerate(params, result, check_mode):
    """Run the boot loader's regeneration command (``update-grub`` for Debian's GRUB; BLS and
    systemd-boot entries are read by the boot loader itself) after the files changed, or record it
    as would-run on a lab sysroot; reported in the result's ``ran``."""
    ran = []
    for argv in result["commands"]:
        run = dict(
            sysroot=params["sysroot"], argv=argv, reason="kernel arguments changed in %s" % ", ".join(result["files"])
        )
        action, outcome = decide_run(run, is_live(params["sysroot"]), True, check_mode)
        do_run(run, action, outcome)
        ran.append(outcome)
    result["ran"] = ran


def work(params, journal, check_mode=False, diff_mode=False):
    """Check the arguments, read the boot configuration, decide, then (unless in check mode) journal
    and write the files, and with ``regenerate`` run what makes the boot loader read them."""
    want = wanted_args(params)
    changes, result = decide(params, want, read_host(params["sysroot"], params["simulate_reboot"]))
    if diff_mode:
        result["diff"] = diff(changes)
    if changes and not check_mode:
        do(params, journal, changes)
    if params.get("regenerate") and changes:
        regenerate(params, result, check_mode)
    return result
