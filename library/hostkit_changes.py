#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: one role's changes on a host in one call, each journaled first, then the
commands they call for (the handlers of the role)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hostkit_changes
short_description: Make one role's changes in one call - files, values, boot arguments, kernel threads, IRQ rules - then the commands they call for
description:
  - Each change is the work of one of hostkit's modules, with that module's options and checks
    (M(hostkit.tuning.hostkit_file), M(hostkit.tuning.hostkit_values),
    M(hostkit.tuning.hostkit_bootargs), M(hostkit.tuning.hostkit_kthreads),
    M(hostkit.tuning.hostkit_kubelet_state), M(hostkit.tuning.hostkit_run)), plus C(irqs) (the
    plan's IRQ rules by action name, resolved to this boot's IRQ numbers on the host, then written
    as C(values)). They run in order, on one host, in one module call - one round trip instead of
    one per file, value list and handler.
  - Every change's options are checked before the first change is made; bad input changes nothing.
    A change that fails stops the call; the changes before it stay made and journaled (rollback
    undoes them).
  - A C(run) change is a handler - by default it runs only when a change before it in this call
    changed something (C(if_changed) of O(changes)).
author: hostkit maintainers (!UNKNOWN)
extends_documentation_fragment:
  - hostkit.tuning.host
  - hostkit.tuning.host.journal
options:
  changes:
    description:
      - The changes, in order. Each is a mapping with exactly one key naming its kind - V(file),
        V(values), V(bootargs), V(kthreads), V(kubelet_state), V(irqs) or V(run) - whose value holds
        the options of that kind (those of the module of the same name, without O(sysroot),
        O(run_id) and O(role)); optionally C(name), a label that C(if_changed) and the results use;
        C(when) - a change whose C(when) is false is not part of the call; and C(needs) - programs
        the change needs on the host (found on its C(PATH)) - when one is missing, the change is not
        made and its result says C(not_applicable) with why.
      - C(irqs) takes C(by_name) (action name -> cpulist), C(default_smp_affinity) (a hex mask or
        null) and C(tolerate_refused) (default V(true)).
      - C(run) also takes C(if_changed) - V(true) (default) to run only when an earlier change of this
        call changed something, a list of change names to run only when one of those changed, or
        V(false) to run always.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Persist and set the NUMA sysctls (one call)
  hostkit.tuning.hostkit_changes:
    changes:
      - file:
          path: /etc/sysctl.d/90-hostkit-numa.conf
          content: "kernel.numa_balancing = 0\n"
      - values:
          items:
            - {path: /proc/sys/kernel/numa_balancing, value: 0, kind: int}
    run_id: "{{ hostkit_run_id }}"
    role: numa_sysctl

- name: Ban CPUs from irqbalance and restart it only if the ban changed
  hostkit.tuning.hostkit_changes:
    changes:
      - name: ban
        file:
          path: /etc/default/irqbalance
          remove_regex: '^\s*#?\s*IRQBALANCE_BANNED_CPULIST=.*\n?'
          append: IRQBALANCE_BANNED_CPULIST=2-15
      - run:
          argv: [systemctl, restart, irqbalance.service]
          if_changed: [ban]
    run_id: "{{ hostkit_run_id }}"
    role: irq_affinity
"""

RETURN = r"""
results:
  description:
    - One result per change, in order, as the module of its kind returns it, with C(kind) and C(name).
    - A C(run) change that did not run has C(not_triggered); a change whose program is missing, C(not_applicable).
  returned: always
  type: list
  elements: dict
  sample:
    - {kind: file, name: ban, changed: true, path: /etc/default/irqbalance}
    - {kind: run, changed: true, argv: [systemctl, restart, irqbalance.service]}
reboot_required:
  description: A C(bootargs) change found the booted command line differing from the wanted one.
  returned: when there is a bootargs change
  type: bool
  sample: true
pending_args:
  description: The kernel arguments the booted command line lacks (C(bootargs)).
  returned: when there is a bootargs change
  type: list
  elements: str
  sample: [isolcpus, nohz_full]
refused:
  description: Writes the kernel refused (C(values), C(irqs) with C(tolerate_refused)).
  returned: always
  type: list
  elements: dict
  sample: []
failed_change:
  description: The position (from 1) of the change that failed.
  returned: failure
  type: int
  sample: 2
