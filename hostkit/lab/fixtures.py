"""Sysroot fixtures: trees of real ``/proc`` and ``/sys`` file names standing in for other machines.

Two kinds:

* **generated** from a small spec (``fixture_specs.yml``): sockets, cores,
  threads, NUMA nodes per socket, cores per L3, NICs, cmdline, sysctls;
* **captured** from a real machine (``captures/NAME.json``, written by
  :func:`hostkit.facts.capture.capture`).

``materialize(name, dest)`` writes either kind to a directory. The lab
(:mod:`hostkit.lab.lab`) gives every lab host its own writable copy.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from hostkit.core.cpulist import format_cpulist, format_mask
from hostkit.errors import BadInput

SPECS_FILE = "fixture_specs.yml"
BOOT_LAYOUTS_FILE = "boot_layouts.yml"
CAPTURES_DIR = "captures"


@dataclass
class Tree:
    """Files, symlinks and empty directories of a sysroot, by relative path."""

    files: dict[str, str] = field(default_factory=dict)
    symlinks: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)

    def put(self, rel: str, content) -> None:
        text = str(content)
        self.files[rel] = text if text.endswith("\n") else text + "\n"

    def write(self, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        for rel in sorted(self.dirs):
            (dest / rel).mkdir(parents=True, exist_ok=True)
        for rel, text in self.files.items():
            p = dest / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        for rel, target in self.symlinks.items():
            p = dest / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if p.is_symlink() or p.exists():
                p.unlink()
            os.symlink(target, p)


def load_specs() -> dict[str, dict]:
    text = resources.files("hostkit.lab").joinpath(SPECS_FILE).read_text()
    return {k: v for k, v in yaml.safe_load(text).items() if not k.startswith("x-")}  # x-: YAML templates


def capture_names() -> list[str]:
    d = resources.files("hostkit.lab").joinpath(CAPTURES_DIR)
    return sorted(p.name[:-5] for p in d.iterdir() if p.name.endswith(".json"))


def fixture_names() -> list[str]:
    return sorted(load_specs()) + capture_names()


def describe(name: str) -> str:
    specs = load_specs()
    if name in specs:
        return specs[name]["description"]
    if name in capture_names():
        return f"captured from a real machine ({name})"
    raise BadInput(f"unknown fixture {name!r}; known: {', '.join(fixture_names())}")


def materialize(name: str, dest: str | os.PathLike) -> Path:
    """Write fixture ``name`` under ``dest`` (created); returns the path."""
    dest = Path(dest)
    specs = load_specs()
    if name in specs:
        build_tree(specs[name], name).write(dest)
    elif name in capture_names():
        data = json.loads(resources.files("hostkit.lab").joinpath(CAPTURES_DIR).joinpath(f"{name}.json").read_text())
        Tree(files=data["files"], symlinks=data.get("symlinks", {}), dirs=set(data.get("dirs", []))).write(dest)
    else:
        raise BadInput(f"unknown fixture {name!r}; known: {', '.join(fixture_names())}")
    return dest


# --------------------------------------------------------------------------- generation


@dataclass
class _Layout:
    """A spec's CPU numbering: CPU ids thread-major (all first threads, then the siblings), NUMA nodes
    and L3 groups."""

    sockets: int
    cores: int  # per socket
    threads: int  # per core
    nps: int  # NUMA nodes per socket
    single_node: bool
    cores_per_l3: int
    nodes: dict[int, set[int]] = field(default_factory=dict)
    l3_groups: dict[tuple[int, int], set[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, spec: dict) -> _Layout:
        lay = cls(
            spec["sockets"],
            spec["cores_per_socket"],
            spec["threads_per_core"],
            spec["numa_per_socket"],
            spec.get("single_node", False),
            spec["cores_per_l3"],
        )
        for s, c, th in lay.positions():
            cpu = lay.cpu_id(th, s, c)
            lay.nodes.setdefault(lay.node_of(s, c), set()).add(cpu)
            lay.l3_groups.setdefault((s, c // lay.cores_per_l3), set()).add(cpu)
        return lay

    @property
    def ncores(self) -> int:
        return self.sockets * self.cores

    @property
    def ncpus(self) -> int:
        return self.ncores * self.threads

    def cpu_id(self, thread: int, socket: int, core: int) -> int:
        return thread * self.ncores + socket * self.cores + core

    def node_of(self, socket: int, core: int) -> int:
        return 0 if self.single_node else socket * self.nps + core // (self.cores // self.nps)

    def positions(self):
        """(socket, core, thread) of every CPU, socket by socket."""
        return ((s, c, th) for s in range(self.sockets) for c in range(self.cores) for th in range(self.threads))


SYS_CPU = "sys/devices/system/cpu"


def build_tree(spec: dict, name: str) -> Tree:
    """The sysroot of a fixture spec (fixture_specs.yml): /sys, /proc and the /etc the roles edit."""
    t = Tree()
    lay = _Layout.of(spec)
    _put_cpu_dir(t, spec, lay)
    for s, c, th in lay.positions():
        _put_cpu(t, spec, lay, s, c, th)
    _put_nodes(t, spec, lay)
    _put_virtualization(t, spec)
    _put_cpuinfo(t, spec, lay)
    _put_kernel(t, spec, name, len(lay.nodes))
    _put_proc_stat(t, spec, lay)
    _build_irqs_and_nics(t, spec, lay.ncpus, lay.nodes, lay.node_of)
    _put_pci(t, spec)
    _put_etc(t, spec, name)
    return t


def _put_cpu_dir(t: Tree, spec: dict, lay: _Layout) -> None:
    for leaf in ("possible", "present", "online"):
        t.put(f"{SYS_CPU}/{leaf}", format_cpulist(range(lay.ncpus)))
    t.put(f"{SYS_CPU}/offline", "")
    t.put(f"{SYS_CPU}/isolated", _cmdline_isolcpus(spec["cmdline"]))
    t.put(f"{SYS_CPU}/kernel_max", 8191)
    t.put(f"{SYS_CPU}/smt/control", spec["smt_control"])
    t.put(f"{SYS_CPU}/smt/active", 1 if lay.threads > 1 else 0)
    if spec.get("cpufreq"):
        t.dirs.add(f"{SYS_CPU}/cpufreq")


def _put_cpu(t: Tree, spec: dict, lay: _Layout, s: int, c: int, th: int) -> None:
    """One CPU's directory: topology, caches, cpufreq."""
    cpu = lay.cpu_id(th, s, c)
    package = [lay.cpu_id(x, s, k) for k in range(lay.cores) for x in range(lay.threads)]
    siblings = [lay.cpu_id(x, s, c) for x in range(lay.threads)]
    base = f"{SYS_CPU}/cpu{cpu}"
    topo = f"{base}/topology"
    t.put(f"{topo}/physical_package_id", s)
    t.put(f"{topo}/die_id", 0)
    t.put(f"{topo}/core_id", c)
    t.put(f"{topo}/cluster_id", c)
    for leaf, cpus in (
        ("core_cpus", siblings),
        ("thread_siblings", siblings),
        ("core_siblings", package),
        ("package_cpus", package),
        ("die_cpus", package),
        ("cluster_cpus", siblings),
    ):
        t.put(f"{topo}/{leaf}", format_mask(cpus, lay.ncpus))
        t.put(f"{topo}/{leaf}_list", format_cpulist(cpus))
    if cpu != 0:
        t.put(f"{base}/online", 1)
    t.dirs.add(f"{base}/node{lay.node_of(s, c)}")
    _put_caches(t, spec, lay, base, s, c, siblings)
    freq = spec.get("cpufreq")
    if freq:
        fd = f"{base}/cpufreq"
        t.put(f"{fd}/scaling_driver", freq["driver"])
        t.put(f"{fd}/scaling_governor", freq["governor"])
        t.put(f"{fd}/scaling_available_governors", " ".join(freq["available"]))
        t.put(f"{fd}/cpuinfo_max_freq", 3700000)
        t.put(f"{fd}/cpuinfo_min_freq", 1500000)
        t.put(f"{fd}/scaling_max_freq", 3700000)
        t.put(f"{fd}/scaling_min_freq", 1500000)
        t.put(f"{fd}/affected_cpus", cpu)


