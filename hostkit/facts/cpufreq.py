"""cpufreq driver and governor per CPU, collapsed to governor -> cpulist."""

from __future__ import annotations

from hostkit.core.cpulist import format_cpulist
from hostkit.facts.sysroot import CPU_DIR, Sysroot


def read_cpufreq(sr: Sysroot, online: frozenset[int]) -> dict:
    drivers: dict[str, set[int]] = {}
    governors: dict[str, set[int]] = {}
    available: set[str] | None = None
    missing: set[int] = set()
    for cpu in sorted(online):
        base = f"{CPU_DIR}/cpu{cpu}/cpufreq"
        gov = sr.read(f"{base}/scaling_governor")
        if gov is None:
            missing.add(cpu)
            continue
        governors.setdefault(gov.strip(), set()).add(cpu)
        drv = sr.read(f"{base}/scaling_driver")
        if drv:
            drivers.setdefault(drv.strip(), set()).add(cpu)
        avail = set((sr.read(f"{base}/scaling_available_governors", "") or "").split())
        available = avail if available is None else available & avail
    if not governors:
        return {
            "available": False,
            "reason": "no cpufreq in sysfs (typical of a virtual machine, or no cpufreq driver loaded)",
            "drivers": {},
            "governors": {},
            "available_governors": [],
            "without_cpufreq": format_cpulist(missing),
        }
    return {
        "available": True,
        "drivers": {d: format_cpulist(c) for d, c in sorted(drivers.items())},
        "governors": {g: format_cpulist(c) for g, c in sorted(governors.items())},
        "available_governors": sorted(available or ()),
        "without_cpufreq": format_cpulist(missing),
    }
