"""CPU, core, socket, NUMA and L3 topology from sysfs (and ``/proc/cpuinfo``)."""

from __future__ import annotations

from hostkit.core.cpulist import format_cpulist
from hostkit.core.sysroot import excerpt, is_number
from hostkit.errors import FactsError
from hostkit.facts.sysroot import CPU_DIR, NODE_DIR, Sysroot


def read_cpuinfo(sr: Sysroot) -> dict:
    """Vendor, model name and flags of the first processor block of ``/proc/cpuinfo``; the microcode
    revision of all of them."""
    text = sr.read("proc/cpuinfo", "") or ""
    info: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if info:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            info.setdefault(key.strip(), value.strip())
    flags = (info.get("flags") or info.get("Features") or "").split()
    return {
        "vendor": info.get("vendor_id") or info.get("CPU implementer"),
        "model_name": info.get("model name"),
        "flags": flags,
        "microcode": _microcode(text),
    }


def _microcode(text: str) -> str | None:
    """The microcode revision of every processor block: one value, or the distinct values joined
    when CPUs disagree (a partial late load); None where the kernel shows none (arm64, a guest)."""
    seen: list[str] = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "microcode" and value.strip() not in seen:
            seen.append(value.strip())
    return ",".join(seen) or None


def _cpu_rel(cpu: int, leaf: str) -> str:
    return f"{CPU_DIR}/cpu{cpu}/{leaf}"


def read_topology(sr: Sysroot, cpuinfo: dict) -> dict:
    possible, present, online = _cpu_sets(sr)
    isolated = sr.read_cpulist(f"{CPU_DIR}/isolated", frozenset())
    packages, cpu_package, cores, cpu_core = _packages_and_cores(sr, online)
    core_text = {core: format_cpulist(core) for core in cores}
    cpu_rows = [
        {"cpu": cpu, "socket": cpu_package[cpu], "siblings": core_text[cpu_core[cpu]]} for cpu in sorted(online)
    ]

    threads_per_core = max(len(s) for s in cores) if cores else 1
    sockets = len(packages)
    cores_per_socket = max(len({s for s in cores if s & p}) for p in packages.values())

    nodes = read_numa_nodes(sr, online)
    node_count = len([n for n in nodes if n["cpus"]])
    if node_count >= sockets:
        numa_per_socket = node_count // sockets
    else:
        numa_per_socket = 0  # one NUMA node spans several sockets (NPS0 or a flattened VM)

    smt_active = sr.read_int(f"{CPU_DIR}/smt/active")
    return {
        "vendor": cpuinfo["vendor"],
        "model_name": cpuinfo["model_name"],
        "sockets": sockets,
        "cores_per_socket": cores_per_socket,
        "threads_per_core": threads_per_core,
        "cpus": len(possible),
        "possible": format_cpulist(possible),
        "present": format_cpulist(present),
        "online": format_cpulist(online),
        "offline": format_cpulist(possible - online),
        "isolated": format_cpulist(isolated),
        "numa_nodes": nodes,
        "numa_per_socket": numa_per_socket,
        "numa_mode": numa_mode_name(cpuinfo["vendor"], numa_per_socket),
        "l3_groups": read_l3_groups(sr, online),
        "smt": {
            "control": sr.read(f"{CPU_DIR}/smt/control"),
            "active": threads_per_core > 1 if smt_active is None else bool(smt_active),
        },
        "sockets_cpus": [{"id": p, "cpus": format_cpulist(c)} for p, c in sorted(packages.items())],
        "cores": [core_text[c] for c in sorted(cores, key=min)],
        "per_cpu": cpu_rows,
    }


