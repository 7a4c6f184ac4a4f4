"""A host's effective state by layer, read from its hostkit facts, and the difference of two such
states with what the plan says about each key.

The layers: ``boot`` (the running command line's tuning arguments, the next boot's command line
and its boot loader), ``kernel`` (release, the sysctls hostkit tunes), ``irqs`` (each IRQ's
affinity, by number and name), ``cpu_power`` (governors, cpuidle, sysfs knobs), ``services``
(irqbalance, stalld, containerd, kubelet, tuned's profile), ``topology`` (what the BIOS and the
kernel make of the CPUs: NUMA nodes per socket, SMT, isolated and online CPUs), ``packages`` (the
versions of the packages that own what hostkit tunes, and the CPU microcode revision: never
planned, so a change is noted beside the drift it may explain, not drift of its own) and, for a host with
a BMC, ``bios`` (the BIOS version and every attribute in effect, read from the BMC: a firmware
update that resets a setting shows here; a BMC that could not be read is one key, its error).

Each key of a state is ``layer -> name -> value`` (text, a number or null): comparable as is, and
the same key in the plan (:func:`planned`) where the plan sets it.
"""

from __future__ import annotations

# facts.kernel key -> the sysctl's name, the plan's key for it
SYSCTLS = {
    "sched_rt_runtime_us": "kernel.sched_rt_runtime_us",
    "sched_rt_period_us": "kernel.sched_rt_period_us",
    "numa_balancing": "kernel.numa_balancing",
    "timer_migration": "kernel.timer_migration",
    "zone_reclaim_mode": "vm.zone_reclaim_mode",
    "stat_interval": "vm.stat_interval",
    "swappiness": "vm.swappiness",
}
BOOT_ARGS = ("isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity")
LAYERS = ("bios", "boot", "kernel", "irqs", "cpu_power", "services", "topology", "packages")


def effective_state(facts: dict) -> dict[str, dict]:
    k = facts["kernel"]
    args = (k.get("cmdline_args") or {}).get("args") or {}
    boot = {f"cmdline {a}": args.get(a) for a in BOOT_ARGS}
    boot["next boot command line"] = k.get("next_boot_cmdline")
    boot["boot loader"] = (k.get("boot_loader") or {}).get("backend")
    kernel = {"release": k.get("release"), **{SYSCTLS[key]: k.get(key) for key in SYSCTLS}}
    irqs = {f"IRQ {i['irq']} ({i['name']})": i.get("smp_affinity_list") for i in facts.get("irqs") or []}
    cpufreq = facts.get("cpufreq") or {}
    cpuidle = facts.get("cpuidle") or {}
    power = {f"governor {cpus}": g for cpus, g in sorted((cpufreq.get("governors") or {}).items())}
    power.update({"cpuidle driver": cpuidle.get("driver"), "cpuidle governor": cpuidle.get("governor")})
    for key, doc in sorted((facts.get("sysfs") or {}).items()):
        for path, value in sorted((doc.get("values") or {}).items()):
            power[f"{key} {path}"] = value
    svc = facts.get("services") or {}
    services = {f"{name} running": (s or {}).get("running") for name, s in sorted(svc.items())}
    services["irqbalance banned CPUs"] = (svc.get("irqbalance") or {}).get("banned_cpus")
    services["tuned profile"] = (facts.get("tuned") or {}).get("active_profile")
    t = facts["topology"]
    topology = {
        "NUMA nodes per socket": t.get("numa_per_socket"),
        "threads per core": t.get("threads_per_core"),
        "online CPUs": t.get("online"),
        "isolated CPUs": t.get("isolated"),
    }
    out = {
        "boot": boot,
        "kernel": kernel,
        "irqs": irqs,
        "cpu_power": power,
        "services": services,
        "topology": topology,
    }
    pk = facts.get("packages")
    if pk is not None:  # facts of hostkit 0.2 on: the versions (None: not read, pk["reason"]) and microcode
        versions = pk["versions"]
        out["packages"] = {
            **({"package versions": f"not read: {pk['reason']}"} if versions is None else dict(versions)),
            "CPU microcode": pk["microcode"],
        }
    if "bios" in facts:  # hostkit_bmc: the BMC's view (hostkit.bmc.facts.for_facts)
        b = facts["bios"]
        out["bios"] = (
            {"BMC": f"not read: {b['error']}"}
            if "error" in b
            else {"BIOS version": b.get("bios_version"), **dict(sorted((b.get("attributes") or {}).items()))}
        )
    return out


def planned(plan: dict) -> dict[str, dict]:
    """The keys of :func:`effective_state` whose value the plan sets, and that value (the BIOS
    attributes the host's BIOS plan sets: ``bios_attributes``, kept beside the OS plan)."""
    boot = {f"cmdline {a}": v for a, v in (plan.get("cmdline_set") or {}).items() if a in BOOT_ARGS}
    kernel = dict(plan.get("sysctl") or {})
    irq = plan.get("irq") or {}
    irqs = dict(irq.get("assignments") or {}) if irq.get("affinity") else {}
    power = {}
    for s in plan.get("sysfs") or []:
        power[f"{s['key']} {s['path']}"] = s["value"]
    bios = dict(plan.get("bios_attributes") or {})
    return {"bios": bios, "boot": boot, "kernel": kernel, "irqs": irqs, "cpu_power": power}


def _same(a, b) -> bool:
    return a == b or (a is not None and b is not None and str(a) == str(b))


def _plan_value(plan_keys: dict, layer: str, key: str):
    values = plan_keys.get(layer) or {}
    if layer == "irqs":  # "IRQ 57 (eth0-rx-0)" -> the plan's "57"
        return values.get(key.split()[1]) if key.startswith("IRQ ") else None
    return values.get(key)


def differences(before: dict, now: dict, plan: dict | None) -> list[dict]:
    """Every key whose value moved, layer by layer: before -> now, and what the plan says of it:
    ``planned`` (now holds the plan's value), ``undoing a planned value`` (the plan sets it and now
    does not hold it) or ``not planned``."""
    keys = planned(plan or {})
    out = []
    for layer in LAYERS:
        if layer not in before:
            continue  # a layer the baseline did not read (taken before hostkit read it, or without a BMC)
        b, n = before[layer] or {}, now.get(layer) or {}
        for key in sorted(set(b) | set(n)):
            old, new = b.get(key), n.get(key)
            if _same(old, new):
                continue
            want = _plan_value(keys, layer, key)
            if want is None:
                said = "not planned"
            elif _same(new, want):
                said = "planned"
            else:
                said = "undoing a planned value"
            out.append({"layer": layer, "key": key, "before": old, "now": new, "plan": said, "planned_value": want})
    return out
