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

from hostkit.agent.cpulist import format_cpulist, format_mask, parse_cpulist
from hostkit.errors import BadInput

ISOLATION_ARGS = ("isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity")


def make_plan(facts: dict, profile: dict, pinned: dict | None = None, *, force: bool = False,
              host: str | None = None) -> dict:
    pinned = pinned or {}
    topo, virt = facts["topology"], facts["virtualization"]
    online = parse_cpulist(topo["online"])
    cores = [parse_cpulist(c) for c in topo["cores"]]
    nodes = [(n["id"], parse_cpulist(n["cpus"])) for n in topo["numa_nodes"] if n["cpus"]]
    reasons: list[str] = []
    warnings: list[str] = []
    refused: list[str] = []

    isolation = bool(profile["isolation"])
    if isolation:
        if virt["deceptive_topology"] and not force:
            refused.append("isolation asked on a host with deceptive topology: "
                           + "; ".join(virt["reasons"]) + " (use a virtual-guest profile, or --force)")
        elif virt["virtual"] and not profile["allow_virtual"] and not force:
            refused.append(f"isolation asked on a virtual machine ({virt['hypervisor']}): vCPUs are not "
                           "physical cores, isolation cannot stop hypervisor stalls (use vmware-guest, or --force)")

    nic_nodes = sorted({n["numa_node"] for n in facts.get("nics", []) if n.get("numa_node", -1) >= 0})
    housekeeping: set[int]
    if not isolation:
        housekeeping = set(online)
        reasons.append(f"profile {profile['name']}: no CPU isolation; every online CPU stays housekeeping")
    elif refused:
        housekeeping = set(online)
    elif "isolated" in pinned or "housekeeping" in pinned:
        housekeeping = _pinned_partition(pinned, online, reasons)
    else:
        housekeeping = _reserve(profile, cores, nodes, nic_nodes, reasons)
    isolated = set(online) - housekeeping

    if isolation and not refused:
        refused += _partition_guards(isolated, housekeeping, cores, nodes)

    # IRQ CPUs: housekeeping local to each NIC.
    nic_irq_cpus = {}
    for nic in facts.get("nics", []):
        node_cpus = dict(nodes).get(nic.get("numa_node", -1))
        local = (housekeeping & node_cpus) if node_cpus else set()
        nic_irq_cpus[nic["name"]] = format_cpulist(local or housekeeping)
    if "irq_cpus" in pinned:
        irq_cpus = set(parse_cpulist(pinned["irq_cpus"]))
        if not irq_cpus <= housekeeping:
            refused.append(f"irq_cpus {pinned['irq_cpus']} include isolated CPUs "
                           f"{format_cpulist(irq_cpus - housekeeping)}")
        reasons.append(f"IRQ CPUs pinned by the inventory: {pinned['irq_cpus']}")
    else:
        irq_cpus = set(housekeeping)
        if nic_irq_cpus and isolation:
            reasons.append("NIC IRQs on housekeeping CPUs of the NIC's node: "
                           + ", ".join(f"{n} -> {c}" for n, c in nic_irq_cpus.items()))

    node_rows = []
    for nid, cpus in nodes:
        node_rows.append({
            "id": nid,
            "cpus": format_cpulist(cpus),
            "housekeeping": format_cpulist(cpus & housekeeping),
            "isolated": format_cpulist(cpus & isolated),
            "irq_cpus": format_cpulist(cpus & irq_cpus),
        })

    iso_text, hk_text = format_cpulist(isolated), format_cpulist(housekeeping)
    cmdline_set: dict[str, str] = {}
    if isolation and isolated:
        flags = ",".join(profile["isolcpus_flags"])
        cmdline_set = {
            "isolcpus": f"{flags},{iso_text}" if flags else iso_text,
            "nohz_full": iso_text,
            "rcu_nocbs": iso_text,
            "irqaffinity": hk_text,
        }
        reasons.append(f"kernel: isolcpus/nohz_full/rcu_nocbs={iso_text}, irqaffinity={hk_text}")
    for arg in profile["cmdline_extra"]:
        key, _, value = arg.partition("=")
        cmdline_set[key] = value if _ else None
    cmdline_remove = [] if isolation else list(ISOLATION_ARGS)
    if not isolation:
        present = [a for a in ISOLATION_ARGS if facts["kernel"]["cmdline_args"]["args"].get(a) is not None
                   or a in facts["kernel"]["cmdline_args"]["args"]]
        if present:
            reasons.append(f"kernel: remove {', '.join(present)} left by an earlier tuning")

    sysctl = {k: v for k, v in profile["sysctl"].items() if v is not None}
    rt = sysctl.get("kernel.sched_rt_runtime_us")
    period = facts["kernel"].get("sched_rt_period_us") or 1000000
    if rt is not None:
        if rt != -1 and rt > period:
            raise BadInput(f"kernel.sched_rt_runtime_us={rt} exceeds sched_rt_period_us={period}")
        if rt != -1 and rt < 0.9 * period:
            warnings.append(f"kernel.sched_rt_runtime_us={rt} lets RT throttling park a SCHED_FIFO thread for "
                            f"{(period - rt) / 1000:g} ms of every {period / 1000:g} ms")
        reasons.append(f"sysctl kernel.sched_rt_runtime_us={rt}: RT throttling at most "
                       f"{max(0, period - rt) / 1000 if rt != -1 else 0:g} ms per period")
    current_rt = facts["kernel"].get("sched_rt_runtime_us")
    if current_rt is not None and current_rt != -1 and current_rt < 0.9 * period and rt is not None and rt != current_rt:
        reasons.append(f"sched_rt_runtime_us {current_rt} -> {rt}: the current value parks FIFO threads "
                       f"{(period - current_rt) / 1000:g} ms per period")

    governor = profile["governor"]
    cpufreq = facts["cpufreq"]
    governor_applicable = bool(governor) and cpufreq["available"]
    if governor and not cpufreq["available"]:
        reasons.append("governor: not applicable (no cpufreq on this host)")
    elif governor:
        offered = cpufreq.get("available_governors") or []
        if offered and governor not in offered:
            raise BadInput(f"governor {governor!r} is not offered by this host (available: {', '.join(offered)})")
        reasons.append(f"governor {governor} on every CPU")

    if isolation and topo["threads_per_core"] > 1 and profile["kubelet"]["full_pcpus_only"]:
        reasons.append("SMT on: kubelet full-pcpus-only keeps pods on whole cores")
    if facts["kernel"].get("numa_balancing") and sysctl.get("kernel.numa_balancing") == 0:
        reasons.append("numa_balancing 1 -> 0: no page migration under pinned inference")
    steal = (facts.get("steal") or {}).get("total") or {}
    if virt["virtual"] and steal.get("percent", 0) > 1:
        warnings.append(f"steal time {steal['percent']:.1f}% since boot: the hypervisor takes CPU from this guest")

    # Without isolation IRQs may still be steered (e.g. a guest keeping CPU 0 for IRQs through a
    # pinned irq_cpus); with nothing pinned they simply stay on every CPU.
    irq_affinity = bool(profile["irq_affinity"]) and (isolation or "irq_cpus" in pinned)
    assignments = {}
    if irq_affinity:
        nic_of = {irq: nic["name"] for nic in facts.get("nics", []) for irq in nic["irqs"]}
        for irq in facts.get("irqs", []):
            if irq.get("smp_affinity_list") is None:
                continue
            nic = nic_of.get(irq["irq"])
            assignments[str(irq["irq"])] = nic_irq_cpus[nic] if nic and "irq_cpus" not in pinned else format_cpulist(irq_cpus)
    governor_cpus = ""
    if governor_applicable:
        governed = set()
        for cpus in cpufreq["governors"].values():
            governed |= parse_cpulist(cpus)
        governor_cpus = format_cpulist(governed & online)

    bios = _bios(profile, topo)
    kubelet = _kubelet(profile, hk_text, nodes, isolation)
    pools = {str(r["id"]): r["isolated"] for r in node_rows if r["isolated"]}

    return {
        "host": host,
        "profile": profile["name"],
        "isolation": isolation,
        "online": topo["online"],
        "housekeeping": hk_text,
        "isolated": iso_text,
        "irq_cpus": format_cpulist(irq_cpus),
        "irq_mask": format_mask(irq_cpus, topo["cpus"]) if irq_cpus else None,
        "nic_irq_cpus": nic_irq_cpus,
        "nodes": node_rows,
        "pools": pools,
        "cmdline": " ".join(k if v is None else f"{k}={v}" for k, v in cmdline_set.items()),
        "cmdline_set": cmdline_set,
        "cmdline_remove": cmdline_remove,
        "sysctl": sysctl,
        "governor": governor if governor_applicable else None,
        "governor_cpus": governor_cpus,
        "irq": {
            "affinity": irq_affinity,
            "assignments": assignments,
            "default_smp_affinity": format_mask(irq_cpus, topo["cpus"]) if irq_affinity and irq_cpus else None,
            "irqbalance": profile["irqbalance"] if isolation or profile["irqbalance"] != "banned" else "leave",
            "banned_cpulist": iso_text,
        },
        "containerd": dict(profile["containerd"]),
        "kubelet": kubelet,
        "bios": bios,
        "smoke": dict(profile["smoke"]),
        "warnings": warnings,
        "reasons": reasons,
        "refused": refused,
    }


