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

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_cpulist import parse_cpulist, parse_mask
# How the kernel refuses an IRQ affinity (EIO: managed; EPERM/EINVAL: per-CPU or chip-restricted) and
# the lab's stand-in for that EIO: one rule with the boot-time unit's program.
from ansible.module_utils.hostkit_irq_affinity import LAB_MANAGED_MARKER, REFUSED_ERRNOS
from ansible.module_utils.hostkit_journal import Journal, journaled_module_options
from ansible.module_utils.hostkit_normalise import KINDS, same
from ansible.module_utils.hostkit_sysroot import is_live, sysroot_path


class Failure(Exception):
    """The module fails with this message (bad input or host state found before any change)."""


class WriteFailure(Failure):
    """A write failed after the journal was written: the result so far goes with the message."""


def check_value(kind, text):
    """Raise ValueError, with the parser's reason, when ``text`` is not a ``kind`` (the shared
    normaliser would compare it as plain text, equal to nothing the module writes)."""
    text = text.strip()
    if kind == "cpulist":
        parse_cpulist(text)
    elif kind == "mask":
        parse_mask(text)
    elif kind == "int":
        try:
            int(text.split()[0])
        except (IndexError, ValueError):
            raise ValueError("%r is not an integer" % (text,))


def check_items(items):
    """Params only: every item has an absolute path, a known kind and a value of that kind."""
    for n, item in enumerate(items, 1):
        path, kind = item.get("path"), item.get("kind", "str")
        if not path or not os.path.isabs(path) or kind not in KINDS:
            raise Failure("bad item %r: needs an absolute path and kind %s" % (item, "/".join(KINDS)))
        if item.get("value") is None:
            raise Failure("bad item %d (%s): no value" % (n, path))
        try:
            check_value(kind, str(item["value"]))
        except ValueError as exc:
            raise Failure("bad item %d (%s): value %r does not parse as %s: %s; nothing changed"
                          % (n, path, item["value"], kind, exc))


def read_host(sysroot, items, tolerate_refused):
    """For each item: the values its allowed_from file offers, whether the lab marks it managed,
    and its current content (None when it cannot be read)."""
    lab = not is_live(sysroot)
    seen = []
    for item in items:
        full = sysroot_path(sysroot, item["path"])
        allowed = None
        if item.get("allowed_from"):
            try:
                with open(sysroot_path(sysroot, item["allowed_from"])) as f:
                    allowed = f.read().split()
            except (IOError, OSError):
                pass
        managed = (lab and tolerate_refused
                   and os.path.exists(os.path.join(os.path.dirname(full), LAB_MANAGED_MARKER)))
        current = None
        if not managed:
            try:
                with open(full) as f:
                    current = f.read()
            except (IOError, OSError):
                pass
        seen.append({"allowed": allowed, "managed": managed, "current": current})
    return seen


def decide(items, seen):
    """Pure: the values to write (path, before, after, kind) and the result, from the items and
    what ``read_host`` saw for each."""
    todo, missing, unchanged, refused = [], [], 0, []
    for item, s in zip(items, seen):
        path, kind = item["path"], item.get("kind", "str")
        value = str(item["value"])
        if s["allowed"] is not None and value not in s["allowed"]:
            raise Failure("%s: %r is not offered (%s: %s); nothing changed"
                          % (path, value, item["allowed_from"], " ".join(s["allowed"])))
        if s["managed"]:
            refused.append({"path": path, "error": "Input/output error (lab: managed IRQ)"})
            continue
        if s["current"] is None:
            missing.append(path)
            continue
        try:
            check_value(kind, s["current"])
        except ValueError:
            raise Failure("%s: cannot compare %r with %r as %s" % (path, s["current"].strip(), value, kind))
        if same(kind, value, s["current"]):
            unchanged += 1
            continue
        todo.append({"path": path, "before": s["current"].rstrip("\n"), "after": value, "kind": kind})
    result = dict(changed=bool(todo), unchanged=unchanged, missing=missing, refused=refused,
                  changes=[{"path": t["path"], "before": t["before"], "after": t["after"]} for t in todo])
    return todo, result


def diff(todo):
    return dict(before="".join("%s = %s\n" % (t["path"], t["before"]) for t in todo),
                after="".join("%s = %s\n" % (t["path"], t["after"]) for t in todo))


def do(params, journal, todo, result):
    """Journal every value in one entry, then write them; writes the kernel refuses are reported
    (with tolerate_refused) and dropped from the journal, anything else fails the module."""
    try:
        entry = journal.record({"kind": "values", "role": params["role"], "items": todo})
    except (IOError, OSError) as exc:
        raise Failure("cannot write the journal %s (nothing changed): %s" % (journal.path, exc))
    refused, written = list(result["refused"]), 0
    for t in todo:
        try:
            with open(sysroot_path(params["sysroot"], t["path"]), "w") as f:
                f.write(t["after"] + "\n")
            written += 1
        except (IOError, OSError) as exc:
            if exc.errno in REFUSED_ERRNOS and params["tolerate_refused"]:
                refused.append({"path": t["path"], "error": os.strerror(exc.errno)})
                continue
            raise WriteFailure("writing %s failed: %s" % (t["path"], exc))
    newly_refused = [r["path"] for r in refused[len(result["refused"]):]]
    if newly_refused:
        journal.drop_items(entry["seq"], newly_refused)
    result.update(refused=refused, written=written, changed=written > 0)


def main():
    module = AnsibleModule(
        argument_spec=journaled_module_options(
            items=dict(type="list", elements="dict", required=True),
            tolerate_refused=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    result = {}
    try:
        check_items(p["items"])
        journal = Journal(p["sysroot"], p["run_id"])
        todo, result = decide(p["items"], read_host(p["sysroot"], p["items"], p["tolerate_refused"]))
        if module._diff and todo:
            result["diff"] = diff(todo)
        if todo and not module.check_mode:
            do(p, journal, todo, result)
    except WriteFailure as exc:  # after the journal: the result so far goes with the message
        module.fail_json(msg=str(exc), **result)
    except (Failure, ValueError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
