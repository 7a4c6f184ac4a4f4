"""The typed plan: what :func:`hostkit.plan.planner.build_plan` decides for one host.

CPU sets are ``frozenset[int]`` here and kernel cpulist strings in :meth:`Plan.to_dict`, the plan
JSON document that ``hostkit plan --json`` prints and that apply hands to the roles as
``hostkit_plans[<host>]`` (docs: the plan contract). ``to_dict`` is the only place that decides
that document's keys and their order.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from hostkit.core.cpulist import format_cpulist, format_mask


@dataclass
class Notes:
    """What a plan says about itself, in the order the planner's steps run: ``reasons`` (why each
    value), ``warnings`` (what the operator should know), ``refused`` (why the plan is not applied),
    ``refused_parts`` (a part refused while the rest applies). Every step of the planner writes
    into the one object of its plan."""

    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    refused_parts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class NodePartition:
    """One NUMA node's CPUs split into housekeeping and isolated; its IRQ CPUs."""

    id: int
    cpus: frozenset[int]
    housekeeping: frozenset[int]
    isolated: frozenset[int]
    irq_cpus: frozenset[int]

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "cpus": format_cpulist(self.cpus),
            "housekeeping": format_cpulist(self.housekeeping),
            "isolated": format_cpulist(self.isolated),
            "irq_cpus": format_cpulist(self.irq_cpus),
        }


@dataclass(frozen=True)
class IrqPlan:
    """Where IRQs go, and what irqbalance is told."""

    affinity: bool  # move IRQs at all
    assignments: dict[str, str]  # IRQ number -> cpulist, in the boot the facts were read in (what the audit checks)
    default_smp_affinity: str | None  # hex mask for /proc/irq/default_smp_affinity; None: leave it
    irqbalance: str  # banned | restore | leave
    banned_cpulist: str  # every CPU but the IRQ CPUs, for IRQBALANCE_BANNED_CPULIST ("" unless banned)
    irqbalance_config: str | None  # irqbalance's environment file on this host (facts); None: none found
    # The rules apply and the boot-time unit follow (numbers change between boots): action name in
    # /proc/interrupts -> cpulist (NIC queues to their node's IRQ CPUs, the rest to the IRQ CPUs).
    by_name: dict[str, str] = field(default_factory=dict)
    unmatched: tuple[str, ...] = ()  # IRQ numbers no name finds again (the plan's reasons say why)
    # Who places IRQs: "hostkit" (the rules above, at apply and at boot), "irqbalance" (it runs and
    # is banned from every CPU that is not an IRQ CPU; hostkit pins none) or "none" (IRQs left alone).
    owner: str = "none"

    def to_dict(self) -> dict:
        return {
            "affinity": self.affinity,
            "assignments": dict(self.assignments),
            "by_name": dict(self.by_name),
            "unmatched": list(self.unmatched),
            "owner": self.owner,
            "default_smp_affinity": self.default_smp_affinity,
            "irqbalance": self.irqbalance,
            "banned_cpulist": self.banned_cpulist,
            "irqbalance_config": self.irqbalance_config,
        }