def _reserve(profile, cores, nodes, nic_nodes, reasons) -> set[int]:
    per_node = profile["reserve_per_node"]
    extra = profile["irq_cores"]
    housekeeping: set[int] = set()
    for nid, cpus in nodes:
        node_cores = sorted((c for c in cores if c <= cpus), key=min)
        want = per_node + (extra if nid in nic_nodes else 0)
        if want >= len(node_cores):
            raise BadInput(f"reserve_per_node={per_node}" + (f" + irq_cores={extra}" if nid in nic_nodes else "")
                           + f" leaves no isolated core on NUMA node {nid} (it has {len(node_cores)} cores)")
        for core in node_cores[:want]:
            housekeeping |= core
        reasons.append(f"node {nid}: {want} housekeeping core(s) "
                       + (f"({per_node} reserved + {extra} for NIC IRQs) " if nid in nic_nodes and extra else "")
                       + f"-> CPUs {format_cpulist(cpus & housekeeping)}")
    zero_core = next((c for c in cores if 0 in c), frozenset({0}))
    if not zero_core <= housekeeping:
        housekeeping |= zero_core
        reasons.append("CPU 0 stays housekeeping (boot CPU: timers, unmovable kernel work)")
    return housekeeping


def _pinned_partition(pinned, online, reasons) -> set[int]:
    iso = set(parse_cpulist(pinned["isolated"])) if "isolated" in pinned else None
    hk = set(parse_cpulist(pinned["housekeeping"])) if "housekeeping" in pinned else None
    for name, cpus in (("isolated", iso), ("housekeeping", hk)):
        if cpus is not None and not cpus <= online:
            raise BadInput(f"hostkit_overrides.{name}: CPU(s) {format_cpulist(cpus - online)} are not online "
                           f"(online: {format_cpulist(online)})")
    if iso is not None and hk is not None:
        if iso & hk or (iso | hk) != online:
            raise BadInput(f"hostkit_overrides: isolated {pinned['isolated']} and housekeeping "
                           f"{pinned['housekeeping']} must partition the online CPUs {format_cpulist(online)}")
    housekeeping = hk if hk is not None else set(online) - iso
    reasons.append(f"partition pinned by the inventory: housekeeping {format_cpulist(housekeeping)}")
    return housekeeping


def _partition_guards(isolated, housekeeping, cores, nodes) -> list[str]:
    refused = []
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
    return refused


def _bios(profile, topo) -> dict:
    b = profile["bios"]
    checks = []
    if b["numa_per_socket"] is not None:
        checks.append({"name": "numa_per_socket", "expected": b["numa_per_socket"], "actual": topo["numa_per_socket"],
                       "mode": topo["numa_mode"]})
    if b["smt"] is not None:
        checks.append({"name": "smt", "expected": b["smt"], "actual": topo["smt"]["active"]})
    if b["min_memory_channels_per_socket"] is not None:
        checks.append({"name": "memory_channels_per_socket", "expected": b["min_memory_channels_per_socket"],
                       "actual": None})
    for c in checks:
        c["ok"] = None if c["actual"] is None else (c["actual"] >= c["expected"]
                                                     if c["name"] == "memory_channels_per_socket"
                                                     else c["actual"] == c["expected"])
    return {"enforce": b["enforce"], "checks": checks}


def _kubelet(profile, hk_text, nodes, isolation) -> dict:
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
