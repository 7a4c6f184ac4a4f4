"""Capture the files the facts engine (and ``lscpu``) read from a live root into a fixture.

The capture is a JSON document ``{"files": {rel: text}, "symlinks": {rel: target},
"dirs": [rel]}`` that :func:`hostkit.lab.fixtures.materialize` writes back as a
sysroot tree. Only the files hostkit reads are taken: no secrets, no logs.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from hostkit.facts.sysroot import Sysroot
from hostkit.tunables import SYSCTLS, SYSFS_VALUES

PATTERNS = [
    "proc/cpuinfo",
    "proc/cmdline",
    "proc/interrupts",
    "proc/stat",
    "proc/sys/kernel/osrelease",
    "proc/sys/kernel/hostname",
    *(s.proc_path.lstrip("/") for s in SYSCTLS),
    "proc/irq/default_smp_affinity",
    "proc/irq/*/smp_affinity",
    "proc/irq/*/smp_affinity_list",
    "proc/irq/*/effective_affinity",
    "proc/irq/*/effective_affinity_list",
    "proc/irq/*/node",
    "sys/devices/system/cpu/possible",
    "sys/devices/system/cpu/present",
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/offline",
    "sys/devices/system/cpu/isolated",
    "sys/devices/system/cpu/kernel_max",
    "sys/devices/system/cpu/smt/control",
    "sys/devices/system/cpu/smt/active",
    "sys/devices/system/cpu/cpu[0-9]*/online",
    "sys/devices/system/cpu/cpu[0-9]*/topology/*",
    "sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/*",
    "sys/devices/system/cpu/cpu[0-9]*/cpufreq/*",
    "sys/devices/system/node/possible",
    "sys/devices/system/node/online",
    "sys/devices/system/node/has_cpu",
    "sys/devices/system/node/has_memory",
    "sys/devices/system/node/node[0-9]*/cpumap",
    "sys/devices/system/node/node[0-9]*/cpulist",
    "sys/devices/system/node/node[0-9]*/distance",
    "sys/devices/system/node/node[0-9]*/meminfo",
    "sys/class/dmi/id/sys_vendor",
    "sys/class/dmi/id/product_name",
    "sys/hypervisor/type",
    "sys/bus/pci/devices/*/vendor",  # the hypervisor's devices, where DMI is missing
    "sys/devices/system/clocksource/clocksource0/available_clocksource",
    *(v.glob.lstrip("/") for v in SYSFS_VALUES),  # cpufreq's are under cpufreq/* above
    "sys/devices/system/cpu/cpuidle/*",
    "sys/devices/system/cpu/cpu0/cpuidle/state[0-9]*/*",
]

NIC_DEVICE_ATTRS = ("numa_node", "local_cpulist", "local_cpus", "vendor", "device")


def capture(src: str = "/") -> dict:
    sr = Sysroot(src)
    root = str(sr.root)
    files: dict[str, str] = {}
    symlinks: dict[str, str] = {}
    dirs: set[str] = set()
    for pat in PATTERNS:
        for path in glob.glob(os.path.join(root, pat)):
            if os.path.isdir(path) and not os.path.islink(path):
                continue
            rel = os.path.relpath(path, root)
            try:
                files[rel] = Path(path).read_text(errors="replace")
            except OSError:
                continue  # write-only or refusing attributes
    # IRQ action directories carry the handler names.
    for irqdir in glob.glob(os.path.join(root, "proc/irq/[0-9]*")):
        for entry in os.scandir(irqdir):
            if entry.is_dir():
                dirs.add(os.path.relpath(entry.path, root))
    # NICs: keep the sysfs shape (class link -> device dir -> bus parent).
    dirs.add("sys/class/net")
    for name in sr.listdir("sys/class/net"):
        link = os.path.join(root, "sys/class/net", name)
        dev = sr.realpath(f"sys/class/net/{name}/device")
        if dev is None:
            continue
        net_real = sr.realpath(f"sys/class/net/{name}")
        symlinks[f"sys/class/net/{name}"] = os.readlink(link)
        symlinks[f"{net_real}/device"] = os.path.relpath(dev, os.path.dirname(f"{net_real}/device"))
        candidate = dev
        for _ in range(3):
            for attr in NIC_DEVICE_ATTRS:
                p = os.path.join(root, candidate, attr)
                if os.path.isfile(p):
                    try:
                        files[f"{candidate}/{attr}"] = Path(p).read_text(errors="replace")
                    except OSError:
                        pass
            for irq in sr.listdir(f"{candidate}/msi_irqs"):
                files[f"{candidate}/msi_irqs/{irq}"] = "msix\n"
            candidate = candidate.rsplit("/", 1)[0]
    # Directories every real host has, where hostkit keeps its journal and writes configs.
    dirs |= {"etc", "var/lib"}
    return {"files": dict(sorted(files.items())), "symlinks": symlinks, "dirs": sorted(dirs)}
