"""Facts + profile -> a concrete, validated tuning plan. A pure function: no I/O.

The CPU partition (per NUMA node):

* housekeeping: the ``reserve_per_node`` lowest-numbered physical cores of every
  node (SMT siblings included), CPU 0's core always, plus ``irq_cores`` more on
  the node(s) of the NICs;
* isolated: every other online CPU; SMT siblings are never split;
* IRQ CPUs: the housekeeping CPUs local to each NIC (all housekeeping for a
  NIC without a node).

Guards put reasons in ``refused`` (exit 3); input that cannot be planned at all
raises :class:`BadInput` (exit 2).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from hostkit.core.cpulist import format_cpulist, format_mask, parse_cpulist, parse_mask
from hostkit.core.irq_affinity import name_rules
from hostkit.core.kernel_args import format_arg
from hostkit.core.kthreads import allowed_on
from hostkit.errors import BadInput
from hostkit.plan.model import IrqPlan, NodePartition, Notes, Plan
from hostkit.plan.tuned import plan_tuned
from hostkit.tunables import HUGEPAGE_KB, KERNEL_ARGS, KTHREADS, PM_QOS, SYSFS_VALUES, SysfsValue

ISOLATION_ARGS = ("isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity")
# Removed by a profile without isolation as well: left behind, it keeps every host process on the
# CPUs an earlier plan called housekeeping.
SYSTEMD_AFFINITY_ARG = "systemd.cpu_affinity"

# The shipped profile the guards advise for a guest that stays virtual: its hypervisor's own, else the
# hypervisor-neutral one (hostkit/profiles/; tests/unit/test_plan.py loads every profile a message names).
GUEST_PROFILE = "virtual-guest"
GUEST_PROFILES = {"vmware": "vmware-guest"}


def guest_profile(hypervisor: str | None) -> str:
    return GUEST_PROFILES.get(hypervisor or "", GUEST_PROFILE)


def make_plan(
    facts: dict, profile: dict, pinned: dict | None = None, *, force: bool = False, host: str | None = None
) -> dict:
    """The plan JSON document (:meth:`Plan.to_dict`) of :func:`build_plan`."""
    return build_plan(facts, profile, pinned, force=force, host=host).to_dict()


@dataclass(frozen=True)
class _Topology:
    """The facts the partition is computed from, as CPU sets."""

    online: frozenset[int]
    cores: list[frozenset[int]]  # SMT sibling groups
    nodes: list[tuple[int, frozenset[int]]]  # NUMA nodes that have CPUs
    nic_nodes: list[int]  # NUMA nodes with a NIC
    nr_cpus: int

    @classmethod
    def of(cls, facts: dict) -> _Topology:
        topo = facts["topology"]
        return cls(
            online=parse_cpulist(topo["online"]),
            cores=[parse_cpulist(c) for c in topo["cores"]],
            nodes=[(n["id"], parse_cpulist(n["cpus"])) for n in topo["numa_nodes"] if n["cpus"]],
            nic_nodes=sorted({n["numa_node"] for n in facts.get("nics", []) if n.get("numa_node", -1) >= 0}),
            nr_cpus=topo["cpus"],
        )


def build_plan(
    facts: dict, profile: dict, pinned: dict | None = None, *, force: bool = False, host: str | None = None
) -> Plan:
    """Facts + a validated profile (+ the inventory's pinned values) -> the host's :class:`Plan`.

    Each step below is a pure function of its arguments that writes its reasons, warnings and
    refusals into the plan's one :class:`Notes`, in the order the steps run. Raises :class:`BadInput` for input that cannot be planned at all.
    """
    pinned = pinned or {}
    notes = Notes()
    topo = _Topology.of(facts)
    isolation = bool(profile["isolation"])
    _boot_guard(isolation, profile, facts["kernel"], notes)
    _guards(isolation, facts["virtualization"], profile, force, notes)
    housekeeping = _partition(isolation, bool(notes.refused), profile, topo, pinned, notes)
    isolated = topo.online - housekeeping
    if isolation and not notes.refused:
        _partition_guards(isolated, housekeeping, topo.cores, topo.nodes, notes)
    nic_irq_cpus, irq_cpus = _irq_cpus(facts.get("nics", []), topo, housekeeping, pinned, isolation, notes)
    kubelet_static = _kubelet_static(profile)
    cmdline_reasons = len(notes.reasons)  # the reasons _cmdline gives are about kernel arguments alone
    cmdline_set, cmdline_remove = _cmdline(isolation, isolated, housekeeping, profile, facts, kubelet_static, notes)
    cmdline_set, cmdline_remove = _embedded_cmdline(
        facts["kernel"], cmdline_set, cmdline_remove, notes, cmdline_reasons
    )
    wanted = _partition_sysctls(isolation and bool(isolated), kubelet_static, profile, facts, notes)
    sysctl = _sysctls(wanted, facts["kernel"], notes)
    governor, governor_cpus = _governor(profile["governor"], facts["cpufreq"], topo.online, notes)
    _notes(isolation, facts, profile, sysctl, notes)
    sysfs = _sysfs_values(profile, facts, topo, housekeeping, isolation and bool(isolated) and not notes.refused, notes)
    latency = profile["cpu_power"][PM_QOS.key]
    tuned = plan_tuned(
        profile.get("tuned"),
        facts,
        notes,
        online=topo.online,
        isolated=frozenset(isolated),
        managed=set(cmdline_set) | set(cmdline_remove),
        sysctl=sysctl,
        governor=governor,
        force_latency=latency,
        thp=next((s["value"] for s in sysfs if s["key"] == "thp_enabled"), None),
    )
    pm_qos = _pm_qos(latency, facts.get("cpuidle") or {}, tuned["mode"], notes)
    kthreads = _kthreads(
        profile, facts, housekeeping, isolated, isolation and bool(isolated) and not notes.refused, notes
    )
    irq = _irq_plan(profile, facts, topo, isolation, irq_cpus, nic_irq_cpus, pinned, notes)
    containerd, kubelet = _container_stack(profile, facts, format_cpulist(housekeeping), topo.nodes, notes)
    return Plan(
        host=host,
        profile=profile["name"],
        isolation=isolation,
        nr_cpus=topo.nr_cpus,
        online=topo.online,
        housekeeping=frozenset(housekeeping),
        irq_cpus=frozenset(irq_cpus),
        nic_irq_cpus=nic_irq_cpus,
        nodes=tuple(
            NodePartition(nid, cpus, cpus & housekeeping, cpus & isolated, cpus & irq_cpus) for nid, cpus in topo.nodes
        ),
        cmdline_set=cmdline_set,
        cmdline_remove=tuple(cmdline_remove),
        sysctl=sysctl,
        governor=governor,
        governor_cpus=governor_cpus,
        irq=irq,
        containerd=containerd,
        kubelet=kubelet,
        bios=_bios(profile, facts["topology"], facts.get("memory") or {}),
        smoke=dict(profile["smoke"]),
        warnings=tuple(notes.warnings),
        reasons=tuple(notes.reasons),
        refused=tuple(notes.refused),
        tuned=tuned,
        sysfs=tuple(sysfs),
        pm_qos=pm_qos,
        kthreads=kthreads,
        refused_parts=tuple(notes.refused_parts),
    )


def _boot_guard(isolation: bool, profile: dict, kernel: dict, notes: Notes) -> None:
    """Why: kernel arguments with no boot configuration to hold them would silently never apply.
    Not overridden by --force: no guard stands between the plan and a boot loader that is not there."""
    loader = kernel.get("boot_loader")
    if not loader or loader["backend"] != "none":  # facts without the key (older agent): no guard
        return
    booted = kernel["cmdline_args"]["args"]
    if isolation or profile["cmdline_extra"] or any(a in booted for a in ISOLATION_ARGS):
        notes.refused.append(loader.get("reason") or "no supported boot configuration")


def _embedded_cmdline(
    kernel: dict, cmdline_set: dict, cmdline_remove: list, notes: Notes, since: int
) -> tuple[dict, list]:
    """Why: a unified kernel image carries its command line inside the (signed) image; hostkit cannot
    change it, so the kernel-argument part of the plan is refused in one line (the arguments the
    booted line lacks or still has) and the rest of the plan applies. The reasons given for those
    arguments (``notes.reasons[since:]``) then say that they are not set."""
    loader = kernel.get("boot_loader") or {}
    if loader.get("backend") != "uki":
        return cmdline_set, cmdline_remove
    booted = kernel["cmdline_args"]["args"]
    missing = [format_arg(k, v) for k, v in cmdline_set.items() if k not in booted or booted[k] != v]
    stale = [k for k in cmdline_remove if k in booted]
    if missing or stale:
        notes.refused_parts.append(
            f"kernel arguments refused: {loader.get('reason')}; not set: "
            f"{' '.join(missing) or '-'}"
            + (f"; not removed: {' '.join(stale)}" if stale else "")
            + "; the rest of the plan applies"
        )
        notes.reasons[since:] = [f"not set (kernel arguments refused): {r}" for r in notes.reasons[since:]]
    return {}, []


def _guards(isolation: bool, virt: dict, profile: dict, force: bool, notes: Notes) -> None:
    """Why: isolation on a guest cannot stop hypervisor stalls, and a deceptive topology makes it a lie."""
    if not isolation or force:
        return
    advice = f"(use the {guest_profile(virt['hypervisor'])} profile, or --force)"
    if virt["deceptive_topology"]:
        notes.refused.append(
            "isolation asked on a host with deceptive topology: " + "; ".join(virt["reasons"]) + f" {advice}"
        )
    elif virt["virtual"] and not profile["allow_virtual"]:
        notes.refused.append(
            f"isolation asked on a virtual machine ({virt['hypervisor']}): vCPUs are not physical "
            f"cores, isolation cannot stop hypervisor stalls {advice}"
        )


def _partition(isolation: bool, refused: bool, profile: dict, topo: _Topology, pinned: dict, notes: Notes) -> set[int]:
    """Why: inference runs on the isolated CPUs; the housekeeping ones keep the kernel, kubelet and IRQs."""
    if not isolation:
        notes.reasons.append(f"profile {profile['name']}: no CPU isolation; every online CPU stays housekeeping")
        return set(topo.online)
    if refused:
        return set(topo.online)
    if "isolated" in pinned or "housekeeping" in pinned:
        return _pinned_partition(pinned, topo.online, notes.reasons)
    return _reserve(profile, topo.cores, topo.nodes, topo.nic_nodes, notes.reasons)


def _irq_cpus(
    nics: list[dict], topo: _Topology, housekeeping: set[int], pinned: dict, isolation: bool, notes: Notes
) -> tuple[dict[str, str], set[int]]:
    """Why: an IRQ served on an isolated CPU interrupts inference; a NIC's IRQs stay on its own node."""
    refused, reasons = notes.refused, notes.reasons
    nic_irq_cpus = {}
    for nic in nics:
        node_cpus = dict(topo.nodes).get(nic.get("numa_node", -1))
        local = (housekeeping & node_cpus) if node_cpus else set()
        nic_irq_cpus[nic["name"]] = format_cpulist(local or housekeeping)
    if "irq_cpus" in pinned:
        irq_cpus = set(parse_cpulist(pinned["irq_cpus"]))
        if not irq_cpus <= housekeeping:
            refused.append(
                f"irq_cpus {pinned['irq_cpus']} include isolated CPUs {format_cpulist(irq_cpus - housekeeping)}"
            )
        reasons.append(f"IRQ CPUs pinned by the inventory: {pinned['irq_cpus']}")
    else:
        irq_cpus = set(housekeeping)
        if nic_irq_cpus and isolation:
            reasons.append(
                "NIC IRQs on housekeeping CPUs of the NIC's node: "
                + ", ".join(f"{n} -> {c}" for n, c in nic_irq_cpus.items())
            )
    return nic_irq_cpus, irq_cpus


def _kubelet_static(profile: dict) -> bool:
    """Kubelet's static CPU manager hands isolated CPUs to pods (several exclusive CPUs per pod)."""
    k = profile["kubelet"]
    return bool(k["enabled"]) and k["cpu_manager_policy"] == "static"


def _cmdline(
    isolation: bool,
    isolated: AbstractSet[int],
    housekeeping: set[int],
    profile: dict,
    facts: dict,
    kubelet_static: bool,
    notes: Notes,
) -> tuple[dict[str, str | None], list[str]]:
    """Why: isolcpus keeps the scheduler off, nohz_full the tick, rcu_nocbs RCU callbacks, irqaffinity IRQs."""
    reasons = notes.reasons
    iso_text, hk_text = format_cpulist(isolated), format_cpulist(housekeeping)
    cmdline_set: dict[str, str | None] = {}
    if isolation and isolated:
        flags = list(profile["isolcpus_flags"])
        if kubelet_static:
            # No flag word at all means domain to the kernel: keep at least managed_irq.
            flags = [f for f in flags if f != "domain"] or ["managed_irq"]
            reasons.append(
                "isolcpus without domain: kubelet's static CPU manager gives a pod several exclusive "
                "CPUs and the scheduler must balance the pod's threads across them (domain takes the "
                "isolated CPUs out of load balancing)"
            )
        elif "domain" in flags or not flags:
            reasons.append(
                "isolcpus with domain: a static partition without kubelet's CPU manager; each "
                "inference thread is pinned to its own CPU, so no load balancing is wanted there"
            )
        flag_text = ",".join(flags)
        cmdline_set = {
            "isolcpus": f"{flag_text},{iso_text}" if flag_text else iso_text,
            "nohz_full": iso_text,
            "rcu_nocbs": iso_text,
            "irqaffinity": hk_text,
        }
        reasons.append(f"kernel: isolcpus/nohz_full/rcu_nocbs={iso_text}, irqaffinity={hk_text}")
        if kubelet_static:
            cmdline_set[SYSTEMD_AFFINITY_ARG] = hk_text
            reasons.append(
                f"{SYSTEMD_AFFINITY_ARG}={hk_text}: without domain nothing else keeps host processes "
                "off the isolated CPUs; systemd starts every service there, and kubelet's CPU manager "
                "moves each pod onto its own CPUs through its cpuset"
            )
        cmdline_set.update(_kernel_noise(profile, facts, notes))
    for arg in profile["cmdline_extra"]:
        key, _, value = arg.partition("=")
        cmdline_set[key] = value if _ else None
    if isolation:
        return cmdline_set, []
    booted = facts["kernel"]["cmdline_args"]["args"]
    removed = ISOLATION_ARGS + (SYSTEMD_AFFINITY_ARG,)
    present = [a for a in removed if booted.get(a) is not None or a in booted]
    if present:
        reasons.append(f"kernel: remove {', '.join(present)} left by an earlier tuning")
    return cmdline_set, list(removed)


def _kernel_noise(profile: dict, facts: dict, notes: Notes) -> dict[str, str | None]:
    """Why: the periodic work a kernel does on every CPU (ticks in step, lockup detectors, the TSC watchdog)
    lands on the isolated CPUs too, and a deep C-state's exit is the wake-up latency of an idle inference CPU;
    each argument of hostkit.tunables.KERNEL_ARGS the profile switches on (kernel_noise:, cpu_power:)."""
    args: dict[str, str | None] = {}
    reasons = notes.reasons
    checked = (facts.get("cpu_flags") or {}).get("checked") or {}
    for k in KERNEL_ARGS:
        value = profile[k.section].get(k.name)
        if value is None or value is False:
            continue
        text = str(value) if (k.choices or k.int_range) else k.value
        shown = k.arg if text is None else f"{k.arg}={text}"
        missing = [f for f in k.cpu_flags if not checked.get(f)]
        if missing:
            reasons.append(
                f"{shown} left out: /proc/cpuinfo lacks {', '.join(missing)} (the TSC may stop or "
                "drift, so the clocksource watchdog must keep checking it)"
            )
            continue
        args[k.arg] = text
        reasons.append(f"{shown}: {k.doc.split(': ', 1)[-1]}")
    return args


def _sysfs_values(
    profile: dict, facts: dict, topo: _Topology, housekeeping: set[int], isolating: bool, notes: Notes
) -> list[dict]:
    """Why: the runtime /sys values of hostkit.tunables.SYSFS_VALUES the profile sets, each written only where
    the host has the file and the kernel offers the value: unbound workqueue and writeback workers on the
    housekeeping CPUs, the energy-performance preference, transparent hugepages, KSM, hugepages per node."""
    items: list[dict] = []
    reasons: list[str] = notes.reasons
    refused: list[str] = []  # added to notes.refused after the step (the later steps' isolating reads them)
    present = facts.get("sysfs") or {}
    for v in SYSFS_VALUES:
        wanted = profile[v.section].get(v.key)
        if wanted is None or wanted is False:
            continue
        found = (present.get(v.key) or {}).get("values") or {}
        if not found:
            reasons.append(
                f"{v.key} left out: this host has no {v.path.replace('{cpu}', 'N').replace('{node}', 'N')}"
                + _why_absent(v, facts)
            )
            continue
        if v.partition:
            target = housekeeping if isolating else topo.online
            value = format_mask(target, topo.nr_cpus)
            if not isolating and all(parse_mask(t) >= topo.online for t in found.values()):
                continue  # nothing isolated and no earlier tuning narrowed it: the kernel's mask stands
            why = (
                f"{v.key}={value} (CPUs {format_cpulist(target)}): {v.doc}"
                if isolating
                else f"{v.key}={value}: every online CPU again (an earlier tuning narrowed it; nothing is isolated)"
            )
        else:
            value = str(wanted)
            offered = _offered(v, present.get(v.key) or {}, found)
            if offered is not None and value not in offered:
                reasons.append(f"{v.key}={value} left out: the kernel offers {', '.join(offered) or 'nothing'}")
                continue
            why = f"{v.key}={value}: {v.doc.split('; null')[0]}"
            if v.key == "hugepages_2m_per_node":
                too_big = _hugepages_too_big(wanted, facts["topology"]["numa_nodes"])
                if too_big:
                    refused += too_big
                    continue
                why += f" ({wanted * HUGEPAGE_KB // 1024} MiB per node)"
        for path in found:
            item = {"key": v.key, "path": path, "value": value, "kind": v.kind}
            if v.offered_path(path):
                item["allowed_from"] = v.offered_path(path)
            items.append(item)
        reasons.append(why)
    notes.refused += refused
    return items


def _why_absent(v: SysfsValue, facts: dict) -> str:
    if v.key == "energy_performance_preference":
        drivers = ", ".join((facts.get("cpufreq") or {}).get("drivers") or {}) or "none"
        return f" (cpufreq driver: {drivers}; intel_pstate and amd-pstate in active mode offer a preference)"
    return ""


def _offered(v: SysfsValue, fact: dict, found: dict[str, str]) -> list[str] | None:
    """The values the kernel accepts: a choice file lists them itself (its current one in brackets)."""
    if v.kind == "choice":
        return sorted({w.strip("[]") for text in found.values() for w in text.split()})
    return fact.get("offered")


def _hugepages_too_big(pages: int, nodes: list[dict]) -> list[str]:
    """Why: hugepages are taken from the node's memory for good; the kernel, page cache and every other
    process of the node keep at least 1 GiB and an eighth of it."""
    out = []
    want_kb = pages * HUGEPAGE_KB
    for n in nodes:
        mem = n.get("memory_kb")
        if not mem:
            continue
        limit = mem - max(1 << 20, mem // 8)
        if want_kb > limit:
            out.append(
                f"hugepages_2m_per_node={pages} needs {want_kb // 1024} MiB on NUMA node {n['id']}, which has "
                f"{mem // 1024} MiB: at most {max(0, limit) // 1024} MiB ({max(0, limit) // HUGEPAGE_KB} pages) "
                "may be hugepages (1 GiB and an eighth stay for the kernel and the node's other processes)"
            )
    return out


def _pm_qos(latency: int | None, cpuidle: dict, tuned_mode: str, notes: Notes) -> dict:
    """Why: an idle CPU in a deep C-state wakes up late, and that exit latency adds to the next inference;
    the ceiling is held by one owner: tuned (force_latency) where hostkit drives it, else hostkit's unit."""
    if latency is None:
        return {PM_QOS.key: None, "holder": None}
    holder = "tuned" if tuned_mode == "drive" else "unit"
    states = cpuidle.get("states") or []
    skipped = [
        f"{s['name']} ({s['latency_us']} us)"
        for s in states
        if s.get("latency_us") is not None and s["latency_us"] > latency
    ]
    kept = [s["name"] for s in states if s.get("latency_us") is not None and s["latency_us"] <= latency]
    seen = (
        f"; cpuidle {cpuidle.get('driver')}: skips {', '.join(skipped) or 'none'}, keeps {', '.join(kept) or 'none'}"
        if states
        else "; no cpuidle states in the facts"
    )
    by = (
        "tuned's force_latency in hostkit's tuned profile (tuned holds /dev/cpu_dma_latency)"
        if holder == "tuned"
        else f"hostkit-pm-qos.service holding {PM_QOS.path} open from boot"
    )
    notes.reasons.append(f"{PM_QOS.key}={latency}: every CPU wakes within {latency} us, by {by}{seen}")
    return {PM_QOS.key: latency, "holder": holder}


def _kthreads(
    profile: dict, facts: dict, housekeeping: set[int], isolated: AbstractSet[int], isolating: bool, notes: Notes
) -> dict:
    """Why: a kernel thread allowed on an isolated CPU may be scheduled there and preempt inference;
    nohz_full= keeps the threads kthreadd creates on housekeeping CPUs from boot, but per-node threads
    (kswapd<N>, kcompactd<N>) set their node's CPUs themselves (Debian 12's 6.1), and nothing moves
    the threads of a running kernel before the reboot."""
    wanted = isolating and profile[KTHREADS.section][KTHREADS.key]
    out = {
        "move": bool(wanted),
        "housekeeping": format_cpulist(housekeeping) if wanted else "",
        "isolated": format_cpulist(isolated) if wanted else "",
    }
    if not isolating:
        return out
    if not wanted:
        notes.reasons.append(f"kernel threads left where they are ({KTHREADS.section}.{KTHREADS.key}: false)")
        return out
    seen = facts.get("kthreads") or {}
    if seen.get("available"):
        on = [t["comm"] for t in allowed_on(seen["movable"], isolated)]
        now = f"; {len(on)} allowed on isolated CPUs now" + (
            f" ({', '.join(on[:4])}{', ...' if len(on) > 4 else ''})" if on else ""
        )
    else:
        now = "; " + (seen.get("reason") or "no kernel threads in the facts")
    notes.reasons.append(
        f"kernel threads: kthreadd and every kernel thread that may move go to the housekeeping "
        f"CPUs {out['housekeeping']} (a per-node thread such as kswapd<N> to its node's), now and "
        f"at every boot (hostkit-kthreads.service): nohz_full= covers what kthreadd creates, not "
        f"kswapd/kcompactd, which take their node's CPUs themselves{now}"
    )
    return out


def _partition_sysctls(isolating: bool, kubelet_static: bool, profile: dict, facts: dict, notes: Notes) -> dict:
    """Why: timer migration and the RT budget follow from who owns the isolated CPUs (kubelet or the
    operator's static partition) and from what guards a starved kernel thread (stalld or throttling)."""
    wanted = dict(profile["sysctl"])
    reasons = notes.reasons
    if not isolating:
        return wanted
    if kubelet_static:
        wanted["kernel.timer_migration"] = 1
        reasons.append(
            "timer_migration=1: CPUs kubelet hands to pods were housekeeping or another pod's before; "
            "timers armed there must be able to move off them"
        )
    elif wanted.get("kernel.timer_migration") == 0:
        reasons.append(
            "timer_migration=0: static partition; a timer stays on the CPU that armed it instead of "
            "being pulled onto a busy isolated CPU"
        )
    stalld = (facts.get("services") or {}).get("stalld") or {}
    if profile["stalld"] == "use":
        if stalld.get("running"):
            wanted["kernel.sched_rt_runtime_us"] = -1
            reasons.append(
                "sched_rt_runtime_us=-1: inference CPUs are isolated and dedicated, and stalld runs to "
                "boost any kernel thread a FIFO worker starves there; measured on a 2-CPU VM (docs/dev/measurements.md, "
                "The RT budget): deschedule p999/max 0.80/3.8 ms at -1 against 1.53/9.1 ms at 950000"
            )
        else:
            state = (
                "installed but not running (systemctl enable --now stalld)"
                if stalld.get("installed")
                else "not installed"
            )
            reasons.append(
                f"sched_rt_runtime_us stays {wanted.get('kernel.sched_rt_runtime_us')}: stalld is {state}, "
                "so RT throttling is what keeps a starved kernel thread running on an isolated CPU; a "
                "worker that stays in SCHED_FIFO beyond the budget is parked for the rest of the period "
                "(hostkit smoke's default worker, --fifo budget, leaves SCHED_FIFO before that: do the "
                "same, or run the worker SCHED_OTHER on its isolated CPU, where nothing competes)"
            )
    return wanted


def _sysctls(wanted: dict, kernel: dict, notes: Notes) -> dict[str, int]:
    """Why: the profile's sysctls (hostkit.tunables), checked against what the RT budget may be."""
    warnings, reasons = notes.warnings, notes.reasons
    sysctl = {k: v for k, v in wanted.items() if v is not None}
    rt = sysctl.get("kernel.sched_rt_runtime_us")
    period = kernel.get("sched_rt_period_us") or 1000000
    if rt is not None:
        if rt != -1 and rt > period:
            raise BadInput(f"kernel.sched_rt_runtime_us={rt} exceeds sched_rt_period_us={period}")
        if rt != -1 and rt < 0.9 * period:
            warnings.append(
                f"kernel.sched_rt_runtime_us={rt} lets RT throttling park a SCHED_FIFO thread for "
                f"{(period - rt) / 1000:g} ms of every {period / 1000:g} ms"
            )
        reasons.append(
            f"sysctl kernel.sched_rt_runtime_us={rt}: RT throttling at most "
            f"{max(0, period - rt) / 1000 if rt != -1 else 0:g} ms per period"
        )
    current_rt = kernel.get("sched_rt_runtime_us")
    if (
        current_rt is not None
        and current_rt != -1
        and current_rt < 0.9 * period
        and rt is not None
        and rt != current_rt
    ):
        reasons.append(
            f"sched_rt_runtime_us {current_rt} -> {rt}: the current value parks FIFO threads "
            f"{(period - current_rt) / 1000:g} ms per period"
        )
    return sysctl


def _governor(
    governor: str | None, cpufreq: dict, online: frozenset[int], notes: Notes
) -> tuple[str | None, frozenset[int]]:
    """Why: a frequency ramp on wake-up is latency; the governor must be one the host offers."""
    if not governor:
        return None, frozenset()
    if not cpufreq["available"]:
        notes.reasons.append("governor: not applicable (no cpufreq on this host)")
        return None, frozenset()
    offered = cpufreq.get("available_governors") or []
    if offered and governor not in offered:
        raise BadInput(f"governor {governor!r} is not offered by this host (available: {', '.join(offered)})")
    governed: set[int] = set()
    for cpus in cpufreq["governors"].values():
        governed |= parse_cpulist(cpus)
    notes.reasons.append(f"governor {governor} on every CPU")
    return governor, frozenset(governed & online)


# A VMware guest with no steal time on any CPU since boot: the hypervisor keeps no steal clock for it.
NO_STEAL_CLOCK = (
    'VMware guest with no steal time on any CPU since boot: without stealclock.enable = "TRUE" in '
    "the VM's .vmx it has no steal clock and reads 0 whatever the hypervisor takes, so steal-based "
    "diagnosis is blind here (hostkit gaps measures the vCPU stops directly)"
)


def _notes(isolation: bool, facts: dict, profile: dict, sysctl: dict, notes: Notes) -> None:
    """Why: what the operator should know about decisions made elsewhere (kubelet, NUMA, the hypervisor)."""
    reasons, warnings = notes.reasons, notes.warnings
    if isolation and facts["topology"]["threads_per_core"] > 1 and profile["kubelet"]["full_pcpus_only"]:
        reasons.append("SMT on: kubelet full-pcpus-only keeps pods on whole cores")
    if facts["kernel"].get("numa_balancing") and sysctl.get("kernel.numa_balancing") == 0:
        reasons.append("numa_balancing 1 -> 0: no page migration under pinned inference")
    steal = (facts.get("steal") or {}).get("total") or {}
    if facts["virtualization"]["virtual"] and steal.get("percent", 0) > 1:
        warnings.append(f"steal time {steal['percent']:.1f}% since boot: the hypervisor takes CPU from this guest")
    if facts["virtualization"]["hypervisor"] == "vmware" and facts["virtualization"].get("steal_reported") is False:
        warnings.append(NO_STEAL_CLOCK)


def _irq_plan(
    profile: dict,
    facts: dict,
    topo: _Topology,
    isolation: bool,
    irq_cpus: set[int],
    nic_irq_cpus: dict[str, str],
    pinned: dict,
    notes: Notes,
) -> IrqPlan:
    """Why: IRQs have one owner. Where irqbalance runs it places them, banned from every CPU that is
    not an IRQ CPU; elsewhere hostkit pins every movable IRQ (NIC queues to their node's IRQ CPUs)."""
    # Without isolation IRQs may still be steered (e.g. a guest keeping CPU 0 for IRQs through a
    # pinned irq_cpus); with nothing pinned they simply stay on every CPU.
    affinity = bool(profile["irq_affinity"]) and (isolation or "irq_cpus" in pinned)
    irqbalance = profile["irqbalance"] if isolation or affinity or profile["irqbalance"] != "banned" else "leave"
    service = (facts.get("services") or {}).get("irqbalance") or {}
    owner = _irq_owner(irqbalance, service, affinity, isolation, irq_cpus, notes)
    why, warned = notes.reasons, notes.warnings
    if service.get("banned_cpus") and irqbalance == "banned":
        why.append(
            f"irqbalance: IRQBALANCE_BANNED_CPUS={service['banned_cpus']} in {service['config']} wins over "
            "IRQBALANCE_BANNED_CPULIST (irqbalance reads the old name first): the apply removes it and "
            "writes the ban as IRQBALANCE_BANNED_CPULIST (journaled: rollback puts it back)"
        )
    elif service.get("banned_cpus"):
        warned.append(
            f"irqbalance: IRQBALANCE_BANNED_CPUS={service['banned_cpus']} in {service['config']} bans "
            f"CPUs from irqbalance, whatever IRQBALANCE_BANNED_CPULIST says (irqbalance: {irqbalance} "
            "leaves it)"
        )
    wanted, names = {}, {}
    if affinity and owner == "hostkit":
        nic_of = {irq: nic["name"] for nic in facts.get("nics", []) for irq in nic["irqs"]}
        for irq in facts.get("irqs", []):
            if irq.get("smp_affinity_list") is None:
                continue
            nic = nic_of.get(irq["irq"])
            wanted[str(irq["irq"])] = (
                nic_irq_cpus[nic] if nic and "irq_cpus" not in pinned else format_cpulist(irq_cpus)
            )
            names[str(irq["irq"])] = irq.get("name") or ""
    # IRQ numbers change between boots: apply and the boot-time unit find each IRQ by its action name.
    by_name, unmatched = name_rules(wanted, names)
    irqs_of: dict[str, list[str]] = {}
    for irq in sorted(unmatched, key=int):
        irqs_of.setdefault(unmatched[irq], []).append(irq)
    why += [
        f"IRQ(s) {', '.join(irqs)} cannot be found by name after a reboot ({reason}): hostkit leaves them to "
        "the kernel's irqaffinity= and default_smp_affinity"
        for reason, irqs in irqs_of.items()
    ]
    if by_name:
        why.append(
            f"{len(by_name)} IRQ rule(s) by action name: apply and the boot-time unit find the IRQs by name "
            "in /proc/interrupts, never by a number from another boot"
        )
    return IrqPlan(
        affinity=affinity,
        assignments={k: v for k, v in wanted.items() if k not in unmatched},
        by_name=by_name,
        unmatched=tuple(sorted(unmatched, key=int)),
        owner=owner,
        default_smp_affinity=format_mask(irq_cpus, topo.nr_cpus) if affinity and irq_cpus else None,
        irqbalance=irqbalance,
        banned_cpulist=format_cpulist(set(topo.online) - irq_cpus) if irqbalance == "banned" else "",
        irqbalance_config=service.get("config"),
    )


def _irq_owner(
    irqbalance: str, service: dict, affinity: bool, isolation: bool, irq_cpus: set[int], notes: Notes
) -> str:
    """Why: one owner places IRQs, irqbalance (running, banned from every CPU but the IRQ CPUs) or
    hostkit (pins); the other never undoes its placement."""
    # A running irqbalance rewrites the affinity of every IRQ it balances at its next pass (10 s):
    # pins of hostkit's beside it would be undone, so it alone places them, told where not to (in
    # the environment file the facts found: without one there is nowhere to ban it, and hostkit pins).
    # With one IRQ CPU there is nothing to balance: a 2-vCPU lab guest kept virtio-net's queues on
    # 0-1 with CPU 1 banned, and its irqbalance was found stopped after the next boot. hostkit pins
    # them to that CPU (the only one irqbalance may use, so the two cannot disagree) and its boot
    # unit pins them again at every boot.
    banned_running = irqbalance == "banned" and service.get("running") and service.get("config")
    owner = "irqbalance" if banned_running and len(irq_cpus) >= 2 else "hostkit" if affinity else "none"
    why, warned = notes.reasons, notes.warnings
    if banned_running and owner == "hostkit":
        why.append(
            f"irqbalance runs, banned in {service['config']} from every CPU but the one IRQ CPU "
            f"{format_cpulist(irq_cpus)}: it has nothing to balance and does not move IRQs there, so hostkit "
            "pins them there, now and at every boot (the only CPU irqbalance may use: no conflict)"
        )
    elif owner == "irqbalance":
        why.append(
            f"irqbalance runs: it keeps placing IRQs, banned in {service['config']} from every CPU but "
            f"the IRQ CPUs {format_cpulist(irq_cpus)}; hostkit pins no IRQ itself, so nothing undoes the "
            "other's placement"
            + ("; irqaffinity= covers the IRQs set up at boot before it starts" if isolation else "")
        )
    elif owner == "hostkit" and service.get("running"):
        warned.append(
            "irqbalance runs "
            + (
                "with no environment file found to ban it in"
                if irqbalance == "banned"
                else f"and the profile leaves it unbanned (irqbalance: {irqbalance})"
            )
            + ": it will move hostkit's IRQ pins at its next pass; stop it, or give it "
            "/etc/default/irqbalance (or /etc/sysconfig/irqbalance) with irqbalance: banned"
        )
    return owner


def _reserve(profile, cores, nodes, nic_nodes, reasons) -> set[int]:
    """Why: every node needs its own housekeeping cores (kubelet, IRQs, kernel threads stay node-local)."""
    per_node = profile["reserve_per_node"]
    extra = profile["irq_cores"]
    housekeeping: set[int] = set()
    for nid, cpus in nodes:
        node_cores = sorted((c for c in cores if c <= cpus), key=min)
        want = per_node + (extra if nid in nic_nodes else 0)
        if want >= len(node_cores):
            raise BadInput(
                f"reserve_per_node={per_node}"
                + (f" + irq_cores={extra}" if nid in nic_nodes else "")
                + f" leaves no isolated core on NUMA node {nid} (it has {len(node_cores)} cores)"
            )
        for core in node_cores[:want]:
            housekeeping |= core
        reasons.append(
            f"node {nid}: {want} housekeeping core(s) "
            + (f"({per_node} reserved + {extra} for NIC IRQs) " if nid in nic_nodes and extra else "")
            + f"-> CPUs {format_cpulist(cpus & housekeeping)}"
        )
    zero_core = next((c for c in cores if 0 in c), frozenset({0}))
    if not zero_core <= housekeeping:
        housekeeping |= zero_core
        reasons.append("CPU 0 stays housekeeping (boot CPU: timers, unmovable kernel work)")
    return housekeeping


def _pinned_partition(pinned, online, reasons) -> set[int]:
    """Why: an operator who pins the partition knows the workload; it must still partition the online CPUs."""
    iso = set(parse_cpulist(pinned["isolated"])) if "isolated" in pinned else None
    hk = set(parse_cpulist(pinned["housekeeping"])) if "housekeeping" in pinned else None
    for name, cpus in (("isolated", iso), ("housekeeping", hk)):
        if cpus is not None and not cpus <= online:
            raise BadInput(
                f"hostkit_overrides.{name}: CPU(s) {format_cpulist(cpus - online)} are not online "
                f"(online: {format_cpulist(online)})"
            )
    if iso is not None and hk is not None:
        if iso & hk or (iso | hk) != online:
            raise BadInput(
                f"hostkit_overrides: isolated {pinned['isolated']} and housekeeping "
                f"{pinned['housekeeping']} must partition the online CPUs {format_cpulist(online)}"
            )
    housekeeping = hk if hk is not None else set(online) - (iso or set())
    reasons.append(f"partition pinned by the inventory: housekeeping {format_cpulist(housekeeping)}")
    return housekeeping


def _partition_guards(isolated, housekeeping, cores, nodes, notes: Notes) -> None:
    """Why: a partition that isolates CPU 0, starves a node or splits SMT siblings hurts more than it helps."""
    refused = notes.refused
    if not isolated:
        refused.append("nothing would be isolated: the plan would change the boot config for no benefit")
    if 0 in isolated:
        refused.append("CPU 0 would be isolated: the boot CPU must stay housekeeping")
    for nid, cpus in nodes:
        if not cpus & housekeeping:
            refused.append(f"NUMA node {nid} would have no housekeeping CPU (kubelet, IRQs, kernel threads need one)")
    for core in cores:
        if core & isolated and core & housekeeping:
            refused.append(f"SMT siblings {format_cpulist(core)} would be split between housekeeping and isolated")


def _bios(profile, topo, memory) -> dict:
    """Why: NPS/SNC, SMT and memory channels are set in the BIOS only: checked, never changed."""
    b = profile["bios"]
    checks = []
    if b["numa_per_socket"] is not None:
        checks.append(
            {
                "name": "numa_per_socket",
                "expected": b["numa_per_socket"],
                "actual": topo["numa_per_socket"],
                "mode": topo["numa_mode"],
            }
        )
    if b["smt"] is not None:
        checks.append({"name": "smt", "expected": b["smt"], "actual": topo["smt"]["active"]})
    channels = memory.get("channels")  # socket -> {"total", "populated"} from the SMBIOS memory devices
    populated = min(len(c["populated"]) for c in channels.values()) if channels else None
    if b["min_memory_channels_per_socket"] is not None or b["all_memory_channels"]:
        want = b["min_memory_channels_per_socket"] or 0
        if b["all_memory_channels"] and channels:
            want = max(want, max(c["total"] for c in channels.values()))
        checks.append(
            {
                "name": "memory_channels_per_socket",
                "expected": want or "all",
                "actual": populated,
                "per_socket": {s: f"{len(c['populated'])}/{c['total']}" for s, c in channels.items()}
                if channels
                else None,
                "source": memory.get("source"),
            }
        )
    if b["min_memory_speed_mts"] is not None:
        checks.append(
            {
                "name": "memory_speed_mts",
                "expected": b["min_memory_speed_mts"],
                "actual": memory.get("speed_mts"),
                "source": memory.get("source"),
            }
        )
    for c in checks:
        at_least = c["name"] in ("memory_channels_per_socket", "memory_speed_mts")
        c["ok"] = (
            None
            if c["actual"] is None
            else (c["actual"] >= c["expected"] if at_least else c["actual"] == c["expected"])
        )
    return {"enforce": b["enforce"], "checks": checks}


def _container_stack(profile, facts, hk_text, nodes, notes: Notes) -> tuple[dict, dict]:
    """Why: containerd and kubelet are configured only where they are installed. A node is often tuned
    before Kubernetes is installed (the provisioning order): there is no containerd to render and
    validate a config with, and no kubelet unit to restart. The CPU partition is still planned for the
    profile's kubelet (the plan follows the profile, not what runs yet); ``kubelet.preseed`` writes the
    drop-in for the kubelet installed later. Facts without the services (an older agent): installed."""
    services = facts.get("services") or {}
    reasons = notes.reasons
    containerd = dict(profile["containerd"])
    if containerd["enabled"] and (services.get("containerd") or {}).get("installed") is False:
        containerd.update(enabled=False, installed=False)
        reasons.append(
            "containerd: not installed: no config written (it is rendered from and validated by the "
            "installed containerd)"
        )
    kubelet = _kubelet(profile, hk_text, nodes)
    installed = (services.get("kubelet") or {}).get("installed")
    if kubelet["enabled"]:
        kubelet["installed"] = installed is not False
        if installed is False and not profile["kubelet"]["preseed"]:
            kubelet = {"enabled": False, "installed": False}
            reasons.append(
                "kubelet: not installed: no drop-in written, no restart (kubelet.preseed: true writes "
                "the drop-in for a kubelet installed later)"
            )
        elif installed is False:
            reasons.append(
                "kubelet: not installed: the drop-in is written for the kubelet installed later "
                "(kubelet.preseed), no restart"
            )
    return containerd, kubelet


def _kubelet(profile, hk_text, nodes) -> dict:
    """Why: kubelet must hand pods whole cores of one node and keep its own work on the housekeeping CPUs."""
    k = profile["kubelet"]
    out = {"enabled": k["enabled"]}
    if not k["enabled"]:
        return out
    cfg = {
        "cpuManagerPolicy": k["cpu_manager_policy"],
        "topologyManagerPolicy": k["topology_manager_policy"],
        "topologyManagerScope": k["topology_manager_scope"],
        "memoryManagerPolicy": k["memory_manager_policy"],
    }
    if k["cpu_manager_policy"] == "static":
        if k["full_pcpus_only"]:
            cfg["cpuManagerPolicyOptions"] = {"full-pcpus-only": "true"}
        cfg["reservedSystemCPUs"] = hk_text
    if k["memory_manager_policy"] == "Static":
        mib = k["reserved_memory_mib_per_node"]
        cfg["reservedMemory"] = [{"numaNode": nid, "limits": {"memory": f"{mib}Mi"}} for nid, _ in nodes]
        # kubelet requires the sum of reservedMemory to equal kube+system reserved + eviction threshold.
        cfg["systemReserved"] = {"memory": f"{mib * len(nodes) - 100}Mi"}
        cfg["evictionHard"] = {"memory.available": "100Mi"}
    out["config"] = cfg
    return out
