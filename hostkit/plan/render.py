"""Human output of a plan: the per-NUMA-node partition and one line of reason per decision.

The text tells the whole document: every refusal, refused part and warning of the plan's JSON is a
line of its own, in full (tests/unit/test_plan_text.py holds the two together for every fixture and
shipped profile)."""

from __future__ import annotations


def plan_rows(plan: dict) -> list[list[str]]:
    return [
        [str(n["id"]), n["cpus"], n["housekeeping"] or "-", n["isolated"] or "-", n["irq_cpus"] or "-"]
        for n in plan["nodes"]
    ]


PLAN_HEADER = ["node", "CPUs", "housekeeping", "isolated", "IRQ CPUs"]
PART_REFUSED = "REFUSED (this part only, the rest applies)"


def plan_title(host: str, plan: dict) -> str:
    """The plan table's title: the host, its profile, and whether a guard refused it or a part of it."""
    state = " (REFUSED)" if plan["refused"] else " (PART REFUSED)" if plan["refused_parts"] else ""
    return f"{host}: profile {plan['profile']}{state}"


def plan_text(plan: dict) -> str:
    lines = []
    if plan["cmdline"]:
        lines.append(f"kernel cmdline: {plan['cmdline']}")
    if plan["cmdline_remove"]:
        lines.append(f"kernel cmdline: remove {' '.join(plan['cmdline_remove'])}")
    lines.append("sysctl: " + " ".join(f"{k}={v}" for k, v in plan["sysctl"].items()))
    owner = {"irqbalance": " (placed by irqbalance)", "hostkit": " (pinned by hostkit)"}.get(
        plan["irq"].get("owner"), ""
    )
    lines.append(
        f"governor: {plan['governor'] or 'unchanged'}; IRQ affinity: "
        f"{'IRQ CPUs ' + plan['irq_cpus'] + owner if plan['irq']['affinity'] else 'unchanged'}; "
        f"irqbalance: {plan['irq']['irqbalance']}"
    )
    if plan["kubelet"].get("enabled"):
        k = plan["kubelet"]["config"]
        lines.append(
            f"kubelet: cpuManagerPolicy={k['cpuManagerPolicy']} topologyManagerPolicy="
            f"{k['topologyManagerPolicy']} reservedSystemCPUs={k.get('reservedSystemCPUs', '-')}"
        )
    for c in plan["bios"]["checks"]:
        state = {True: "ok", False: "MISMATCH", None: "unknown"}[c["ok"]]
        detail = (
            f" [per socket: {', '.join(f'{s}: {v}' for s, v in c['per_socket'].items())}]"
            if c.get("per_socket")
            else ""
        )
        lines.append(f"bios {c['name']}: expected {c['expected']}, got {c['actual']} ({state}){detail}")
    lines += [f"why: {r}" for r in plan["reasons"]]
    lines += [f"WARNING: {w}" for w in plan["warnings"]]
    lines += [f"{PART_REFUSED}: {r}" for r in plan["refused_parts"]]
    lines += [f"REFUSED: {r}" for r in plan["refused"]]
    return "\n".join(lines)


def after_bios_line(after: dict) -> str:
    """The OS plan against the topology the BIOS gives at its power cycle: predicted (and, after the
    cycle, whether the booted host's plan was that one) or why it was planned as the host was."""
    if "predicted" not in after:  # no topology change: only the check after the cycle
        line = "OS planned before the BIOS power cycle"
    elif after["predicted"]:
        line = "OS " + "; ".join(after.get("notes") or [])  # its first note says what it was planned for
    else:
        line = after["why"]
    held = after.get("prediction")
    if held is not None:
        line += (
            "; the booted host's plan is that one"
            if held["held"]
            else "; the booted host's plan differs, applied after the cycle: " + "; ".join(held["misses"])
        )
    return line