def _cpu_sets(sr: Sysroot) -> tuple[frozenset[int], frozenset[int], frozenset[int]]:
    """(possible, present, online) CPUs: the kernel's lists, else what the CPU directories say (a dump
    without ``cpu/online`` has per-CPU ``cpuN/online`` files, 0 for an offline CPU; the boot CPU
    often has none, and is online)."""
    possible = sr.read_cpulist(f"{CPU_DIR}/possible")
    present = sr.read_cpulist(f"{CPU_DIR}/present")
    dirs = frozenset(sr.numbered(CPU_DIR, "cpu"))
    if possible is None:
        possible = present if present is not None else dirs
    if not possible:
        raise FactsError(f"no CPUs found under {sr.path(CPU_DIR)}")
    if present is None:
        present = possible
    online = sr.read_cpulist(f"{CPU_DIR}/online")
    if online is None:
        online = frozenset(c for c in present if sr.read_int(_cpu_rel(c, "online"), 1) != 0)
    if not online:
        raise FactsError(f"no CPU online under {sr.path(CPU_DIR)}")
    return possible, present, online


def _packages_and_cores(sr: Sysroot, online: frozenset[int]):
    """(package id -> CPUs, CPU -> package id, cores (sibling sets), CPU -> its core), for the online
    CPUs: one sibling read per core and two per package, not four per CPU (a 384-CPU host would
    otherwise cost 1,500 reads).

    A package is what the kernel's package lists (or masks) say; its id is the firmware's
    ``physical_package_id``, unless that id is -1 (no package: seen on some VMs and ARM servers) or
    the firmware gave one id to CPUs the kernel's lists put in different packages (seen on
    single-core machines): then a free id. Without any list or mask, CPUs of one id are one package."""
    packages: dict[int, frozenset[int]] = {}
    cpu_package: dict[int, int] = {}
    cores: dict[frozenset[int], None] = {}
    cpu_core: dict[int, frozenset[int]] = {}
    for cpu in sorted(online):
        if cpu not in cpu_package:
            pkg = sr.read_int(_cpu_rel(cpu, "topology/physical_package_id"), 0)
            members, listed = _package_members(sr, cpu, online)
            if pkg < 0 or (listed and pkg in packages and not packages[pkg] & members):
                pkg = _synthetic_package(packages, members)
            elif pkg in packages:  # one package by its id, the kernel listing none: merge
                members = packages[pkg] | members
            packages[pkg] = members
            for c in members:
                cpu_package.setdefault(c, pkg)
        if cpu not in cpu_core:
            siblings = frozenset(_siblings(sr, cpu) & online) | {cpu}
            cores.setdefault(siblings, None)
            for c in siblings:
                cpu_core.setdefault(c, siblings)
    return packages, cpu_package, cores, cpu_core


def _siblings(sr: Sysroot, cpu: int) -> frozenset[int]:
    """The CPUs of ``cpu``'s core: the kernel's list files, else its hex masks (kernels before 2.6.28
    and some dumps have only ``thread_siblings``), else the CPU alone."""
    for leaf in ("core_cpus_list", "thread_siblings_list"):
        cpus = sr.read_cpulist(_cpu_rel(cpu, f"topology/{leaf}"))
        if cpus is not None:
            return cpus
    for leaf in ("core_cpus", "thread_siblings"):
        cpus = sr.read_mask(_cpu_rel(cpu, f"topology/{leaf}"))
        if cpus is not None:
            return cpus
    return frozenset({cpu})


def _package_members(sr: Sysroot, cpu: int, online: frozenset[int]) -> tuple[frozenset[int], bool]:
    """The online CPUs sharing ``cpu``'s package (the kernel's list files, else its hex masks) and
    whether the kernel listed them at all."""
    members = None
    for leaf in ("package_cpus_list", "core_siblings_list"):
        members = sr.read_cpulist(_cpu_rel(cpu, f"topology/{leaf}"))
        if members is not None:
            break
    if members is None:
        for leaf in ("package_cpus", "core_siblings"):
            members = sr.read_mask(_cpu_rel(cpu, f"topology/{leaf}"))
            if members is not None:
                break
    return frozenset((members or frozenset()) & online) | {cpu}, members is not None


def _synthetic_package(packages: dict[int, frozenset[int]], members: frozenset[int]) -> int:
    """A package id for a group of CPUs whose firmware gave none: the group's if seen, else the next free."""
    for pkg, cpus in packages.items():
        if cpus == members:
            return pkg
    return max(packages, default=-1) + 1


