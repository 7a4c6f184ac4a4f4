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
  - One backend, chosen from the host's files (hostkit.core.boot_loader.detect) - grub-debian
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
  regenerate:
    description:
      - When files changed, also run the command that regenerates the boot loader's config
        (RV(commands)) in the same call, or record it as would-run on a lab sysroot (RV(ran)).
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
ran:
  description: The regeneration commands run (or recorded as would-run), each as the module M(hostkit.tuning.hostkit_run) reports it.
  returned: with O(regenerate) when files changed
  type: list
  elements: dict
  sample: [{argv: [update-grub], changed: true, would_run: false, rc: 0}]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_change_bootargs import OPTIONS, work
from ansible.module_utils.hostkit_journal_io import journaled_module_options, run_journaled


def main():
    module = AnsibleModule(argument_spec=journaled_module_options(**OPTIONS), supports_check_mode=True)
    run_journaled(module, work)


if __name__ == "__main__":
    main()