@dataclass(frozen=True)
class Plan:
    """One host's tuning plan. ``refused`` non-empty: nothing may be applied (exit 3)."""

    host: str | None
    profile: str
    isolation: bool
    nr_cpus: int  # possible CPUs: the width of the kernel's hex masks
    online: frozenset[int]
    housekeeping: frozenset[int]  # the rest of the online CPUs is isolated
    irq_cpus: frozenset[int]
    nic_irq_cpus: dict[str, str]  # NIC -> cpulist of the housekeeping CPUs on its node
    nodes: tuple[NodePartition, ...]
    cmdline_set: dict[str, str | None]  # kernel argument -> value (None: a bare flag)
    cmdline_remove: tuple[str, ...]
    sysctl: dict[str, int]  # keys of hostkit.tunables, the profile's non-null values
    governor: str | None  # None: not applicable or left alone
    governor_cpus: frozenset[int]
    irq: IrqPlan
    containerd: dict  # the profile's containerd section; "enabled" false where containerd is not installed
    # {"enabled"} and, when enabled, "installed" (false: a pre-seeded drop-in, no restart) and "config":
    # KubeletConfiguration fields; "enabled" false where kubelet is not installed and not pre-seeded
    kubelet: dict
    bios: dict  # {"enforce", "checks": [{"name", "expected", "actual", "ok", ...}]}
    smoke: dict
    warnings: tuple[str, ...]
    reasons: tuple[str, ...]  # one line of "why" per decision
    refused: tuple[str, ...]
    # {"mode": drive|neutralize|ignore, ...}: hostkit.plan.tuned (the tuned role's input)
    tuned: dict = field(default_factory=lambda: {"mode": "ignore"})
    # [{"key", "path", "value", "kind"[, "allowed_from"]}]: hostkit.tunables.SYSFS_VALUES, expanded for this host
    sysfs: tuple[dict, ...] = ()
    # {"cpu_dma_latency_us": int | None, "holder": "unit" | "tuned" | None}: the PM QoS latency ceiling
    pm_qos: dict = field(default_factory=lambda: {"cpu_dma_latency_us": None, "holder": None})
    # {"move": bool, "housekeeping": cpulist, "isolated": cpulist}: hostkit.tunables.KTHREADS (the kthreads role)
    kthreads: dict = field(default_factory=lambda: {"move": False, "housekeeping": "", "isolated": ""})
    # One line per part of the plan this host cannot take while the rest applies (a unified kernel
    # image's embedded command line: the kernel arguments); the host is not refused for it.
    refused_parts: tuple[str, ...] = ()

    @property
    def isolated(self) -> frozenset[int]:
        return self.online - self.housekeeping

    @property
    def cmdline(self) -> str:
        return " ".join(k if v is None else f"{k}={v}" for k, v in self.cmdline_set.items())

    @property
    def irq_mask(self) -> str | None:
        return format_mask(self.irq_cpus, self.nr_cpus) if self.irq_cpus else None

    def boot_changes(self, booted: dict[str, str | None]) -> list[str]:
        """The kernel arguments this plan sets or removes that the running kernel (``booted``: facts'
        ``kernel.cmdline_args.args``) was not booted with: each takes effect at the next boot only."""
        changes = [
            k if v is None else f"{k}={v}" for k, v in self.cmdline_set.items() if k not in booted or booted[k] != v
        ]
        return changes + [f"-{k}" for k in self.cmdline_remove if k in booted]

    @property
    def pools(self) -> dict[str, str]:
        """NUMA node -> its isolated CPUs (nodes with none left out): the inference pools."""
        return {str(n.id): format_cpulist(n.isolated) for n in self.nodes if n.isolated}

    def to_dict(self) -> dict:
        """The plan JSON document (the CLI contract and the roles' ``hostkit_plan``); a fresh copy."""
        return {
            "host": self.host,
            "profile": self.profile,
            "isolation": self.isolation,
            "online": format_cpulist(self.online),
            "housekeeping": format_cpulist(self.housekeeping),
            "isolated": format_cpulist(self.isolated),
            "irq_cpus": format_cpulist(self.irq_cpus),
            "irq_mask": self.irq_mask,
            "nic_irq_cpus": dict(self.nic_irq_cpus),
            "nodes": [n.to_dict() for n in self.nodes],
            "pools": self.pools,
            "cmdline": self.cmdline,
            "cmdline_set": dict(self.cmdline_set),
            "cmdline_remove": list(self.cmdline_remove),
            "sysctl": dict(self.sysctl),
            "governor": self.governor,
            "governor_cpus": format_cpulist(self.governor_cpus),
            "irq": self.irq.to_dict(),
            "containerd": copy.deepcopy(self.containerd),
            "kubelet": copy.deepcopy(self.kubelet),
            "bios": copy.deepcopy(self.bios),
            "smoke": copy.deepcopy(self.smoke),
            "tuned": copy.deepcopy(self.tuned),
            "sysfs": [dict(i) for i in self.sysfs],
            "pm_qos": dict(self.pm_qos),
            "kthreads": dict(self.kthreads),
            "warnings": list(self.warnings),
            "reasons": list(self.reasons),
            "refused": list(self.refused),
            "refused_parts": list(self.refused_parts),
        }
