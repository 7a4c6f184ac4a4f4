"""The profile schema: every key, its type and its bounds, checked on load.

A profile is a YAML mapping. Unknown keys and wrong types are errors naming
the key (``kubelet.cpu_manager_policy: expected one of ...``). Inventory
overrides (``hostkit_overrides``) go through the same checks.
"""

from __future__ import annotations

from hostkit.core.cpulist import parse_cpulist
from hostkit.core.sysroot import excerpt
from hostkit.errors import BadInput, CpulistError
from hostkit.jsonfile import check_number
from hostkit.tunables import (
    TUNED_MODES,
    KernelArg,
    KthreadPlacement,
    PmQos,
    SysfsValue,
    profile_sections,
    tuned_sysctls,
)

ISOLCPUS_FLAGS = ("domain", "managed_irq", "nohz")
GOVERNORS = ("performance", "powersave", "schedutil", "ondemand", "conservative", "userspace")
KERNEL_ARG_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,=:/")


def _entry_field(e: KernelArg | SysfsValue | PmQos | KthreadPlacement) -> Field:
    """The profile field of one entry of hostkit.tunables (a kernel argument, a /sys value, the PM QoS
    ceiling, kernel-thread placement): a bool switch, one of its choices, or an integer within its bounds."""
    if isinstance(e, KthreadPlacement):
        return Field("bool", e.default, doc=e.doc)
    if isinstance(e, PmQos):
        return Field("int", e.default, min=e.min, max=e.max, nullable=True, doc=e.doc)
    if isinstance(e, KernelArg):
        if e.choices:
            return Field("str", e.default, choices=e.choices, nullable=True, doc=e.doc)
        if e.int_range:
            return Field("int", e.default, min=e.int_range[0], max=e.int_range[1], nullable=True, doc=e.doc)
        return Field("bool", e.default, doc=e.doc)
    if e.partition:
        return Field("bool", e.default, doc=e.doc)
    if e.choices:
        return Field("str", e.default, choices=e.choices, nullable=True, doc=e.doc)
    return Field("int", e.default, min=e.min, max=e.max, nullable=True, doc=e.doc)


class Field:
    def __init__(self, kind, default=None, *, choices=None, min=None, max=None, nullable=False, doc=""):
        self.kind, self.default, self.choices = kind, default, choices
        self.min, self.max, self.nullable, self.doc = min, max, nullable, doc


