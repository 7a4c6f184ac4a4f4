"""Human output of facts: a compact lscpu-like summary plus hostkit's own lines."""

from __future__ import annotations


def _kv(rows: list[tuple[str, object]]) -> str:
    width = max(len(k) for k, _ in rows) + 2
    return "\n".join(f"{k + ':':<{width}}{v}" for k, v in rows)


def summary(facts: dict) -> str:
    t, v, k, f = facts["topology"], facts["virtualization"], facts["kernel"], facts["cpufreq"]
    rows: list[tuple[str, object]] = [
        ("Sysroot", facts["sysroot"]),
        ("Model name", t["model_name"] or "unknown"),
        (
            "CPU(s)",
            f"{t['cpus']} possible, online {t['online'] or '-'}"
            + (f", offline {t['offline']}" if t["offline"] else ""),
        ),
        ("Topology", f"{t['sockets']} socket(s) x {t['cores_per_socket']} core(s) x {t['threads_per_core']} thread(s)"),
        ("SMT", f"{'on' if t['smt']['active'] else 'off'} (control: {t['smt']['control'] or 'n/a'})"),
        ("NUMA node(s)", f"{len(t['numa_nodes'])}, {t['numa_per_socket']} per socket ({t['numa_mode']})"),
    ]
    for node in t["numa_nodes"]:
        mem = f", {node['memory_kb'] // 1048576} GiB" if node.get("memory_kb") else ""
        rows.append((f"  node{node['id']}", f"CPUs {node['cpus'] or '-'}{mem}"))
    l3 = t["l3_groups"]
    sizes = {g["size"] for g in l3}
    rows.append(
        (
            "L3 groups",
            f"{len(l3)} x {next(iter(sizes)) if len(sizes) == 1 else 'mixed'}: " + _abbrev([g["cpus"] for g in l3]),
        )
    )
    rows.append(("Hypervisor", v["hypervisor"] or "none (bare metal)"))
    rows.append(("Isolated CPUs", t["isolated"] or "none"))
    args = k["cmdline_args"]
    iso = args["isolcpus"]
    rows.append(
        (
            "Kernel args",
            ", ".join(
                f"{name}={val}"
                for name, val in (
                    ("isolcpus", (",".join(iso["flags"]) + "," + iso["cpus"]) if iso else None),
                    ("nohz_full", args["nohz_full"]),
                    ("rcu_nocbs", args["rcu_nocbs"]),
                    ("irqaffinity", args["irqaffinity"]),
                )
                if val
            )
            or "no CPU isolation arguments",
        )
    )
    rt = k["rt_throttling"]
    rt_text = f"{k['sched_rt_runtime_us']} / {k['sched_rt_period_us']} us"
    if rt["enabled"]:
        rt_text += f" (RT throttling can park a FIFO thread up to {rt['max_stall_ms']:g} ms per period)"
    rows.append(("RT runtime", rt_text))
    rows.append(
        (
            "NUMA sysctls",
            f"numa_balancing={k['numa_balancing']} zone_reclaim_mode={k['zone_reclaim_mode']} "
            f"timer_migration={k['timer_migration']} stat_interval={k['stat_interval']}",
        )
    )
    if f["available"]:
        rows.append(("Governors", ", ".join(f"{g}: {c}" for g, c in f["governors"].items())))
    else:
        rows.append(("Governors", "not applicable (no cpufreq)"))
    for nic in facts["nics"]:
        rows.append(
            (
                f"NIC {nic['name']}",
                f"node {nic['numa_node']}, local CPUs {nic['local_cpulist'] or '?'}, {len(nic['irqs'])} IRQ(s)",
            )
        )
    steal = facts["steal"]["total"]
    if steal:
        rows.append(("Steal time", f"{steal['percent']:.2f}% ({steal['seconds']:.0f} s since boot)"))
    rows.append(("Kernel", k["release"] or "unknown"))
    out = _kv(rows)
    if v["deceptive_topology"]:
        out += "\nWARNING: deceptive topology; CPU isolation and NUMA placement cannot be trusted here:"
        out += "".join(f"\n  - {r}" for r in v["reasons"])
    return out


def _abbrev(items: list[str], keep: int = 4) -> str:
    if len(items) <= keep:
        return " | ".join(items)
    return " | ".join(items[:keep]) + f" | ... ({len(items) - keep} more)"


def fleet_row(host: str, facts: dict) -> list[str]:
    t, v = facts["topology"], facts["virtualization"]
    return [
        host,
        f"{t['sockets']}x{t['cores_per_socket']}x{t['threads_per_core']}",
        str(t["cpus"]),
        f"{len(t['numa_nodes'])} ({t['numa_mode']})",
        str(len(t["l3_groups"])),
        (v["hypervisor"] or "-") + (" DECEPTIVE" if v["deceptive_topology"] else ""),
        t["isolated"] or "-",
        str(facts["kernel"]["sched_rt_runtime_us"]),
    ]


FLEET_HEADER = ["host", "topology", "CPUs", "NUMA", "L3", "hypervisor", "isolated", "rt_runtime_us"]
