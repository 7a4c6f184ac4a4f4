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
  - Values are compared normalised (int, cpulist, hex mask, bracketed choice) before writing.
  - Writes the kernel refuses with EIO (managed or per-CPU IRQs) are reported in C(refused), not failures,
    when C(tolerate_refused) is set. In a lab sysroot, a C(.managed) file beside an IRQ's files stands for that EIO.
options:
  sysroot: {description: Root the paths are under., type: str, default: ''}
  items:
    description: >-
      List of {path, value, kind} with kind one of int, str, cpulist, mask; optional allowed_from:
      a file listing the values the kernel accepts (e.g. scaling_available_governors), checked
      for every item before anything is written.
    type: list
    elements: dict
    required: true
  tolerate_refused: {description: Report writes the kernel refuses (EIO, EPERM, EINVAL) instead of failing., type: bool, default: false}
  run_id: {description: Journal run id., type: str, required: true}
  role: {description: Role name recorded in the journal., type: str, default: ''}
"""

import errno
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_journal import Journal, is_live, sysroot_path


# How the kernel refuses an IRQ affinity: EIO for managed IRQs (irq_can_set_affinity_usr),
# EPERM/EINVAL for per-CPU or chip-restricted ones.
REFUSED_ERRNOS = (errno.EIO, errno.EPERM, errno.EINVAL)


def parse_cpulist(text):
    cpus = set()
    text = text.strip()
    if not text:
        return cpus
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def parse_mask(text):
    value = int(text.strip().replace(",", "") or "0", 16)
    return set(i for i in range(value.bit_length()) if value >> i & 1)


def normalise(kind, text):
    text = (text or "").strip()
    if kind == "int":
        return int(text.split()[0]) if text else None
    if kind == "cpulist":
        return parse_cpulist(text)
    if kind == "mask":
        return parse_mask(text)
    return text


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysroot=dict(type="str", default=""),
            items=dict(type="list", elements="dict", required=True),
            tolerate_refused=dict(type="bool", default=False),
            run_id=dict(type="str", required=True),
            role=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    p = module.params
    lab = not is_live(p["sysroot"])
    todo, missing, same, pre_refused = [], [], 0, []
    for item in p["items"]:
        path, kind = item.get("path"), item.get("kind", "str")
        if not path or not os.path.isabs(path) or kind not in ("int", "str", "cpulist", "mask"):
            module.fail_json(msg="bad item %r: needs an absolute path and kind int/str/cpulist/mask" % (item,))
        value = str(item.get("value"))
        full = sysroot_path(p["sysroot"], path)
        allowed_from = item.get("allowed_from")
        if allowed_from:
            try:
                with open(sysroot_path(p["sysroot"], allowed_from)) as f:
                    allowed = f.read().split()
            except (IOError, OSError):
                allowed = None
            if allowed is not None and value not in allowed:
                module.fail_json(msg="%s: %r is not offered (%s: %s); nothing changed"
                                 % (path, value, allowed_from, " ".join(allowed)))
        if lab and p["tolerate_refused"] and os.path.exists(os.path.join(os.path.dirname(full), ".managed")):
            pre_refused.append({"path": path, "error": "Input/output error (lab: managed IRQ)"})
            continue
        try:
            with open(full) as f:
                current = f.read()
        except (IOError, OSError):
            missing.append(path)
            continue
        try:
            if normalise(kind, current) == normalise(kind, value):
                same += 1
                continue
        except ValueError:
            module.fail_json(msg="%s: cannot compare %r with %r as %s" % (path, current.strip(), value, kind))
        todo.append({"path": path, "full": full, "before": current.rstrip("\n"), "after": value, "kind": kind})

    result = dict(changed=bool(todo), unchanged=same, missing=missing, refused=pre_refused,
                  changes=[{"path": t["path"], "before": t["before"], "after": t["after"]} for t in todo])
    if module._diff and todo:
        result["diff"] = dict(before="".join("%s = %s\n" % (t["path"], t["before"]) for t in todo),
                              after="".join("%s = %s\n" % (t["path"], t["after"]) for t in todo))
    if not todo or module.check_mode:
        module.exit_json(**result)

    journal = Journal(p["sysroot"], p["run_id"])
    try:
        entry = journal.record({"kind": "values", "role": p["role"],
                        "items": [{"path": t["path"], "before": t["before"], "after": t["after"], "kind": t["kind"]}
                                  for t in todo]})
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot write the journal %s (nothing changed): %s" % (journal.path, exc))
    refused, written = list(pre_refused), 0
    for t in todo:
        try:
            with open(t["full"], "w") as f:
                f.write(t["after"] + "\n")
            written += 1
        except (IOError, OSError) as exc:
            if exc.errno in REFUSED_ERRNOS and p["tolerate_refused"]:
                refused.append({"path": t["path"], "error": os.strerror(exc.errno)})
                continue
            module.fail_json(msg="writing %s failed: %s" % (t["path"], exc), **result)
    newly_refused = [r["path"] for r in refused if r not in pre_refused]
    if newly_refused:
        journal.drop_items(entry["seq"], newly_refused)
    result["refused"] = refused
    result["written"] = written
    result["changed"] = written > 0
    module.exit_json(**result)


if __name__ == "__main__":
    main()
