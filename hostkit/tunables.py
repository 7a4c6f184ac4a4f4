"""One declaration per tunable hostkit manages, and per file its roles write: the single table.

Everything else reads this table instead of keeping its own list:

* the profile schema (:mod:`hostkit.profiles.schema`): every :class:`Sysctl` with a ``role`` is a
  key under ``sysctl:`` with this type, bounds and default (``None``: the kernel's value is left
  alone, so a profile that does not name it changes nothing);
* the facts (:mod:`hostkit.facts.kernel`) read every :class:`Sysctl` from ``/proc/sys`` under the
  sysroot into ``facts["kernel"][<fact>]``; ``hostkit facts capture`` takes the same files;
* the planner puts a profile's non-null sysctls into ``plan["sysctl"]``;
* the roles: ``scripts/role_tunables.py`` writes each writing role's ``__<role>_sysctls`` (path and
  bounds) into ``roles/<role>/vars/main.yml``; ``tests/unit/test_tunables.py`` checks that it is fresh
  and that the roles' path defaults are the :class:`ManagedFile` defaults;
* the audit compares ``plan["sysctl"]`` with the facts by each tunable's ``kind``
  (:func:`hostkit.core.values.normalise`) and reads the files of :func:`role_paths` (an
  inventory's override of a role path is where the audit looks, as the role writes there);
* adoption (:mod:`hostkit.agent.adopt`) records the values of :func:`adopted_values` and the files
  of :func:`adopted_patterns`; rollback (:mod:`hostkit.agent.rollback`) runs the ``follow_up`` of a
  restored file.

Adding a tunable is one entry here plus, when no role writes its kind yet, that role's task: see
``docs/dev/architecture.md`` ("Adding a tunable"). This module ships to hosts (adopt, facts and
rollback run there): standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from hostkit.core.boot_loader import TUNED_BOOTCMDLINE

# tuned's modes (profile key ``tuned``; hostkit/plan/tuned.py decides which applies).
TUNED_MODES = ("drive", "neutralize", "ignore")

ROLE_RT = "rt_runtime"
ROLE_SYSCTL = "numa_sysctl"


@dataclass(frozen=True)
class Sysctl:
    """A kernel value under ``/proc/sys``, read by facts and, with a ``role``, tuned by profiles."""

    key: str  # "kernel.sched_rt_runtime_us": the profile key (under sysctl:), the sysctl.d name, the plan key
    doc: str
    role: str | None = None  # the role that writes it (runtime + its sysctl.d file); None: facts only
    default: int | None = None  # profile default; None leaves the kernel's value alone
    min: int | None = None
    max: int | None = None
    kind: str = "int"  # how its text compares (hostkit.core.values.normalise)

    @property
    def fact(self) -> str:
        """Its name in ``facts["kernel"]``: the last part of the key."""
        return self.key.rsplit(".", 1)[1]

    @property
    def proc_path(self) -> str:
        """Where the kernel exposes it, absolute on the host (``/proc/sys/kernel/...``)."""
        return "/proc/sys/" + self.key.replace(".", "/")


SYSCTLS: tuple[Sysctl, ...] = (
    Sysctl(
        "kernel.sched_rt_runtime_us",
        "RT budget per period; -1 disables throttling; never < 900000 here",
        role=ROLE_RT,
        default=950000,
        min=-1,
        max=1000000,
    ),
    Sysctl("kernel.sched_rt_period_us", "RT throttling period (read to judge the budget; not tuned)"),
    Sysctl("kernel.numa_balancing", "automatic NUMA balancing", role=ROLE_SYSCTL, default=0, min=0, max=3),
    Sysctl("kernel.timer_migration", "timer migration to busy CPUs", role=ROLE_SYSCTL, default=0, min=0, max=1),
    Sysctl("vm.zone_reclaim_mode", "reclaim local zone before remote", role=ROLE_SYSCTL, default=0, min=0, max=7),
    Sysctl("vm.stat_interval", "vmstat update interval (s)", role=ROLE_SYSCTL, default=10, min=1, max=3600),
    Sysctl(
        "vm.swappiness",
        "how readily anonymous memory (model weights) is swapped rather than page cache "
        "dropped; null leaves the kernel's value (60)",
        role=ROLE_SYSCTL,
        default=None,
        min=0,
        max=100,
    ),
)

BY_KEY: dict[str, Sysctl] = {s.key: s for s in SYSCTLS}


@dataclass(frozen=True)
class KernelArg:
    """A boot argument a profile controls under its ``section`` (``kernel_noise:``, ``cpu_power:``; the
    ``isolcpus`` role writes the plan's ``cmdline_set``). A bool entry adds ``arg=value`` when true; an
    entry with ``choices`` adds ``arg=<the profile's choice>``, one with ``int_range`` ``arg=<the
    profile's integer>`` (null: left alone). ``cpu_flags``: the ``/proc/cpuinfo`` flags the host must
    show, else the plan leaves the argument out and says why."""

    name: str  # the profile key under its section
    arg: str  # the argument's name on the kernel command line
    value: str | None  # what a true profile value writes (None: a bare flag); unused with choices/int_range
    doc: str
    default: bool | str | int | None = False
    choices: tuple[str, ...] = ()
    cpu_flags: tuple[str, ...] = ()
    section: str = "kernel_noise"  # the profile section holding its key
    int_range: tuple[int, int] | None = None  # an integer argument (arg=<the profile's int>; null: left alone)


KERNEL_ARGS: tuple[KernelArg, ...] = (
    KernelArg(
        "skew_tick",
        "skew_tick",
        "1",
        "skew_tick=1: offset each CPU's periodic tick so the CPUs that still "
        "tick do not contend for the jiffies and hrtimer locks at the same instant",
        default=True,
    ),
    KernelArg(
        "nosoftlockup",
        "nosoftlockup",
        None,
        "nosoftlockup: no soft-lockup detector (its per-CPU hrtimer "
        "would fire on the isolated CPUs, and a FIFO worker that never yields trips it)",
        default=True,
    ),
    KernelArg(
        "nmi_watchdog_off",
        "nmi_watchdog",
        "0",
        "nmi_watchdog=0: no hard-lockup detector (a perf-counter NMI on every CPU, isolated ones included)",
        default=True,
    ),
    KernelArg(
        "tsc_reliable",
        "tsc",
        "reliable",
        "tsc=reliable: no clocksource watchdog checking the TSC "
        "(its timer visits every CPU); only where the CPU reports a constant, nonstop TSC",
        default=True,
        cpu_flags=("constant_tsc", "nonstop_tsc"),
    ),
    KernelArg(
        "transparent_hugepage",
        "transparent_hugepage",
        None,
        "transparent_hugepage=<mode> at boot; null "
        "leaves the kernel's default (khugepaged's scans and compaction stalls are the noise "
        "'never' or 'madvise' avoid)",
        default=None,
        choices=("never", "madvise", "always"),
    ),
    # C-states: a latency ceiling (cpu_power.cpu_dma_latency_us, PM_QOS) keeps deep states off at runtime and
    # is undone by stopping its holder; these boot arguments are for firmware that ignores PM QoS.
    KernelArg(
        "processor_max_cstate",
        "processor.max_cstate",
        None,
        "processor.max_cstate=<n>: acpi_idle "
        "never enters a C-state deeper than n (its exit latency is the wake-up latency of an idle "
        "inference CPU); null leaves the kernel's limit",
        default=None,
        section="cpu_power",
        int_range=(0, 9),
    ),
    KernelArg(
        "intel_idle_max_cstate",
        "intel_idle.max_cstate",
        None,
        "intel_idle.max_cstate=<n>: intel_idle "
        "never enters a C-state deeper than n (0 disables intel_idle, acpi_idle takes over); null leaves "
        "the kernel's limit",
        default=None,
        section="cpu_power",
        int_range=(0, 9),
    ),
    KernelArg(
        "idle_poll",
        "idle",
        "poll",
        "idle=poll: an idle CPU spins instead of entering any C-state "
        "(lowest wake-up latency, full power and heat on every CPU, and a spinning SMT sibling slows "
        "its twin); only when the profile asks",
        default=False,
        section="cpu_power",
    ),
)


ROLE_KERNEL_VALUES = "kernel_values"
ROLE_PM_QOS = "pm_qos"


@dataclass(frozen=True)
class SysfsValue:
    """A runtime kernel value under ``/sys`` a profile controls (key ``key`` under its ``section``),
    written by the ``kernel_values`` role (now, journaled by ``hostkit_values``, and by its boot-time
    unit at every boot). ``path`` may hold ``{cpu}`` (one file per online CPU) or ``{node}`` (one per
    NUMA node with memory); ``offered``: the file beside it listing the values the kernel accepts
    (a value it does not list is left out of the plan, with the reason). ``partition``: the profile
    key is a bool and the value is the plan's housekeeping CPUs as a hex mask. Facts read every
    expanded path into ``facts["sysfs"][key]``; the audit compares the plan with them by ``kind``."""

    key: str
    section: str
    path: str
    kind: str  # hostkit.core.values.normalise: int, str, mask, choice
    doc: str
    default: bool | int | str | None = None
    choices: tuple[str, ...] = ()
    min: int | None = None
    max: int | None = None
    offered: str | None = None
    partition: bool = False
    role: str = ROLE_KERNEL_VALUES

    def paths(self, cpus=(), nodes=()) -> list[str]:
        """Its files on a host with these online CPUs and NUMA nodes (with memory)."""
        if "{cpu}" in self.path:
            return [self.path.format(cpu=c) for c in sorted(cpus)]
        if "{node}" in self.path:
            return [self.path.format(node=n) for n in sorted(nodes)]
        return [self.path]

    def offered_path(self, path: str) -> str | None:
        """The ``offered`` file beside one expanded ``path``."""
        return None if not self.offered else path.rsplit("/", 1)[0] + "/" + self.offered

    @property
    def glob(self) -> str:
        """Every file of it on any host (capture, adoption)."""
        return self.path.replace("{cpu}", "[0-9]*").replace("{node}", "[0-9]*")


_CPUFREQ = "/sys/devices/system/cpu/cpu{cpu}/cpufreq/"
_THP = "/sys/kernel/mm/transparent_hugepage/"
HUGEPAGES_2M = "/sys/devices/system/node/node{node}/hugepages/hugepages-2048kB/nr_hugepages"
HUGEPAGE_KB = 2048

SYSFS_VALUES: tuple[SysfsValue, ...] = (
    SysfsValue(
        "energy_performance_preference",
        "cpu_power",
        _CPUFREQ + "energy_performance_preference",
        "str",
        "energy-performance preference the CPU's own frequency control (intel_pstate, amd-pstate active "
        "mode) follows; only where the driver offers it; null leaves it",
        choices=("performance", "balance_performance", "default", "balance_power", "power"),
        offered="energy_performance_available_preferences",
    ),
    SysfsValue(
        "workqueue_cpumask",
        "kernel_noise",
        "/sys/devices/virtual/workqueue/cpumask",
        "mask",
        "unbound workqueues' kernel workers run on the housekeeping CPUs only",
        default=True,
        partition=True,
    ),
    SysfsValue(
        "writeback_cpumask",
        "kernel_noise",
        "/sys/bus/workqueue/devices/writeback/cpumask",
        "mask",
        "page-cache writeback workers (flushing dirty pages) run on the housekeeping CPUs only",
        default=True,
        partition=True,
    ),
    SysfsValue(
        "thp_enabled",
        "memory",
        _THP + "enabled",
        "choice",
        "transparent hugepages at runtime: always, madvise (only regions that ask, e.g. a model "
        "loader's madvise(MADV_HUGEPAGE)) or never; null leaves it",
        choices=("always", "madvise", "never"),
    ),
    SysfsValue(
        "thp_defrag",
        "memory",
        _THP + "defrag",
        "choice",
        "what a transparent hugepage fault does when no huge page is free: defer never stalls the "
        "faulting thread (kcompactd compacts in the background), always/madvise compact in the fault; "
        "null leaves it",
        choices=("always", "defer", "defer+madvise", "madvise", "never"),
    ),
    SysfsValue(
        "ksm_run",
        "memory",
        "/sys/kernel/mm/ksm/run",
        "int",
        "kernel samepage merging: 0 stops ksmd (merged pages stay merged), 1 runs it, 2 stops it and "
        "unmerges every page; null leaves it",
        min=0,
        max=2,
    ),
    SysfsValue(
        "hugepages_2m_per_node",
        "memory",
        HUGEPAGES_2M,
        "int",
        "2 MiB hugepages reserved on every NUMA node with memory (inference weights in hugetlbfs, "
        "node-local); at most the node's memory less 1 GiB and an eighth; null leaves them",
        min=0,
        max=1 << 24,
    ),
)

SYSFS_BY_KEY: dict[str, SysfsValue] = {v.key: v for v in SYSFS_VALUES}


@dataclass(frozen=True)
class PmQos:
    """The CPU latency ceiling (PM QoS): ``path`` held open with the value written by the ``pm_qos``
    role's boot-time unit (the kernel drops the request when the file is closed), or tuned's
    ``force_latency`` where hostkit drives tuned. Key ``key`` under ``section``; null: no ceiling."""

    key: str
    section: str
    path: str
    doc: str
    default: int | None = None
    min: int = 0
    max: int = 2000000
    role: str = ROLE_PM_QOS


PM_QOS = PmQos(
    "cpu_dma_latency_us",
    "cpu_power",
    "/dev/cpu_dma_latency",
    "latency ceiling in microseconds every CPU must wake within: cpuidle skips each C-state whose exit "
    "latency exceeds it (0: stay in C0/poll); null: no ceiling",
)


ROLE_KTHREADS = "kthreads"


@dataclass(frozen=True)
class KthreadPlacement:
    """Kernel threads the kernel lets move (``hostkit/core/kthreads.py``) kept on the housekeeping
    CPUs: moved at apply by the ``kthreads`` role (live hosts, journaled per thread) and at every boot
    by its unit. A bool key ``key`` under ``section``; applies where the plan isolates CPUs."""

    key: str
    section: str
    doc: str
    default: bool = True
    role: str = ROLE_KTHREADS


KTHREADS = KthreadPlacement(
    "kthreads_housekeeping",
    "kernel_noise",
    "kthreadd and every kernel thread that may move (kswapd, kcompactd, khugepaged, rcu "
    "threads, ...) off the isolated CPUs, a per-node thread onto its node's housekeeping "
    "CPUs; per-CPU threads are bound by the kernel and stay",
)


def profile_sections() -> dict[str, list]:
    """Profile section -> its entries of KERNEL_ARGS, SYSFS_VALUES, PM_QOS and KTHREADS, in table order."""
    out: dict[str, list] = {}
    for entry in (*KERNEL_ARGS, PM_QOS, *SYSFS_VALUES, KTHREADS):
        out.setdefault(entry.section, []).append(entry)
    return out


def cpu_flags_asked() -> tuple[str, ...]:
    """The /proc/cpuinfo flags some kernel argument depends on (facts report each as true/false)."""
    return tuple(dict.fromkeys(f for k in KERNEL_ARGS for f in k.cpu_flags))


def tuned_sysctls(role: str | None = None) -> tuple[Sysctl, ...]:
    """The sysctls a profile may set (those some role writes), or those ``role`` writes."""
    return tuple(s for s in SYSCTLS if s.role and (role is None or s.role == role))


@dataclass(frozen=True)
class ManagedFile:
    """A file a role writes (or a directory whose files it writes), as every other layer needs it."""

    path: str  # the role's default
    role: str
    var: str | None = None  # the role variable an inventory may set to move it; None: fixed
    adopt: str | None = None  # what `rollback --adopt` records: this path, or a glob around it
    follow_up: tuple[str, ...] = ()  # what must run after rollback restores a file under it
    reboot: bool = False  # a restored file takes effect at the next boot only
    scope: str | None = None  # the prefix follow_up covers (default: the path itself)

    @property
    def prefix(self) -> str:
        return self.scope or self.path


_KUBELET_RESTART = ("systemctl", "try-restart", "kubelet.service")
ROLE_TUNED = "tuned"
# Rollback's follow-up after restoring a tuned file: the placeholder is resolved from the restored
# /etc/tuned/active_profile and profile_mode (resolve_follow_up).
TUNED_PREVIOUS = "{tuned_previous_profile}"
TUNED_FOLLOW_UP = ("tuned-adm", "profile", TUNED_PREVIOUS)

FILES: tuple[ManagedFile, ...] = (
    ManagedFile("/etc/default/grub", "isolcpus", adopt="/etc/default/grub", follow_up=("update-grub",), reboot=True),
    ManagedFile(
        "/etc/default/grub.d/hostkit.cfg",
        "isolcpus",
        adopt="/etc/default/grub.d/*.cfg",
        follow_up=("update-grub",),
        reboot=True,
        scope="/etc/default/grub.d/",
    ),
    ManagedFile(
        "/etc/default/irqbalance",
        "irq_affinity",
        var="irq_affinity_irqbalance_config",
        adopt="/etc/default/irqbalance",
        follow_up=("systemctl", "try-restart", "irqbalance.service"),
    ),
    # RHEL, Rocky, Alma, Fedora: the irqbalance package's environment file (its unit reads
    # EnvironmentFile=/etc/sysconfig/irqbalance); the role writes it there when the host has it.
    ManagedFile(
        "/etc/sysconfig/irqbalance",
        "irq_affinity",
        adopt="/etc/sysconfig/irqbalance",
        follow_up=("systemctl", "try-restart", "irqbalance.service"),
    ),
    ManagedFile(
        "/etc/systemd/system/hostkit-irq-affinity.service",
        "irq_affinity",
        var="irq_affinity_unit",
        follow_up=("systemctl", "daemon-reload"),
        scope="/etc/systemd/system/",
    ),
    ManagedFile(
        "/etc/systemd/system/hostkit-cpu-governor.service",
        "cpu_governor",
        var="cpu_governor_unit",
        follow_up=("systemctl", "daemon-reload"),
        scope="/etc/systemd/system/",
    ),
    ManagedFile(
        "/etc/sysctl.d/60-hostkit-rt.conf", ROLE_RT, var="rt_runtime_sysctl_file", adopt="/etc/sysctl.d/*.conf"
    ),
    ManagedFile(
        "/etc/sysctl.d/61-hostkit-numa.conf", ROLE_SYSCTL, var="numa_sysctl_file", adopt="/etc/sysctl.d/*.conf"
    ),
    ManagedFile(
        "/etc/containerd/config.toml",
        "containerd",
        var="containerd_config",
        adopt="/etc/containerd/config.toml",
        follow_up=("systemctl", "try-restart", "containerd.service"),
        scope="/etc/containerd/",
    ),
    ManagedFile(
        "/etc/kubernetes/kubelet.conf.d/60-hostkit.conf",
        "kubelet",
        var="kubelet_dropin",
        adopt="/etc/kubernetes/kubelet.conf.d/*",
        follow_up=_KUBELET_RESTART,
        scope="/etc/kubernetes/",
    ),
    ManagedFile(
        "/var/lib/kubelet", "kubelet", var="kubelet_state_dir", follow_up=_KUBELET_RESTART, scope="/var/lib/kubelet/"
    ),
    # tuned (roles/tuned, drive/neutralize): its profile directory and the files the next boot reads
    # (tuned/consts.py ACTIVE_PROFILE_FILE, PROFILE_MODE_FILE, BOOT_CMDLINE_FILE). A restored file under
    # /etc/tuned/ is followed by switching tuned back to the profile the restored files name
    # (resolve_follow_up); adoption also records tuned's systemd drop-in and the GRUB environment
    # block holding $tuned_params (EL8).
    ManagedFile(
        "/etc/tuned/active_profile",
        ROLE_TUNED,
        adopt="/etc/tuned/active_profile",
        follow_up=TUNED_FOLLOW_UP,
        scope="/etc/tuned/",
    ),
    ManagedFile(
        "/etc/tuned/profile_mode",
        ROLE_TUNED,
        adopt="/etc/tuned/profile_mode",
        follow_up=TUNED_FOLLOW_UP,
        scope="/etc/tuned/",
    ),
    ManagedFile(TUNED_BOOTCMDLINE, ROLE_TUNED, adopt=TUNED_BOOTCMDLINE, follow_up=TUNED_FOLLOW_UP, scope="/etc/tuned/"),
    ManagedFile(
        "/etc/systemd/system.conf.d/00-tuned.conf", ROLE_TUNED, adopt="/etc/systemd/system.conf.d/00-tuned.conf"
    ),
    ManagedFile("/boot/grub2/grubenv", "isolcpus", adopt="/boot/grub2/grubenv", reboot=True),
    # BLS and systemd-boot (hostkit/core/boot_loader.py): the entries' options lines and what
    # kernel-install gives new kernels; nothing regenerates them, a restored copy counts at the next boot.
    ManagedFile("/boot/loader/entries/", "isolcpus", reboot=True),
    ManagedFile("/boot/efi/loader/entries/", "isolcpus", reboot=True),
    ManagedFile("/efi/loader/entries/", "isolcpus", reboot=True),
    ManagedFile("/etc/kernel/cmdline", "isolcpus", reboot=True),
    # kernel_values (SYSFS_VALUES at every boot) and pm_qos (the held latency ceiling): restored, the
    # holder must also stop, or the ceiling stays until the next boot.
    ManagedFile(
        "/etc/systemd/system/hostkit-kernel-values.service",
        ROLE_KERNEL_VALUES,
        var="kernel_values_unit",
        follow_up=("systemctl", "daemon-reload"),
        scope="/etc/systemd/system/",
    ),
    ManagedFile(
        "/etc/systemd/system/hostkit-pm-qos.service",
        ROLE_PM_QOS,
        var="pm_qos_unit",
        follow_up=("systemctl", "stop", "hostkit-pm-qos.service"),
    ),
    # kthreads: the unit moving kernel threads at boot (rollback moves the live threads back itself).
    ManagedFile(
        "/etc/systemd/system/hostkit-kthreads.service",
        ROLE_KTHREADS,
        var="kthreads_unit",
        follow_up=("systemctl", "daemon-reload"),
        scope="/etc/systemd/system/",
    ),
)
# Sysctl values need no follow-up: rollback writes their journaled runtime value back itself.

PATH_VARS: tuple[str, ...] = tuple(f.var for f in FILES if f.var)

# irqbalance's environment file, where each distribution family has it (Debian first: the role's
# default); facts report the one a host has, the plan hands it to the irq_affinity role.
IRQBALANCE_CONFIGS: tuple[str, ...] = tuple(f.path for f in FILES if "irqbalance.service" in f.follow_up)


def role_paths(hostvars: dict | None = None) -> dict[str, str]:
    """Role path variable -> the path the role will use: the inventory's value, else the role default."""
    hostvars = hostvars or {}
    return {f.var: str(hostvars.get(f.var) or f.path) for f in FILES if f.var}


def follow_ups() -> list[tuple[str, list[str], bool]]:
    """(path prefix, argv, reboot) for rollback: what makes a restored file take effect (argv empty:
    nothing to run, the next boot reads it)."""
    out: list[tuple[str, list[str], bool]] = []
    for f in FILES:
        entry = (f.prefix, list(f.follow_up), f.reboot)
        if (f.follow_up or f.reboot) and entry not in out:
            out.append(entry)
    return out


def unit_removal_follow_up(path: str) -> list[str] | None:
    """For rollback: a systemd unit hostkit created and rollback removes is disabled first (before
    its file is gone for good); None for any other file."""
    if path.startswith("/etc/systemd/system/") and path.endswith(".service"):
        return ["systemctl", "disable", path.rsplit("/", 1)[-1]]
    return None


def adopted_patterns() -> list[str]:
    """What `rollback --adopt` records: plain paths first, then globs, each once, in table order."""
    patterns = list(dict.fromkeys(f.adopt for f in FILES if f.adopt))
    return [p for p in patterns if "*" not in p] + [p for p in patterns if "*" in p]


def adopted_values() -> list[tuple[str, str]]:
    """(path, kind) of the runtime values `rollback --adopt` records: every tuned sysctl, the cmdline;
    then (glob, kind) of every SysfsValue (expanded on the host)."""
    return (
        [(s.proc_path, s.kind) for s in tuned_sysctls()]
        + [("/proc/cmdline", "str")]
        + [(v.glob, v.kind) for v in SYSFS_VALUES]
    )


def resolve_follow_up(argv: list[str], read) -> list[str]:
    """A follow-up's argv with its placeholder resolved from the restored files (``read(path)``: the
    text of a host file, None when absent): tuned goes back to the profiles ``active_profile`` names
    (``tuned-adm profile A [B]``), to its automatic choice when ``profile_mode`` says ``auto``, or
    off when no profile was active."""
    if TUNED_PREVIOUS not in argv:
        return list(argv)
    if (read("/etc/tuned/profile_mode") or "").strip() == "auto":
        return ["tuned-adm", "auto_profile"]
    names = (read("/etc/tuned/active_profile") or "").split()
    if not names:
        return ["tuned-adm", "off"]
    out: list[str] = []
    for a in argv:
        out += names if a == TUNED_PREVIOUS else [a]
    return out
