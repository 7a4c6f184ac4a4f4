"""Kernel command line and the sysctls of :mod:`hostkit.tunables`."""

from __future__ import annotations

from hostkit.core.cpulist import format_cpulist, parse_cpulist
from hostkit.core.kernel_args import split_cmdline, split_isolcpus
from hostkit.errors import CpulistError, FactsError
from hostkit.facts.boot_loader import read_boot_loader
from hostkit.facts.sysroot import Sysroot
from hostkit.tunables import SYSCTLS

CPULIST_ARGS = ("nohz_full", "rcu_nocbs", "irqaffinity")


def parse_cmdline(text: str, source: str = "/proc/cmdline") -> dict:
    """Split a kernel command line; parse the CPU-isolation arguments.

    A malformed CPU list raises naming ``source`` and the text.
    """
    args = split_cmdline(text)
    out: dict = {"args": args}

    iso = args.get("isolcpus")
    if iso is not None:
        flags, cpus = split_isolcpus(iso)
        out["isolcpus"] = {"flags": flags, "cpus": _cpus(cpus, "isolcpus", iso, source)}
    else:
        out["isolcpus"] = None
    for name in CPULIST_ARGS:
        value = args.get(name)
        out[name] = None if value is None else _cpus(value, name, value, source)
    return out


def _cpus(text: str, arg: str, whole: str, source: str) -> str:
    if text in ("all",):
        return "all"
    try:
        return format_cpulist(parse_cpulist(text))
    except CpulistError:
        raise FactsError(f"malformed cpulist in {source}: {arg}={whole!r}") from None


def read_kernel(sr: Sysroot) -> dict:
    cmdline_path = "proc/cmdline"
    cmdline = sr.read(cmdline_path, "") or ""
    out = {
        "release": sr.read("proc/sys/kernel/osrelease"),
        "cmdline": cmdline,
        "cmdline_args": parse_cmdline(cmdline, str(sr.path(cmdline_path))),
    }
    # What the next boot will use (the boot loader's files), beside what this boot used.
    out["boot_loader"], out["next_boot_cmdline"] = read_boot_loader(sr, cmdline)
    for s in SYSCTLS:  # every sysctl of hostkit.tunables, as facts["kernel"][<last part of its key>]
        out[s.fact] = sr.read_int(s.proc_path) if s.kind == "int" else sr.read(s.proc_path)
    runtime, period = out["sched_rt_runtime_us"], out["sched_rt_period_us"]
    out["rt_throttling"] = _rt_throttling(runtime, period)
    return out


def _rt_throttling(runtime: int | None, period: int | None) -> dict:
    if runtime is None or period is None:
        return {"enabled": None, "max_stall_ms": None}
    if runtime < 0 or runtime >= period:
        return {"enabled": False, "max_stall_ms": 0.0}
    return {"enabled": True, "max_stall_ms": (period - runtime) / 1000.0}
