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
  lock:
    description:
      - Hold the run's host-side lock (M(hostkit.tuning.hostkit_lock), O(hostkit.tuning.hostkit_lock#module:state=acquired))
        before the first change - taken when free, kept when this run (O(run_id)) holds it; when another run
        holds it the module fails with nothing changed, naming that run. The lock is hostkit's own
        state, so it is taken in check mode too. Release it with M(hostkit.tuning.hostkit_lock).
      - An apply sets it on every role's call (C(module_defaults)), which saves the lock's own call.
    type: bool
    default: false
  controller:
    description: With O(lock) - who takes the lock (recorded in it, shown to a run it refuses).
    type: str
    default: ""
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
acquired:
  description: O(lock) - this call took the lock (it was free).
  returned: when it did
  type: bool
  sample: true
holder:
  description: O(lock) - the lock's content when another run holds it.
  returned: failure, when another run holds the lock
  type: dict
  sample: {run_id: 20261204T101500Z-1a2b3c, controller: "ctl:4242", time: 1796378100.0}
failed_change:
  description: The position (from 1) of the change that failed.
  returned: failure
  type: int
  sample: 2
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.hostkit_change_set import ARGUMENT_SPEC, ModuleFailure, parse, request, run_request


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    try:
        parsed = parse(p["changes"])
    except ModuleFailure as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    # The agent's path (the action plugin's): the module's options as the request it sends, run here.
    result = run_request(request(p, parsed, module.check_mode, module._diff), p["sysroot"])
    if result.get("failed"):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