"""

import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.hostkit_change_bootargs import OPTIONS as BOOTARGS, work as bootargs_work
from ansible.module_utils.hostkit_change_file import OPTIONS as FILE, RULES as FILE_RULES, work as file_work
from ansible.module_utils.hostkit_change_irqs import OPTIONS as IRQS, work as irqs_work
from ansible.module_utils.hostkit_change_kthreads import OPTIONS as KTHREADS, work as kthreads_work
from ansible.module_utils.hostkit_change_kubelet_state import OPTIONS as KUBELET_STATE, work as kubelet_state_work
from ansible.module_utils.hostkit_change_run import OPTIONS as RUN, work as run_work
from ansible.module_utils.hostkit_change_values import OPTIONS as VALUES, work as values_work
from ansible.module_utils.hostkit_journal_io import Journal, ModuleFailure, journaled_module_options

# kind -> (its options, their rules, its work)
KINDS = {
    "file": (FILE, FILE_RULES, file_work),
    "values": (VALUES, {}, values_work),
    "bootargs": (BOOTARGS, {}, bootargs_work),
    "kthreads": (KTHREADS, {}, kthreads_work),
    "kubelet_state": (KUBELET_STATE, {}, kubelet_state_work),
    "irqs": (IRQS, {}, irqs_work),
    "run": (dict(RUN, if_changed=dict(type="raw", default=True)), {}, run_work),
}
HOISTED = ("reboot_required", "pending_args", "booted_cmdline", "next_boot_cmdline", "bootloader")


def parse(changes):
    """Params only: each change's kind, name and validated options, before anything is done."""
    parsed, names = [], set()
    for n, change in enumerate(changes, 1):
        if not isinstance(change, dict):
            raise ModuleFailure("change %d is not a mapping: %r; nothing changed" % (n, change), failed_change=n)
        if not change.get("when", True):
            continue
        name = change.get("name")
        kinds = [k for k in change if k not in ("name", "when", "needs")]
        if len(kinds) != 1 or kinds[0] not in KINDS:
            raise ModuleFailure("change %d needs exactly one kind of %s, got %s; nothing changed"
                                % (n, ", ".join(sorted(KINDS)), ", ".join(sorted(kinds)) or "none"),
                                failed_change=n)
        kind = kinds[0]
        spec, rules, _work = KINDS[kind]
        given = change[kind] if isinstance(change[kind], dict) else None
        if given is None:
            raise ModuleFailure("change %d (%s): its options must be a mapping; nothing changed" % (n, kind),
                                failed_change=n)
        checked = ArgumentSpecValidator(spec, **rules).validate(given)
        if checked.error_messages:
            raise ModuleFailure("change %d (%s): %s; nothing changed" % (n, kind, "; ".join(checked.error_messages)),
                                failed_change=n)
        params = checked.validated_parameters
        if kind == "run":
            trigger = params["if_changed"]
            if not isinstance(trigger, (bool, list)) or (isinstance(trigger, list) and not set(trigger) <= names):
                raise ModuleFailure("change %d (run): if_changed must be true, false or a list of names of changes "
                                    "before it (%s), got %r; nothing changed"
                                    % (n, ", ".join(sorted(names)) or "none named", trigger), failed_change=n)
        needs = change.get("needs") or []
        if not isinstance(needs, list) or not all(isinstance(x, str) and x for x in needs):
            raise ModuleFailure("change %d (%s): needs must be a list of program names, got %r; nothing changed"
                                % (n, kind, needs), failed_change=n)
        if name is not None:
            names.add(name)
        parsed.append((kind, name, params, needs))
    return parsed


def missing_programs(needs, which=shutil.which):
    return [p for p in needs if which(p) is None]


def triggered(trigger, changed_names, any_changed):
    if trigger is True:
        return any_changed
    if trigger is False:
        return True
    return bool(set(trigger) & changed_names)


def apply_changes(common, parsed, journal, check_mode, diff_mode):
    """Make the changes in order; the module's result. A failing change raises ModuleFailure with the
    results so far and its position."""
    results, changed_names, any_changed = [], set(), False
    for n, (kind, name, params, needs) in enumerate(parsed, 1):
        params = dict(params, **common)
        label = {"kind": kind, "name": name}
        absent = missing_programs(needs)
        if absent:
            results.append(dict(label, changed=False, not_applicable="%s is not installed" % ", ".join(absent)))
            continue
        if kind == "run" and not triggered(params["if_changed"], changed_names, any_changed):
            results.append(dict(label, changed=False, not_triggered=True, argv=params["argv"]))
            continue
        try:
            res = KINDS[kind][2](params, journal, check_mode, diff_mode)
        except ModuleFailure as exc:
            results.append(dict(label, failed=True, msg=str(exc), **exc.fields))
            raise ModuleFailure("change %d (%s%s): %s" % (n, kind, " %s" % name if name else "", exc),
                                **summary(results, failed_change=n))
        results.append(dict(label, **res))
        if res.get("changed") and kind != "run":
            any_changed = True
            if name is not None:
                changed_names.add(name)
    return summary(results)


def summary(results, **extra):
    out = dict(changed=any(r.get("changed") for r in results), results=results,
               refused=[x for r in results for x in r.get("refused") or []], **extra)
    diffs = []
    for r in results:
        d = r.pop("diff", None)
        diffs += d if isinstance(d, list) else [d] if d else []
    if diffs:
        out["diff"] = diffs
    for r in results:
        if r["kind"] == "bootargs":
            out.update((k, r[k]) for k in HOISTED if k in r)
    return out


def main():
    module = AnsibleModule(
        argument_spec=journaled_module_options(changes=dict(type="list", elements="dict", required=True)),
        supports_check_mode=True,
    )
    p = module.params
    common = dict(sysroot=p["sysroot"], run_id=p["run_id"], role=p["role"])
    try:
        parsed = parse(p["changes"])
        result = apply_changes(common, parsed, Journal(p["sysroot"], p["run_id"]), module.check_mode, module._diff)
    except ModuleFailure as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