# kind: "int", "float", "bool", "str", "cpulist", "flags", "kernel_args", or a nested dict of Fields.
SCHEMA: dict = {
    "name": Field("str", doc="profile name"),
    "description": Field("str", "", doc="one line for people"),
    "extends": Field("str", None, nullable=True, doc="name or path of a profile this one builds on"),
    "isolation": Field("bool", True, doc="isolate inference CPUs (isolcpus, nohz_full, rcu_nocbs, irqaffinity)"),
    "allow_virtual": Field("bool", False, doc="allow isolation on a virtual machine without --force"),
    "reserve_per_node": Field("int", 2, min=1, max=64, doc="housekeeping physical cores on every NUMA node"),
    "irq_cores": Field("int", 0, min=0, max=64, doc="extra housekeeping cores on the NIC's NUMA node(s) for IRQs"),
    "isolcpus_flags": Field(
        "flags",
        ["managed_irq", "domain"],
        doc="isolcpus= flags; domain is dropped where kubelet's static CPU manager hands the isolated CPUs to pods",
    ),
    "cmdline_extra": Field("kernel_args", [], doc="extra kernel arguments appended to the boot config"),
    # One key per tuned sysctl of hostkit.tunables: its bounds, and its default (null: left alone).
    "sysctl": {
        s.key: Field(s.kind, s.default, min=s.min, max=s.max, nullable=True, doc=s.doc) for s in tuned_sysctls()
    },
    # One key per entry of hostkit.tunables (kernel arguments, /sys values, the PM QoS ceiling), by section:
    # kernel_noise, cpu_power, memory. Kernel arguments are written only where the plan isolates CPUs.
    **{
        section: {getattr(e, "name", None) or e.key: _entry_field(e) for e in entries}
        for section, entries in profile_sections().items()
    },
    "stalld": Field(
        "str",
        "ignore",
        choices=("use", "ignore"),
        doc="use: where CPUs are isolated and stalld runs, RT throttling is off "
        "(sched_rt_runtime_us -1) and stalld boosts starved kernel threads; "
        "ignore: sysctl kernel.sched_rt_runtime_us stands",
    ),
    "tuned": Field(
        "str",
        None,
        choices=TUNED_MODES,
        nullable=True,
        doc="drive: a hostkit tuned profile (include cpu-partitioning or latency-performance, hostkit's "
        "values) made active; neutralize: tuned runs profile hostkit-neutral, which tunes nothing; "
        "ignore: tuned left alone; null: drive where tuned is active, else ignore",
    ),
    "governor": Field(
        "str",
        "performance",
        choices=GOVERNORS,
        nullable=True,
        doc="cpufreq governor for every CPU; null leaves it alone",
    ),
    "irq_affinity": Field(
        "bool",
        True,
        doc="steer IRQs to the IRQ CPUs: hostkit pins every movable IRQ, or a "
        "running irqbalance places them (one owner)",
    ),
    "irqbalance": Field(
        "str",
        "banned",
        choices=("banned", "restore", "leave"),
        doc="banned: IRQBALANCE_BANNED_CPULIST = every CPU but the IRQ CPUs; restore: give IRQs back to irqbalance",
    ),
    "containerd": {
        "enabled": Field("bool", True, doc="render /etc/containerd/config.toml (where containerd is installed)"),
        "systemd_cgroup": Field("bool", True, doc="runc SystemdCgroup = true"),
        "nri": Field("bool", True, doc="enable NRI where the version supports it"),
    },
    "kubelet": {
        "enabled": Field("bool", True, doc="write the kubelet configuration drop-in (where kubelet is installed)"),
        "preseed": Field(
            "bool",
            False,
            doc="write the drop-in even where kubelet is not installed yet (a node "
            "tuned before Kubernetes is installed); nothing is restarted",
        ),
        "cpu_manager_policy": Field("str", "static", choices=("static", "none")),
        "full_pcpus_only": Field("bool", True),
        "topology_manager_policy": Field(
            "str", "single-numa-node", choices=("none", "best-effort", "restricted", "single-numa-node")
        ),
        "topology_manager_scope": Field("str", "pod", choices=("pod", "container")),
        "memory_manager_policy": Field("str", "Static", choices=("None", "Static")),
        "reserved_memory_mib_per_node": Field("int", 1024, min=0, max=1048576),
    },
    "bios": {
        "numa_per_socket": Field("int", None, min=0, max=16, nullable=True, doc="expected NPS/SNC nodes per socket"),
        "smt": Field("bool", None, nullable=True, doc="expected SMT state; null: no expectation"),
        "c_states": Field(
            "str",
            None,
            choices=("off", "shallow", "on"),
            nullable=True,
            doc="processor C-states set through the BMC (hostkit bios): off, shallow (C1/C1E only) or on",
        ),
        "turbo": Field("bool", None, nullable=True, doc="turbo/boost set through the BMC (hostkit bios)"),
        "memory_interleave": Field(
            "bool",
            None,
            nullable=True,
            doc="memory interleaved across NUMA nodes (node/socket interleaving, which hides NUMA from the OS) "
            "set through the BMC; false for NUMA-placed inference (channel interleaving is left alone)",
        ),
        "pcie_aspm": Field(
            "str",
            None,
            choices=("off", "l1", "auto"),
            nullable=True,
            doc="PCIe Active State Power Management set through the BMC: off (no link power states), l1 or auto",
        ),
        "power_profile": Field(
            "str",
            None,
            choices=("performance", "custom"),
            nullable=True,
            doc="the BIOS's system power profile set through the BMC: performance (the vendor's maximum-performance "
            "preset) or custom (the preset that leaves C-states, turbo and ASPM to their own settings)",
        ),
        "min_memory_channels_per_socket": Field(
            "int", None, min=1, max=24, nullable=True, doc="populated memory channels every socket must have"
        ),
        "all_memory_channels": Field(
            "bool", False, doc="every memory channel of every socket populated (from the SMBIOS memory devices)"
        ),
        "min_memory_speed_mts": Field(
            "int", None, min=1, max=20000, nullable=True, doc="slowest populated DIMM's configured speed, MT/s"
        ),
        "enforce": Field("bool", True, doc="a failed BIOS check fails the host (else a warning)"),
    },
    "smoke": {
        "transport": Field("str", "shm", choices=("shm", "socket")),
        "target_p999_ms": Field("float", 1.0, min=0.001, max=100000.0),
    },
}

