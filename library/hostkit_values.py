#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: write many kernel values (sysctls, governors, IRQ affinities) in one call, journaled."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hostkit_values
short_description: Set /proc and /sys values under hostkit_sysroot in one call, journaling previous values
description:
  - One call for hundreds of CPUs or IRQs (an Ansible loop over 384 CPUs costs minutes).
  - Values are compared normalised (int, cpulist, hex mask, bracketed choice) before writing; all
    previous values go into one journal entry before the first write.
  - Writes the kernel refuses with EIO (managed IRQs), EPERM or EINVAL (per-CPU or chip-restricted
    IRQs) are reported in RV(refused), not failures, when O(tolerate_refused) is set. In a lab
    sysroot, a C(.managed) file beside an IRQ's files stands for that EIO.
author: hostkit maintainers (!UNKNOWN)
extends_documentation_fragment:
  - hostkit.tuning.host
  - hostkit.tuning.host.journal
options:
  items:
    description:
      - List of C({path, value, kind}); C(kind) is one of V(int), V(str), V(cpulist), V(mask),
        V(choice) (a sysfs choice file such as C(always [madvise] never)) (default V(str)).
      - Optional C(allowed_from) - a file listing the values the kernel accepts (for example
        C(scaling_available_governors)), checked for every item before anything is written.
    type: list
    elements: dict
    required: true
  tolerate_refused:
    description:
      - Report writes the kernel refuses (EIO, EPERM, EINVAL) in RV(refused) instead of failing.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: NUMA sysctls at runtime
  hostkit.tuning.hostkit_values:
    items:
      - {path: /proc/sys/kernel/numa_balancing, value: 0, kind: int}
      - {path: /proc/sys/vm/stat_interval, value: 10, kind: int}
    run_id: "{{ hostkit_run_id }}"
    role: numa_sysctl

- name: Every movable IRQ to the housekeeping CPUs, managed IRQs reported instead of failing
  hostkit.tuning.hostkit_values:
    items:
      - {path: /proc/irq/24/smp_affinity_list, value: "0-1", kind: cpulist}
      - {path: /proc/irq/25/smp_affinity_list, value: "0-1", kind: cpulist}
    tolerate_refused: true
    run_id: "{{ hostkit_run_id }}"
    role: irq_affinity

- name: The performance governor, if the CPU offers it
  hostkit.tuning.hostkit_values:
    items:
      - path: /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor
        value: performance
        allowed_from: /sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors
    run_id: "{{ hostkit_run_id }}"
    role: cpu_governor
"""

RETURN = r"""
changes:
  description: The values written (to be written, in check mode), each with its previous value.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The file.
      type: str
      sample: /proc/sys/kernel/numa_balancing
    before:
      description: Its content before.
      type: str
      sample: '1'
    after:
      description: The value written.
      type: str
      sample: '0'
unchanged:
  description: How many items already held their value.
  returned: always
  type: int
  sample: 382
missing:
  description: Paths that do not exist or cannot be read (left alone).
  returned: always
  type: list
  elements: str
  sample: []
refused:
  description: Writes the kernel refused (with O(tolerate_refused)), dropped from the journal.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The file whose write the kernel refused.
      type: str
      sample: /proc/irq/57/smp_affinity_list
    error:
      description: Why.
      type: str
      sample: Input/output error
written:
  description: How many values were written.
  returned: when something was to change and not in check mode
  type: int
  sample: 2
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_change_values import OPTIONS, work
from ansible.module_utils.hostkit_journal_io import journaled_module_options, run_journaled


def main():
    module = AnsibleModule(argument_spec=journaled_module_options(**OPTIONS), supports_check_mode=True)
    run_journaled(module, work)


if __name__ == "__main__":
    main()