def _put_caches(t: Tree, spec: dict, lay: _Layout, base: str, s: int, c: int, siblings: list[int]) -> None:
    amd = spec["vendor"] == "AuthenticAMD"
    l3 = sorted(lay.l3_groups[(s, c // lay.cores_per_l3)])
    caches = [  # (level, type, size KiB, shared by, ways)
        (1, "Data", 48, siblings, 12),
        (1, "Instruction", 32, siblings, 8),
        (2, "Unified", 1024 if amd else 2048, siblings, 8 if amd else 16),
        (3, "Unified", spec["l3_size_kb"], l3, 16 if amd else 15),
    ]
    for idx, (level, ctype, size_kb, shared, ways) in enumerate(caches):
        leafdir = f"{base}/cache/index{idx}"
        t.put(f"{leafdir}/level", level)
        t.put(f"{leafdir}/type", ctype)
        t.put(f"{leafdir}/size", f"{size_kb}K")
        t.put(f"{leafdir}/ways_of_associativity", ways)
        t.put(f"{leafdir}/coherency_line_size", 64)
        t.put(f"{leafdir}/physical_line_partition", 1)
        t.put(f"{leafdir}/number_of_sets", size_kb * 1024 // (64 * ways))
        t.put(f"{leafdir}/shared_cpu_map", format_mask(shared, lay.ncpus))
        t.put(f"{leafdir}/shared_cpu_list", format_cpulist(shared))
        t.put(f"{leafdir}/id", c if level < 3 else s * (lay.cores // lay.cores_per_l3) + c // lay.cores_per_l3)


def _put_nodes(t: Tree, spec: dict, lay: _Layout) -> None:
    sys_node = "sys/devices/system/node"
    node_ids = sorted(lay.nodes)
    for leaf in ("possible", "online", "has_cpu", "has_memory", "has_normal_memory"):
        t.put(f"{sys_node}/{leaf}", format_cpulist(node_ids))
    for n in node_ids:
        t.put(f"{sys_node}/node{n}/cpumap", format_mask(lay.nodes[n], lay.ncpus))
        t.put(f"{sys_node}/node{n}/cpulist", format_cpulist(lay.nodes[n]))
        t.put(
            f"{sys_node}/node{n}/distance", " ".join(str(_distance(a, n, lay.nps, lay.single_node)) for a in node_ids)
        )
        mem = spec["memory_per_node_kb"]
        t.put(
            f"{sys_node}/node{n}/meminfo",
            f"Node {n} MemTotal:       {mem} kB\nNode {n} MemFree:        {mem * 9 // 10} kB\n",
        )


def _put_virtualization(t: Tree, spec: dict) -> None:
    for key, value in (spec.get("dmi") or {}).items():
        t.put(f"sys/class/dmi/id/{key}", value)
    t.put(
        "sys/devices/system/clocksource/clocksource0/available_clocksource",
        "kvm-clock tsc acpi_pm" if spec.get("hypervisor") == "kvm" else "tsc hpet acpi_pm",
    )


# A BAR's kind -> the flag bits /proc/bus/pci/devices ORs into its start (PCI_BASE_ADDRESS_SPACE_IO,
# PCI_BASE_ADDRESS_MEM_PREFETCH).
_BAR_FLAGS = {"io": 0x1, "mem": 0x0, "pmem": 0x8}


def _put_pci(t: Tree, spec: dict) -> None:
    """A spec's ``pci:`` devices as the kernel shows them: /sys/devices/pci0000:00/<slot> with its ID
    files, linked from /sys/bus/pci/devices, and /proc/bus/pci/devices (drivers/pci/proc.c
    show_device(): bus and devfn, vendor and device, irq, 7 region starts with their flag bits and
    7 sizes, the driver's name)."""
    lines = []
    for dev in spec.get("pci") or []:
        slot = dev["slot"]
        _, bus, devfn = slot.split(":")
        number, function = devfn.split(".")
        vendor, device = dev["id"].split(":")
        sub_vendor, sub_device = dev.get("subsystem", "0000:0000").split(":")
        base = f"sys/devices/pci0000:{bus}/{slot}"
        for leaf, value in (
            ("vendor", f"0x{vendor}"),
            ("device", f"0x{device}"),
            ("subsystem_vendor", f"0x{sub_vendor}"),
            ("subsystem_device", f"0x{sub_device}"),
            ("class", dev["class"]),
            ("revision", f"0x{dev.get('revision', 0):02x}"),
            ("irq", dev.get("irq", 0)),
            ("numa_node", -1),
        ):
            t.put(f"{base}/{leaf}", value)
        t.symlinks[f"sys/bus/pci/devices/{slot}"] = f"../../../devices/pci0000:{bus}/{slot}"
        if dev.get("driver"):
            t.dirs.add(f"sys/bus/pci/drivers/{dev['driver']}")
            t.symlinks[f"{base}/driver"] = f"../../../bus/pci/drivers/{dev['driver']}"
        regions = [(_BAR_FLAGS[kind] | start, size) for kind, start, size in dev.get("regions", [])]
        regions += [(0, 0)] * (7 - len(regions))
        lines.append(
            f"{bus}{int(number, 16) << 3 | int(function):02x}\t{vendor}{device}\t{dev.get('irq', 0):x}"
            + "".join(f"\t{start:16x}" for start, _ in regions)
            + "".join(f"\t{size:16x}" for _, size in regions)
            + f"\t{dev.get('driver', '')}"
        )
    if lines:
        t.put("proc/bus/pci/devices", "\n".join(lines))


CPUINFO_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht "
    "syscall nx lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid pni ssse3 fma cx16 sse4_1 "
    "sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm abm avx2 bmi1 bmi2"
)


def _put_cpuinfo(t: Tree, spec: dict, lay: _Layout) -> None:
    flags = CPUINFO_FLAGS + (" hypervisor" if spec.get("hypervisor") else "")
    blocks = []
    for cpu in range(lay.ncpus):
        th, rem = divmod(cpu, lay.ncores)
        s, c = divmod(rem, lay.cores)
        blocks.append(
            f"processor\t: {cpu}\nvendor_id\t: {spec['vendor']}\ncpu family\t: {spec['family']}\n"
            f"model\t\t: {spec['model']}\nmodel name\t: {spec['model_name']}\nstepping\t: 1\n"
            f"cpu MHz\t\t: 2250.000\ncache size\t: 1024 KB\nphysical id\t: {s}\nsiblings\t: {lay.cores * lay.threads}\n"
            f"core id\t\t: {c}\ncpu cores\t: {lay.cores}\napicid\t\t: {s * 256 + c * 2 + th}\n"
            f"fpu\t\t: yes\nflags\t\t: {flags}\nbogomips\t: 4500.00\n"
        )
    t.put("proc/cpuinfo", "\n".join(blocks))


def _put_kernel(t: Tree, spec: dict, name: str, nnodes: int) -> None:
    t.put("proc/cmdline", spec["cmdline"])
    t.put("proc/sys/kernel/osrelease", spec["release"])
    t.put("proc/sys/kernel/hostname", name)
    sysctl = dict(spec.get("sysctl") or {})
    t.put("proc/sys/kernel/sched_rt_runtime_us", sysctl.get("sched_rt_runtime_us", 950000))
    t.put("proc/sys/kernel/sched_rt_period_us", sysctl.get("sched_rt_period_us", 1000000))
    t.put("proc/sys/kernel/numa_balancing", sysctl.get("numa_balancing", 1 if nnodes > 1 else 0))
    t.put("proc/sys/kernel/timer_migration", sysctl.get("timer_migration", 1))
    t.put("proc/sys/vm/zone_reclaim_mode", sysctl.get("zone_reclaim_mode", 0))
    t.put("proc/sys/vm/stat_interval", sysctl.get("stat_interval", 1))


def _put_proc_stat(t: Tree, spec: dict, lay: _Layout) -> None:
    """/proc/stat with the spec's steal share on every CPU."""
    steal_pct = float(spec.get("steal_percent", 0.0))
    lines = []
    tot = [0] * 10
    for cpu in range(lay.ncpus):
        user, system, idle = 120000 + cpu * 7, 30000 + cpu * 3, 900000
        busy = user + system + idle
        steal = int(busy * steal_pct / (100 - steal_pct)) if steal_pct else 0
        vals = [user, 0, system, idle, 500, 0, 200, steal, 0, 0]
        tot = [a + b for a, b in zip(tot, vals)]
        lines.append(f"cpu{cpu} " + " ".join(map(str, vals)))
    t.put(
        "proc/stat",
        "cpu  "
        + " ".join(map(str, tot))
        + "\n"
        + "\n".join(lines)
        + "\nintr 0\nctxt 123456789\nbtime 1764400000\nprocesses 4242\nprocs_running 1\nprocs_blocked 0\n",
    )


def _put_etc(t: Tree, spec: dict, name: str) -> None:
    """/etc: what the roles will edit. The boot config holds what the host booted with (beyond
    BOOT_IMAGE/root/ro), so a host tuned by another tool carries its isolcpus= in /etc/default/grub
    as well."""
    if spec.get("boot"):  # a distribution's real boot loader layout (boot_layouts.yml)
        _put_boot_layout(t, spec["boot"])
    else:
        extra = " ".join(
            tok
            for tok in spec["cmdline"].split()
            if not tok.startswith(("BOOT_IMAGE=", "root=")) and tok not in ("ro", "quiet")
        )
        t.put(
            "etc/default/grub",
            'GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_DISTRIBUTOR="Debian"\n'
            f'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="{extra}"\n',
        )
        t.dirs.add("etc/default/grub.d")
    if spec.get("irqbalance"):  # Debian's file; {banned_cpus: MASK}: an old ban left set in it
        old_ban = (spec["irqbalance"] or {}).get("banned_cpus") if isinstance(spec["irqbalance"], dict) else None
        t.put(
            "etc/default/irqbalance",
            IRQBALANCE_DEBIAN
            if old_ban is None
            else IRQBALANCE_DEBIAN.replace("\n#IRQBALANCE_BANNED_CPUS=\n", f"\nIRQBALANCE_BANNED_CPUS={old_ban}\n"),
        )
    for program in spec.get("programs") or []:  # what facts.services looks for; never run from the tree
        t.put(f"usr/bin/{program}", f"#!/bin/sh\n# {program} of a fixture host: facts see it installed\nexit 1\n")
    for state_file, policy in (spec.get("kubelet_state") or {}).items():
        t.put(f"var/lib/kubelet/{state_file}", json.dumps({"policyName": policy, "defaultCpuSet": "", "checksum": 1}))
    t.put("etc/hostname", name)
    t.dirs.update({"etc/sysctl.d", "var/lib"})


# /etc/default/irqbalance as Debian 12 ships it (irqbalance 1.9.2-1: upstream misc/irqbalance.env,
# IRQBALANCE_ARGS commented out).
IRQBALANCE_DEBIAN = """# irqbalance is a daemon process that distributes interrupts across
# CPUs on SMP systems.  The default is to rebalance once every 10
# seconds.  This is the environment file that is specified to systemd via the
# EnvironmentFile key in the service unit file (or via whatever method the init
# system you're using has).

#
# IRQBALANCE_ONESHOT
#    After starting, wait for ten seconds, then look at the interrupt
#    load and balance it once; after balancing exit and do not change
#    it again.
#
#IRQBALANCE_ONESHOT=

#
# IRQBALANCE_BANNED_CPUS
#    64 bit bitmask which allows you to indicate which CPUs should
#    be skipped when reblancing IRQs.  CPU numbers which have their
#    corresponding bits set to one in this mask will not have any
#    IRQs assigned to them on rebalance.
#
#IRQBALANCE_BANNED_CPUS=

#
# IRQBALANCE_BANNED_CPULIST
#    The CPUs list which allows you to indicate which CPUs should
#    be skipped when reblancing IRQs. CPU numbers in CPUs list will
#    not have any IRQs assigned to them on rebalance.
#
#      The format of CPUs list is:
#        <cpu number>,...,<cpu number>
#      or a range:
#        <cpu number>-<cpu number>
#      or a mixture:
#        <cpu number>,...,<cpu number>-<cpu number>
#
#IRQBALANCE_BANNED_CPULIST=

#
# IRQBALANCE_ARGS
#    Append any args here to the irqbalance daemon as documented in the man
#    page.
#
#IRQBALANCE_ARGS=
"""

GRUBENV_SIZE = 1024  # grub-editenv's DEFAULT_ENVBLK_SIZE


def _put_boot_layout(t: Tree, name: str) -> None:
    """The files of boot layout ``name``: as written, plus a GRUB environment block padded as
    grub-editenv pads it (no trailing newline: the block is exactly 1024 bytes)."""
    layouts = yaml.safe_load(resources.files("hostkit.lab").joinpath(BOOT_LAYOUTS_FILE).read_text())
    if name not in layouts:
        raise BadInput(f"unknown boot layout {name!r}; known: {', '.join(sorted(layouts))}")
    layout = layouts[name]
    for rel, text in (layout.get("files") or {}).items():
        t.files[rel] = text
    t.dirs.update(layout.get("dirs") or [])
    env = layout.get("grubenv")
    if env is not None:
        from hostkit.core.boot_loader import format_grubenv

        t.files["boot/grub2/grubenv"] = format_grubenv([(k, str(v)) for k, v in env.items()], GRUBENV_SIZE)


def _distance(a: int, b: int, nps: int, single: bool) -> int:
    if a == b:
        return 10
    if single:
        return 10
    return 12 if a // nps == b // nps else 32


def _cmdline_isolcpus(cmdline: str) -> str:
    for tok in cmdline.split():
        if tok.startswith("isolcpus="):
            parts = [p for p in tok.split("=", 1)[1].split(",") if p not in ("nohz", "domain", "managed_irq")]
            return ",".join(parts)
    return ""


def _build_irqs_and_nics(t: Tree, spec: dict, ncpus: int, nodes: dict[int, set[int]], node_of) -> None:
    """Legacy IRQs, NIC queues (MSI-X) and NVMe managed IRQs in /proc/interrupts and /proc/irq."""
    allcpus = set(range(ncpus))
    irqs: list[
        tuple[int, str, str, str, set[int], set[int], int]
    ] = []  # irq, chip, hwirq, name, affinity, effective, node
    for irq, hw, name in (
        (0, "2-edge", "timer"),
        (1, "1-edge", "i8042"),
        (4, "4-edge", "ttyS0"),
        (8, "8-edge", "rtc0"),
        (9, "9-fasteoi", "acpi"),
    ):
        irqs.append((irq, "IO-APIC", hw, name, allcpus, {0}, -1))
    nxt = 24
    for nic in spec.get("nics") or []:
        socket = nic.get("socket")
        node = nic.get("node", node_of(socket, 0) if socket is not None else -1)
        local = nodes.get(node, allcpus) if node >= 0 else allcpus
        pci = nic["pci"]
        bus = pci.split(":")[1]
        devrel = f"sys/devices/pci0000:{bus}/{pci}"
        prefix = nic.get("driver_irq_prefix")
        nic_irqs = []
        for q in range(nic["queues"]):
            qname = f"{prefix}-{nic['name']}-rxtx-{q}" if prefix else f"{nic['name']}-TxRx-{q}"
            cpu = sorted(local)[q % len(local)]
            irqs.append((nxt, f"PCI-MSIX-{pci}", f"{q}-edge", qname, set(local), {cpu}, node))
            nic_irqs.append(nxt)
            nxt += 1
        if nic.get("virtio"):
            devrel_net = f"{devrel}/virtio1/net/{nic['name']}"
            t.put(f"{devrel}/virtio1/vendor", "0x1af4")
        else:
            devrel_net = f"{devrel}/net/{nic['name']}"
        t.put(f"{devrel}/numa_node", node)
        t.put(f"{devrel}/local_cpulist", format_cpulist(local))
        t.put(f"{devrel}/local_cpus", format_mask(local, ncpus))
        for i in nic_irqs:
            t.put(f"{devrel}/msi_irqs/{i}", "msix")
        t.put(f"{devrel_net}/address", "0c:42:a1:00:00:%02x" % (len(t.symlinks) + 1))
        t.put(f"{devrel_net}/operstate", "up")
        t.symlinks[f"{devrel_net}/device"] = "../../../virtio1" if nic.get("virtio") else "../../../" + pci
        t.symlinks[f"sys/class/net/{nic['name']}"] = "../../" + devrel_net[len("sys/") :]
    t.dirs.add("sys/class/net")
    nvme = spec.get("nvme")
    if nvme:
        cpus_sorted = sorted(allcpus)
        per = max(1, len(cpus_sorted) // nvme["queues"])
        irqs.append((nxt, f"PCI-MSIX-{nvme['pci']}", "0-edge", "nvme0q0", allcpus, {0}, 0))
        nxt += 1
        for q in range(nvme["queues"]):
            chunk = set(cpus_sorted[q * per : (q + 1) * per]) or {cpus_sorted[-1]}
            irqs.append((nxt, f"PCI-MSIX-{nvme['pci']}", f"{q + 1}-edge", f"nvme0q{q + 1}", chunk, {min(chunk)}, 0))
            t.put(f"proc/irq/{nxt}/.managed", "1")  # hostkit-lab marker: the kernel refuses writes (EIO)
            nxt += 1

    header = " " * 4 + "".join(f"{f'CPU{c}':>11}" for c in range(ncpus))
    rows = [header]
    for irq, chip, hw, name, aff, eff, node in irqs:
        counts = "".join(f"{(1000 + irq if c in eff else 0):>11}" for c in range(ncpus))
        rows.append(f"{irq:>3}:{counts}  {chip:>9}  {hw}  {name}")
        base = f"proc/irq/{irq}"
        t.put(f"{base}/smp_affinity", format_mask(aff, ncpus))
        t.put(f"{base}/smp_affinity_list", format_cpulist(aff))
        t.put(f"{base}/effective_affinity", format_mask(eff, ncpus))
        t.put(f"{base}/effective_affinity_list", format_cpulist(eff))
        t.put(f"{base}/node", node)
        t.dirs.add(f"{base}/{name}")
    for label, text in (
        ("NMI", "Non-maskable interrupts"),
        ("LOC", "Local timer interrupts"),
        ("RES", "Rescheduling interrupts"),
    ):
        rows.append(f"{label}:" + "".join(f"{100:>11}" for _ in range(ncpus)) + f"   {text}")
    rows.append("ERR:          0")
    t.put("proc/interrupts", "\n".join(rows))
    t.put("proc/irq/default_smp_affinity", format_mask(allcpus, ncpus))