# Plan values an inventory may pin through hostkit_overrides, beside any profile key.
PLAN_OVERRIDES = {
    "isolated": Field("cpulist", doc="pin the isolated CPUs"),
    "housekeeping": Field("cpulist", doc="pin the housekeeping CPUs"),
    "irq_cpus": Field("cpulist", doc="pin the CPUs IRQs go to"),
}


def defaults(schema: dict = SCHEMA) -> dict:
    out = {}
    for key, f in schema.items():
        out[key] = defaults(f) if isinstance(f, dict) else _copy(f.default)
    return out


def _copy(v):
    return list(v) if isinstance(v, list) else v


def validate(data, schema: dict = SCHEMA, prefix: str = "", source: str = "profile") -> dict:
    """Check a (partial) mapping against the schema; returns it with values normalised."""
    if not isinstance(data, dict):
        raise BadInput(f"{source}: {prefix.rstrip('.') or 'top level'} must be a mapping, got {type(data).__name__}")
    out = {}
    for key, value in data.items():
        where = f"{prefix}{key}"
        if key not in schema:
            known = ", ".join(sorted(schema))
            raise BadInput(f"{source}: unknown key {excerpt(where)} (known: {known})")
        f = schema[key]
        if isinstance(f, dict):
            out[key] = validate(value, f, where + ".", source)
        else:
            out[key] = check_value(value, f, where, source)
    return out


def check_value(value, f: Field, where: str, source: str):
    if value is None:
        if f.nullable or f.default is None:
            return None
        raise BadInput(f"{source}: {where} must not be null")
    kind = f.kind
    if kind == "bool":
        if not isinstance(value, bool):
            raise BadInput(f"{source}: {where} must be true or false, got {excerpt(value)}")
    elif kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadInput(f"{source}: {where} must be an integer, got {excerpt(value)}")
        check_number(value, f"{source}: {where}")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadInput(f"{source}: {where} must be a number, got {excerpt(value)}")
        value = float(check_number(value, f"{source}: {where}"))
    elif kind == "str":
        if not isinstance(value, str):
            raise BadInput(f"{source}: {where} must be a string, got {excerpt(value)}")
    elif kind == "cpulist":
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(check_number(value, f"{source}: {where}"))
        if not isinstance(value, str):
            raise BadInput(f'{source}: {where} must be a cpulist string like "8-63", got {excerpt(value)}')
        try:
            parse_cpulist(value)
        except CpulistError as exc:
            raise BadInput(f"{source}: {where}: {exc}") from None
    elif kind == "flags":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise BadInput(f"{source}: {where} must be a list of strings, got {excerpt(value)}")
        bad = [v for v in value if v not in ISOLCPUS_FLAGS]
        if bad:
            raise BadInput(f"{source}: {where}: unknown isolcpus flag(s) {bad} (known: {', '.join(ISOLCPUS_FLAGS)})")
    elif kind == "kernel_args":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise BadInput(f"{source}: {where} must be a list of kernel arguments, got {excerpt(value)}")
        for arg in value:
            if not arg or not set(arg) <= KERNEL_ARG_CHARS:
                raise BadInput(
                    f"{source}: {where}: {excerpt(arg)} is not a plain kernel argument "
                    "(letters, digits and _-.,=:/ only)"
                )
    if f.choices is not None and value not in f.choices:
        raise BadInput(f"{source}: {where} must be one of {', '.join(map(str, f.choices))}; got {excerpt(value)}")
    if f.min is not None and value < f.min:
        raise BadInput(f"{source}: {where} must be >= {f.min}, got {excerpt(value)}")
    if f.max is not None and value > f.max:
        raise BadInput(f"{source}: {where} must be <= {f.max}, got {excerpt(value)}")
    return value


def merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def doc_table(schema: dict = SCHEMA, prefix: str = "") -> list[tuple[str, str, str]]:
    """(key, default, meaning) rows for the documentation."""
    rows = []
    for key, f in schema.items():
        if isinstance(f, dict):
            rows += doc_table(f, f"{prefix}{key}.")
        else:
            rows.append(
                (
                    f"{prefix}{key}",
                    repr(f.default),
                    f.doc + (f" ({'/'.join(map(str, f.choices))})" if f.choices else ""),
                )
            )
    return rows
