"""The daemons the plan must agree with: irqbalance (who owns IRQ placement, and where its
environment file lives on this distribution), stalld (what boosts a starved kernel thread when
RT throttling is off), and the node's container stack, containerd and kubelet (whose roles have
nothing to configure on a host that does not have them yet: a node tuned before Kubernetes is
installed, the usual provisioning order).

Running means a process of that name in ``/proc/<pid>/comm`` under the sysroot; installed means
its program (or, for irqbalance, its environment file) exists. Standard library only.
"""

from __future__ import annotations

import re

from hostkit.core.cpulist import format_cpulist, parse_mask
from hostkit.facts.sysroot import Sysroot
from hostkit.tunables import IRQBALANCE_CONFIGS

# irqbalance's ban, in its environment file: the current name (a cpulist) and the old one (a hex
# mask). irqbalance reads the old one first and, when it is set, ignores the new one (cputree.c,
# setup_banned_cpus, 1.9 to this day: "IRQBALANCE_BANNED_CPUS is discarded, Use
# IRQBALANCE_BANNED_CPULIST instead", then goto out): a stale old ban silently wins.
IRQBALANCE_BANNED_CPULIST = "IRQBALANCE_BANNED_CPULIST"
IRQBALANCE_BANNED_CPUS = "IRQBALANCE_BANNED_CPUS"
_ASSIGNMENT = re.compile(r'(?m)^[ \t]*([A-Z_][A-Z0-9_]*)=[ \t]*"?([^"\n]*?)"?[ \t]*$')

# Where the distributions install the programs (Debian: /usr/sbin/irqbalance, /usr/bin/containerd,
# Kubernetes' own packages /usr/bin/kubelet; RHEL: /usr/sbin/irqbalance, /usr/bin/stalld); /sbin and
# /bin for hosts without the /usr merge; /usr/local/bin for containerd and kubelet installed from
# their release tarballs.
_PROGRAM_DIRS = ("usr/sbin", "usr/bin", "sbin", "bin", "usr/local/bin")


def running_commands(sr: Sysroot) -> set[str]:
    """The ``comm`` of every process under ``proc/`` (empty on a sysroot without processes)."""
    names = set()
    for entry in sr.listdir("proc"):
        if entry.isdigit():
            comm = sr.read(f"proc/{entry}/comm")
            if comm:
                names.add(comm.strip())
    return names


def _installed(sr: Sysroot, program: str) -> bool:
    return any(sr.exists(f"{d}/{program}") for d in _PROGRAM_DIRS)


def _assignments(text: str) -> dict[str, str]:
    """The ``NAME=value`` lines of an environment file, quotes dropped, the last one of a name winning."""
    return dict(_ASSIGNMENT.findall(text))


def irqbalance_ban(text: str) -> tuple[str, str | None]:
    """The CPUs irqbalance's environment file bans, as irqbalance reads it: (cpulist, the variable
    that decides; None when neither is set). A commented line sets nothing; the last assignment of a
    name wins, as in the shell. Raises ValueError for a mask that is not one."""
    values = _assignments(text)
    if values.get(IRQBALANCE_BANNED_CPUS):
        return format_cpulist(parse_mask(values[IRQBALANCE_BANNED_CPUS])), IRQBALANCE_BANNED_CPUS
    if values.get(IRQBALANCE_BANNED_CPULIST):
        return values[IRQBALANCE_BANNED_CPULIST], IRQBALANCE_BANNED_CPULIST
    return "", None


def read_services(sr: Sysroot) -> dict:
    comms = running_commands(sr)
    config = next((p for p in IRQBALANCE_CONFIGS if sr.exists(p.lstrip("/"))), None)
    old = None  # the old variable's value where it is set (and so wins)
    if config is not None:
        old = _assignments(sr.read(config.lstrip("/")) or "").get(IRQBALANCE_BANNED_CPUS) or None
    return {
        "irqbalance": {
            "installed": _installed(sr, "irqbalance") or config is not None,
            "running": "irqbalance" in comms,
            "config": config,
            "banned_cpus": old,
        },
        "stalld": {"installed": _installed(sr, "stalld"), "running": "stalld" in comms},
        "containerd": {"installed": _installed(sr, "containerd"), "running": "containerd" in comms},
        "kubelet": {"installed": _installed(sr, "kubelet"), "running": "kubelet" in comms},
    }
