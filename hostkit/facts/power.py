"""The /sys values of :data:`hostkit.tunables.SYSFS_VALUES` (every expanded file, with what the kernel
offers beside it) and the cpuidle driver with its C-states' exit latencies."""

from __future__ import annotations

import os
import stat
import struct

from hostkit.facts.sysroot import CPU_DIR, Sysroot
from hostkit.tunables import PM_QOS, SYSFS_VALUES


def read_sysfs_values(sr: Sysroot, online: frozenset[int], nodes: list[dict]) -> dict:
    """key -> {"values": {path: text}, "offered": [the values every file offers] | None}; a file the
    host lacks is absent from "values" (an empty map: the kernel or its driver has none)."""
    mem_nodes = [n["id"] for n in nodes if n.get("memory_kb")]
    out = {}
    for v in SYSFS_VALUES:
        values: dict[str, str] = {}
        offered: set[str] | None = None
        for path in v.paths(online, mem_nodes):
            text = sr.read(path.lstrip("/"))
            if text is None:
                continue
            values[path] = text.strip()
            side = v.offered_path(path)
            if side:
                these = set((sr.read(side.lstrip("/"), "") or "").split())
                offered = these if offered is None else offered & these
        out[v.key] = {"values": values, "offered": sorted(offered) if offered is not None else None}
    return out


def read_cpuidle(sr: Sysroot) -> dict:
    """The cpuidle driver and governor, and CPU 0's C-states with their exit latency (us)."""
    states = []
    for n in sr.numbered(f"{CPU_DIR}/cpu0/cpuidle", "state"):
        base = f"{CPU_DIR}/cpu0/cpuidle/state{n}"
        states.append(
            {"name": (sr.read(f"{base}/name", "") or "").strip(), "latency_us": sr.read_int(f"{base}/latency")}
        )
    return {
        "driver": (sr.read(f"{CPU_DIR}/cpuidle/current_driver") or "").strip() or None,
        "latency_ceiling_us": read_latency_ceiling(sr),
        "governor": (
            sr.read(f"{CPU_DIR}/cpuidle/current_governor_ro") or sr.read(f"{CPU_DIR}/cpuidle/current_governor") or ""
        ).strip()
        or None,
        "states": states,
    }


def read_latency_ceiling(sr: Sysroot) -> int | None:
    """The CPU latency ceiling in force (us): the smallest PM QoS request, as ``/dev/cpu_dma_latency``
    reads (a native s32; 2000000000 when nobody asks). None: not readable (not root, no such device)."""
    try:  # the character device (or a fixture's regular file); a FIFO in its place is never waited on
        fd = os.open(sr.path(PM_QOS.path.lstrip("/")), os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        mode = os.fstat(fd).st_mode
        raw = os.read(fd, 4) if stat.S_ISCHR(mode) or stat.S_ISREG(mode) else b""
    except OSError:
        return None
    finally:
        os.close(fd)
    return struct.unpack("=i", raw)[0] if len(raw) == 4 else None