def numa_mode_name(vendor: str | None, per_socket: int) -> str:
    """How the BIOS NUMA setting appears to the OS: NPSn on AMD, SNCn on Intel."""
    if vendor == "AuthenticAMD":
        return f"NPS{per_socket}"
    if vendor == "GenuineIntel":
        if per_socket == 0:
            return "one node across sockets"
        return "SNC off" if per_socket == 1 else f"SNC{per_socket}"
    return f"{per_socket} node(s) per socket"


def read_numa_nodes(sr: Sysroot, online: frozenset[int]) -> list[dict]:
    ids = sr.numbered(NODE_DIR, "node")
    if not ids:
        # A kernel without NUMA support: one implicit node holding everything.
        return [{"id": 0, "cpus": format_cpulist(online), "distances": [10], "memory_kb": None}]
    nodes = []
    for nid in ids:
        base = f"{NODE_DIR}/node{nid}"
        cpus = sr.read_cpulist(f"{base}/cpulist")
        if cpus is None:
            cpus = sr.read_mask(f"{base}/cpumap", frozenset())
        dist_text = sr.read(f"{base}/distance", "") or ""
        if not all(is_number(x) for x in dist_text.split()):
            raise FactsError(f"malformed distances in {sr.path(base + '/distance')}: {excerpt(dist_text)}")
        distances = [int(x) for x in dist_text.split()]
        nodes.append(
            {
                "id": nid,
                "cpus": format_cpulist(cpus & online),
                "distances": distances,
                "memory_kb": _node_memtotal(sr, base),
            }
        )
    return nodes


def _node_memtotal(sr: Sysroot, base: str) -> int | None:
    for line in (sr.read(f"{base}/meminfo", "") or "").splitlines():
        if "MemTotal:" in line:
            parts = line.split("MemTotal:")[1].split()
            if parts and is_number(parts[0]):
                return int(parts[0])
            raise FactsError(f"malformed MemTotal in {sr.path(base + '/meminfo')}: {excerpt(line.strip())}")
    return None


def read_l3_groups(sr: Sysroot, online: frozenset[int]) -> list[dict]:
    """L3 cache domains (AMD CCDs/CCXs, Intel sockets or SNC halves)."""
    groups: dict[frozenset[int], dict] = {}
    covered: set[int] = set()
    level3_index: dict[int, int | None] = {}
    for cpu in sorted(online):
        if cpu in covered:
            continue  # already in a group found through another CPU's shared list
        base = _cpu_rel(cpu, "cache")
        idx = _level3_index(sr, base, level3_index)
        if idx is None:
            continue
        leaf = f"{base}/index{idx}"
        shared = sr.read_cpulist(f"{leaf}/shared_cpu_list")
        if shared is None:
            shared = sr.read_mask(f"{leaf}/shared_cpu_map", frozenset({cpu}))
        shared = frozenset(shared) | {cpu}
        covered |= shared
        if shared not in groups:
            groups[shared] = {"id": sr.read_int(f"{leaf}/id"), "size": sr.read(f"{leaf}/size")}
    out = []
    for n, (cpus, meta) in enumerate(sorted(groups.items(), key=lambda kv: min(kv[0]))):
        out.append(
            {
                "id": meta["id"] if meta["id"] is not None else n,
                "cpus": format_cpulist(cpus & online),
                "size": meta["size"],
            }
        )
    return out


def _level3_index(sr: Sysroot, base: str, memo: dict[int, int | None]) -> int | None:
    """Which ``cache/indexN`` is the L3: the same N on every CPU of a machine, checked once."""
    indexes = sr.numbered(base, "index")
    key = len(indexes)
    if key not in memo:
        memo[key] = next((i for i in indexes if sr.read_int(f"{base}/index{i}/level") == 3), None)
    idx = memo[key]
    if idx is not None and sr.read_int(f"{base}/index{idx}/level") != 3:
        memo.pop(key)  # unusual machine: numbering differs per CPU, look again
        return next((i for i in indexes if sr.read_int(f"{base}/index{i}/level") == 3), None)
    return idx
