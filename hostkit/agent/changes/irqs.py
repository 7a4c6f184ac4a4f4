# -*- coding: utf-8 -*-
"""The plan's IRQ rules by action name, resolved to this boot's IRQ numbers on the host and written
in one journaled call with default_smp_affinity: an ``irqs`` change of ``hostkit_changes`` (the
``irq_affinity`` role). IRQ numbers change between boots; the names in ``/proc/interrupts`` do not."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:  # as Ansible ships it (AnsiballZ), and in-process beside the project's module_utils
    from ansible.module_utils.hostkit_change_values import work as values_work
    from ansible.module_utils.hostkit_irq_affinity import read_rows, resolve
    from ansible.module_utils.hostkit_journal_io import ModuleFailure
    from ansible.module_utils.hostkit_sysroot import sysroot_path
except ImportError:  # in hostkit's agent on the host, which carries no Ansible
    from hostkit.agent.changes.values import work as values_work
    from hostkit.agent.journal_io import ModuleFailure
    from hostkit.core.irq_affinity import read_rows, resolve
    from hostkit.core.sysroot import sysroot_path

OPTIONS = dict(
    by_name=dict(type="dict", default={}),
    default_smp_affinity=dict(type="str"),
    tolerate_refused=dict(type="bool", default=True),
)
RULES = {}


def decide(params, rows):
    """Pure: the values to write for this boot (``rows``: its /proc/interrupts) and the rule names
    no IRQ of this boot carries."""
    assign, missed = resolve(params["by_name"] or {}, rows)
    items = [
        {"path": "/proc/irq/%s/smp_affinity_list" % irq, "value": cpus, "kind": "cpulist"}
        for irq, cpus in sorted(assign.items(), key=lambda kv: int(kv[0]))
    ]
    if params.get("default_smp_affinity"):
        items.append(
            {"path": "/proc/irq/default_smp_affinity", "value": params["default_smp_affinity"], "kind": "mask"}
        )
    return items, missed


def work(params, journal, check_mode=False, diff_mode=False):
    """Resolve the rules in this boot, then write the values as ``hostkit_values`` does."""
    rows = []
    if params["by_name"]:
        try:
            rows = read_rows(sysroot_path(params["sysroot"], "/"))
        except (IOError, OSError) as exc:
            raise ModuleFailure("cannot read /proc/interrupts under the sysroot %r: %s" % (params["sysroot"], exc))
    items, missed = decide(params, rows)
    values = dict(params, items=items)
    result = (
        values_work(values, journal, check_mode, diff_mode)
        if items
        else dict(changed=False, unchanged=0, missing=[], refused=[], changes=[])
    )
    result.update(missed=missed, resolved=len(items) - (1 if params.get("default_smp_affinity") else 0))
    return result
