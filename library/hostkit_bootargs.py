#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: kernel arguments in the boot config (GRUB drop-in, BLS entries, systemd-boot entries),
replacing what others set."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hostkit_bootargs
short_description: Set and remove kernel arguments in the host's boot loader configuration
description:
  - One backend, chosen from the host's files (hostkit.agent.boot_loader.detect) - grub-debian
    removes the managed arguments (those to set and those to remove) from GRUB_CMDLINE_LINUX and
    GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub and every other /etc/default/grub.d/*.cfg and
    writes the arguments to set into /etc/default/grub.d/hostkit.cfg; bls edits every entry's
    options line in /boot/loader/entries (on EL8 the kernelopts variable in /boot/grub2/grubenv
    for entries that use $kernelopts, and the managed names out of any other variable an entry
    expands, such as tuned's tuned_params), and /etc/kernel/cmdline; systemd-boot edits
    <esp>/loader/entries/*.conf and /etc/kernel/cmdline. An isolcpus= set by another tool is
    replaced, never duplicated; the result is checked before any change (each managed argument
    exactly once in every boot entry).
  - A host without a supported boot configuration fails (never ok) when there is anything to set
    or a removed argument is still booted.
  - Every file change is journaled first. Reports the command to regenerate the config (update-grub,
    for grub-debian only) and whether /proc/cmdline differs from the plan (reboot required).
  - With simulate_reboot (lab sysroots only), rewrites the sysroot's proc/cmdline (and
    sys/devices/system/cpu/isolated, where the sysroot has it) as a reboot would.
author: hostkit maintainers (!UNKNOWN)
extends_documentation_fragment:
  - hostkit.tuning.host
  - hostkit.tuning.host.journal
options:
  set:
    description: Arguments to set, name -> value (null for a bare flag such as C(nosoftlockup)).
    type: dict
    default: {}
  remove:
    description: Names of arguments to remove.
    type: list
    elements: str
    default: []
  simulate_reboot:
    description: Lab sysroots only - rewrite the sysroot's C(proc/cmdline) and C(sys/devices/system/cpu/isolated) as a reboot would.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Isolate CPUs 8-63 from the scheduler, timer ticks and RCU callbacks
  hostkit.tuning.hostkit_bootargs:
    set:
      isolcpus: managed_irq,domain,8-63
      nohz_full: 8-63
      rcu_nocbs: 8-63
      irqaffinity: 0-7
      nosoftlockup:
    run_id: "{{ hostkit_run_id }}"
    role: isolcpus
  register: bootargs

- name: Give the CPUs back
  hostkit.tuning.hostkit_bootargs:
    remove: [isolcpus, nohz_full, rcu_nocbs, irqaffinity]
    run_id: "{{ hostkit_run_id }}"
"""

RETURN = r"""
bootloader:
  description: The backend found (V(grub-debian), V(bls), V(systemd-boot)); null when there is none.
  returned: always
  type: str
  sample: grub-debian
files:
  description: The files changed (to be changed, in check mode), in the order they are written.
  returned: always
  type: list
  elements: str
  sample: [/etc/default/grub, /etc/default/grub.d/hostkit.cfg]
commands:
  description: Commands that make the new configuration take effect at boot (argv lists).
  returned: always
  type: list
  elements: list
  sample: [[update-grub]]
reboot_required:
  description: The booted command line (C(/proc/cmdline)) differs from the plan.
  returned: always
  type: bool
  sample: true
pending_args:
  description: Names of the arguments a reboot will change.
  returned: always
  type: list
  elements: str
  sample: [isolcpus, nohz_full]
booted_cmdline:
  description: The booted command line.
  returned: always
  type: str
  sample: BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=... ro quiet
not_applicable:
  description: True when the host has no supported boot configuration and there was nothing to change.
  returned: always
  type: bool
  sample: false
next_boot_cmdline:
  description: The command line the next boot will use, as the changed configuration gives it.
  returned: when a boot configuration was found
  type: str
  sample: BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=... ro quiet isolcpus=managed_irq,domain,8-63
next_boot_source:
  description: The file the next boot's command line comes from (the default entry for BLS and systemd-boot).
  returned: when a boot configuration was found
  type: str
  sample: /etc/default/grub
simulated_reboot:
  description: The sysroot's C(proc/cmdline) was rewritten (O(simulate_reboot) with arguments pending).
  returned: when a reboot was simulated
  type: bool
  sample: true
"""

import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_boot_loader import (BootConfigError, describe_none, detect, edit, next_boot,
                                                      real_path)
from ansible.module_utils.hostkit_journal import (JournalError, ModuleFailure, change_file, file_state,
                                                  journaled_module_options, run_journaled)
from ansible.module_utils.hostkit_kernel_args import (arg_name, cmdline_tokens, domain_isolated, format_arg,
                                                      split_cmdline)
from ansible.module_utils.hostkit_sysroot import is_live, sysroot_path

CMDLINE = "/proc/cmdline"
ISOLATED = "/sys/devices/system/cpu/isolated"  # what a booted kernel lists as domain-isolated
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:/=-]*$")


def wanted_args(params):
    """The arguments to set as name -> str value (None: a bare flag), checked; params only."""
    want = dict((k, None if v is None else str(v)) for k, v in params["set"].items())
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
    return {"boot": cfg,
            "states": dict((p, file_state(sysroot_path(sysroot, real_path(cfg, p)))) for p in cfg["files"]),
            "booted": booted,
            "cmdline": file_state(sysroot_path(sysroot, CMDLINE)) if simulate_reboot else None,
            "isolated": file_state(sysroot_path(sysroot, ISOLATED)) if simulate_reboot else None}


def decide(params, want, seen):
    """Pure: the file changes (path, before state, new text or None to remove, in the order they
    are made) and the module's result, from the parameters and what ``read_host`` saw."""
    managed = set(want) | set(params["remove"])
    cfg = seen["boot"]
    backend = cfg["backend"]
    args = split_cmdline(seen["booted"])
    pending = ([k for k, v in want.items() if k not in args or args[k] != v]
               + [k for k in params["remove"] if k in args])
    if backend == "none":
        if want or pending:  # something to change and nowhere to write it: never "ok"
            raise ModuleFailure("%s: the kernel arguments %s cannot be set here"
                                % (describe_none(cfg), ", ".join(sorted(set(want) | set(pending)))))
        return [], dict(changed=False, bootloader=None, commands=[], reboot_required=False, pending_args=[],
                        booted_cmdline=seen["booted"], not_applicable=True, files=[],
                        msg=describe_none(cfg) + ": nothing to set or remove")
    try:
        new = edit(cfg, want, params["remove"])
    except BootConfigError as exc:
        raise ModuleFailure(str(exc))
    changes = []
    for path in sorted(new, key=lambda p: (cfg["files"] + [p]).index(p)):
        before = seen["states"].get(path) or {"exists": False}
        changes.append({"path": real_path(cfg, path), "before": before, "content": new[path]})
    after = dict(cfg, texts=dict((p, t) for p, t in list(cfg["texts"].items()) + list(new.items()) if t is not None))
    next_line, source = next_boot(after, seen["booted"])
    result = dict(bootloader=backend, commands=[["update-grub"]] if changes and backend == "grub-debian" else [],
                  reboot_required=bool(pending), pending_args=sorted(pending), booted_cmdline=seen["booted"],
                  not_applicable=False, next_boot_cmdline=next_line, next_boot_source=source)
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
            raise ModuleFailure("cannot write the journal %s (stopped before %s): %s" % (exc.path, c["path"], exc.reason))


def main():
    module = AnsibleModule(
        argument_spec=journaled_module_options(
            set=dict(type="dict", default={}),
            remove=dict(type="list", elements="str", default=[]),
            simulate_reboot=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )

    def work(p, journal):
        want = wanted_args(p)
        changes, result = decide(p, want, read_host(p["sysroot"], p["simulate_reboot"]))
        if module._diff:
            result["diff"] = diff(changes)
        if changes and not module.check_mode:
            do(p, journal, changes)
        return result

    run_journaled(module, work)


if __name__ == "__main__":
    main()
