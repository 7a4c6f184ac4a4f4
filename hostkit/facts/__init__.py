"""The facts engine: a host's CPU/NUMA/IRQ/kernel state, read from a sysroot.

``gather(sysroot)`` returns the facts document (docs/contracts.md). The package uses
only the standard library so that it ships unchanged to remote hosts (see
:mod:`hostkit.ansible.agent_zipapp`), where the host needs nothing but python3.
"""

from __future__ import annotations

import os

from hostkit.core import kthreads
from hostkit.core.cpulist import parse_cpulist
from hostkit.core.sysroot import is_live
from hostkit.facts.cpufreq import read_cpufreq
from hostkit.facts.dmi import read_memory
from hostkit.facts.irqs import read_default_affinity, read_irqs, read_nics, read_steal
from hostkit.facts.kernel import read_kernel
from hostkit.facts.packages import read_packages
from hostkit.facts.power import read_cpuidle, read_sysfs_values
from hostkit.facts.services import read_services
from hostkit.facts.sysroot import Sysroot
from hostkit.facts.topology import read_cpuinfo, read_topology
from hostkit.facts.tuned import read_tuned
from hostkit.facts.virt import read_virtualization
from hostkit.tunables import cpu_flags_asked

SCHEMA_VERSION = 1


def gather(sysroot: str = "/") -> dict:
    sr = Sysroot(sysroot)
    cpuinfo = read_cpuinfo(sr)
    topo = read_topology(sr, cpuinfo)
    online = parse_cpulist(topo["online"])
    irqs = read_irqs(sr)
    steal = read_steal(sr)
    kernel = read_kernel(sr)
    return {
        "schema": SCHEMA_VERSION,
        "sysroot": str(sr.root),
        # access(2) says EROFS for a read-only mount: apply refuses such a host up front (exit 2).
        "sysroot_writable": os.access(sr.root, os.W_OK),
        "hostname": (sr.read("proc/sys/kernel/hostname") or "").strip() or None,
        "topology": topo,
        "virtualization": read_virtualization(sr, cpuinfo, topo, steal),
        "kernel": kernel,
        "cpufreq": read_cpufreq(sr, online),
        "irqs": irqs,
        "default_smp_affinity": read_default_affinity(sr),
        "nics": read_nics(sr, irqs),
        "steal": steal,
        "cpu_flags": {
            "count": len(cpuinfo["flags"]),
            "hypervisor": "hypervisor" in cpuinfo["flags"],
            # each /proc/cpuinfo flag a kernel argument of hostkit.tunables depends on
            "checked": {f: f in cpuinfo["flags"] for f in cpu_flags_asked()},
        },
        "services": read_services(sr),
        "memory": read_memory(sr),
        "tuned": read_tuned(sr),
        "cpuidle": read_cpuidle(sr),
        "sysfs": read_sysfs_values(sr, online, topo["numa_nodes"]),  # hostkit.tunables.SYSFS_VALUES
        "kthreads": kthreads.facts(is_live(str(sr.root))),  # live hosts only: a sysroot has no threads
        "packages": read_packages(sr, kernel["release"], cpuinfo["microcode"]),
    }


__all__ = ["gather", "Sysroot", "SCHEMA_VERSION"]
