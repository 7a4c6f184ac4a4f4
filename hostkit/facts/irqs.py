"""IRQs (``/proc/interrupts``, ``/proc/irq/*``), NICs and their IRQs, steal time."""

from __future__ import annotations

from hostkit.core.cpulist import format_cpulist
from hostkit.core.irq_affinity import parse_interrupts as interrupt_rows
from hostkit.errors import FactsError
from hostkit.facts.sysroot import Sysroot

USER_HZ = 100  # /proc/stat ticks per second on every Linux architecture hostkit targets


def parse_interrupts(text: str, source: str = "/proc/interrupts") -> list[dict]:
    """Numbered IRQ rows of ``/proc/interrupts``: irq, per-CPU counts, chip, hwirq, name (the one
    parser, :func:`hostkit.core.irq_affinity.parse_interrupts`, which the boot-time unit runs too)."""
    try:
        return interrupt_rows(text)
    except ValueError as exc:
        raise FactsError(f"malformed counts in {source} {exc}") from None


def read_irqs(sr: Sysroot) -> list[dict]:
    rows = parse_interrupts(sr.read("proc/interrupts", "") or "", str(sr.path("proc/interrupts")))
    by_irq = {r["irq"]: r for r in rows}
    for irq in sr.numbered("proc/irq", ""):
        by_irq.setdefault(irq, {"irq": irq, "total": 0, "per_cpu": [], "chip": "", "hwirq": "", "name": ""})
    out = []
    for irq in sorted(by_irq):
        row = by_irq[irq]
        base = f"proc/irq/{irq}"
        affinity = sr.read_cpulist(f"{base}/smp_affinity_list")
        if affinity is None:
            affinity = sr.read_mask(f"{base}/smp_affinity")
        effective = sr.read_cpulist(f"{base}/effective_affinity_list")
        if effective is None:
            effective = sr.read_mask(f"{base}/effective_affinity")
        actions = [d for d in sr.listdir(base) if sr.is_dir(f"{base}/{d}")]
        out.append(
            {
                "irq": irq,
                "name": row["name"] or ",".join(actions),
                "chip": row["chip"],
                "total": row["total"],
                "smp_affinity_list": None if affinity is None else format_cpulist(affinity),
                "effective_affinity_list": None if effective is None else format_cpulist(effective),
                "node": sr.read_int(f"{base}/node"),
            }
        )
    return out


def read_default_affinity(sr: Sysroot) -> str | None:
    mask = sr.read_mask("proc/irq/default_smp_affinity")
    return None if mask is None else format_cpulist(mask)


def _device_attrs(sr: Sysroot, dev: str) -> str | None:
    """The device directory (the NIC's or its bus parent's) that carries numa_node/msi_irqs."""
    candidate = dev
    for _ in range(3):  # virtio-net: net/eth0/device -> virtioN -> PCI function
        if sr.exists(f"{candidate}/numa_node") or sr.exists(f"{candidate}/msi_irqs"):
            return candidate
        parent = candidate.rsplit("/", 1)[0]
        if parent == candidate:
            break
        candidate = parent
    return None


def read_nics(sr: Sysroot, irqs: list[dict]) -> list[dict]:
    nics = []
    for name in sr.listdir("sys/class/net"):
        dev = sr.realpath(f"sys/class/net/{name}/device")
        if dev is None:
            continue  # lo, bridges, bonds, veths: no device, no IRQs of their own
        attrs = _device_attrs(sr, dev)
        node = sr.read_int(f"{attrs}/numa_node", -1) if attrs else -1
        local = sr.read_cpulist(f"{attrs}/local_cpulist") if attrs else None
        msi = sorted(int(x) for x in sr.listdir(f"{attrs}/msi_irqs") if x.isdigit()) if attrs else []
        named = [i["irq"] for i in irqs if _irq_names_nic(i["name"], name)]
        nics.append(
            {
                "name": name,
                "numa_node": node,
                "local_cpulist": None if local is None else format_cpulist(local),
                "device": "/" + dev,
                "irqs": sorted(set(msi) | set(named)),
            }
        )
    return nics


def _irq_names_nic(irq_name: str, nic: str) -> bool:
    for action in irq_name.replace(",", " ").split():
        if action == nic or action.startswith((nic + "-", nic + "_", nic + "@")):
            return True
    return False


def read_steal(sr: Sysroot) -> dict:
    """Steal time per CPU from ``/proc/stat`` (ticks, seconds, share of the CPU's time)."""
    per_cpu = {}
    total = None
    for line in (sr.read("proc/stat", "") or "").splitlines():
        if not line.startswith("cpu"):
            continue
        name, *fields = line.split()
        try:
            vals = [int(v) for v in fields]
        except ValueError:
            raise FactsError(f"malformed line in {sr.path('proc/stat')}: {line!r}") from None
        steal = vals[7] if len(vals) > 7 else 0
        busy = sum(vals[:8])
        entry = {"ticks": steal, "seconds": steal / USER_HZ, "percent": round(100.0 * steal / busy, 3) if busy else 0.0}
        if name == "cpu":
            total = entry
        else:
            per_cpu[int(name[3:])] = entry
    worst = max(per_cpu.items(), key=lambda kv: kv[1]["percent"], default=None)
    return {
        "total": total,
        "per_cpu": {str(k): v for k, v in sorted(per_cpu.items())},
        "max_percent_cpu": None if worst is None else worst[0],
        "cpus_with_steal": format_cpulist(k for k, v in per_cpu.items() if v["ticks"] > 0),
    }
