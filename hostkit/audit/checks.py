"""The audit's checks: live state (read over SSH with testinfra) against the host's plan.

Each check yields findings ``{"check", "status", "expected", "actual", "source"}`` with status
``pass``, ``drift``, ``pending_reboot`` (the boot config holds the planned kernel arguments but
the running kernel was booted without them), ``tolerated`` (the kernel refuses to move a
managed or per-CPU IRQ) or ``not_applicable``. Values are compared normalised: cpulists against
hex masks, integers against integers (:func:`hostkit.core.values.same`, with each sysctl's kind
from :mod:`hostkit.tunables`). Files a role lets the inventory move (kubelet drop-in, irqbalance
config, containerd config, kubelet state directory) are read where the role writes them:
:func:`hostkit.tunables.role_paths` of the host's variables.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import yaml

from hostkit.core.cpulist import format_cpulist, parse_cpulist, parse_mask
from hostkit.core.kernel_args import arg_name, cmdline_words, domain_isolated, format_arg
from hostkit.core.kthreads import allowed_on
from hostkit.core.sysroot import sysroot_path
from hostkit.core.values import same
from hostkit.facts.services import IRQBALANCE_BANNED_CPUS, irqbalance_ban
from hostkit.tunables import BY_KEY, IRQBALANCE_CONFIGS, role_paths

# IRQs the kernel manages itself (affinity writes fail with EIO): block-device queues.
MANAGED_IRQ_NAMES = re.compile(r"^(nvme\d+q\d+|virtio\d+-req\.\d+|.*-managed)$")


def finding(check, status, expected=None, actual=None, source=None, note=None) -> dict:
    f = {"check": check, "status": status, "expected": expected, "actual": actual, "source": source}
    if note:
        f["note"] = note
    return f


KUBELET_STATES = (("cpu_manager_state", "cpuManagerPolicy"), ("memory_manager_state", "memoryManagerPolicy"))
FILE_DEFAULTS = role_paths()  # the roles' own paths, before any inventory moves one


def audited_files(paths: dict[str, str]) -> list[str]:
    """Every file the checks read (``paths``: :func:`role_paths`), fetched in one remote command
    (each command over SSH costs a session)."""
    irqbalance = dict.fromkeys([paths["irq_affinity_irqbalance_config"], *IRQBALANCE_CONFIGS])
    return [
        "/proc/cmdline",
        "/sys/devices/system/cpu/isolated",
        *irqbalance,
        "/etc/systemd/system.conf",
        paths["containerd_config"],
        paths["kubelet_dropin"],
        *(f"{paths['kubelet_state_dir'].rstrip('/')}/{state}" for state, _ in KUBELET_STATES),
    ]


_MARK = "@@hostkit-audit@@"
# sh: "$M" marks sections, "$R" is the sysroot, "$C" the containerd config, "$@" the files to read.
FETCH_SCRIPT = (
    'for f in "$@"; do if [ -f "$f" ]; then printf "\n%s %s P\n" "$M" "$f"; cat "$f"; '
    'else printf "\n%s %s A\n" "$M" "$f"; fi; done; '
    'printf "\n%s managed\n" "$M"; ls -d "$R"/proc/irq/*/.managed 2>/dev/null; '
    'printf "\n%s containerd\n" "$M"; if command -v containerd && [ -f "$C" ]; then '
    'printf "\n%s dump\n" "$M"; containerd --config "$C" config dump 2>/dev/null; '
    'printf "\n%s dump-rc %s\n" "$M" "$?"; fi; true'
)


class HostView:
    """Files of one host under its sysroot, read through a testinfra Host (one SSH connection).

    ``paths``: where the host's roles write the files an inventory may move (:func:`role_paths`).
    :meth:`fetch` (``sh -c FETCH_SCRIPT`` with :meth:`fetch_args`) prints every audited file, the
    lab's managed-IRQ markers, whether containerd is installed and its ``config dump`` in one
    remote command (each command over SSH costs a session; the audit appends it to the agent's
    facts call); :meth:`load` parses that output; ``read`` falls back to testinfra's file module."""

    def __init__(self, host, sysroot: str, paths: dict[str, str] | None = None) -> None:
        self.host = host
        self.root = "" if sysroot in ("", "/") else sysroot.rstrip("/")
        self.paths = paths or role_paths()
        self._cache: dict[str, str | None] = {}
        self.managed_irqs: set[str] = set()
        self.has_containerd: bool | None = None
        self.containerd_dump: str | None = None  # `containerd config dump` of the config, when it ran and passed

    def path(self, p: str) -> str:
        return sysroot_path(self.root, p)

    def fetch_args(self) -> list[str]:
        """``M R C files...``: the positional arguments of :data:`FETCH_SCRIPT`."""
        return [
            _MARK,
            self.root or "/",
            self.path(self.paths["containerd_config"]),
            *(self.path(p) for p in audited_files(self.paths)),
        ]

    def prefetch(self) -> None:
        """Read everything in one remote command (the audit batches it with the facts call instead)."""
        self.load(
            self.host.run(
                "sh -c %s hostkit-fetch " + " ".join(["%s"] * len(self.fetch_args())),
                "M=$1 R=$2 C=$3; shift 3; " + FETCH_SCRIPT,
                *self.fetch_args(),
            ).stdout
        )

    def load(self, stdout: str) -> None:
        """Parse :data:`FETCH_SCRIPT`'s output."""
        section, buf = None, []
        dump_rc = None

        def flush():
            if section is None:
                return
            kind, name = section
            text = "\n".join(buf)
            if kind == "file":
                p = name[len(self.root) :] if self.root and name.startswith(self.root) else name
                self._cache[p] = None if buf == ["<absent>"] else text
            elif kind == "managed":
                self.managed_irqs = {line.rstrip("/").split("/")[-2] for line in buf if line.endswith(".managed")}
            elif kind == "containerd":
                self.has_containerd = any(line.strip() for line in buf)
            elif kind == "dump":
                self.containerd_dump = text

        for line in stdout.split("\n"):
            if line.startswith(_MARK + " "):
                if buf and buf[-1] == "":
                    buf.pop()  # the newline printf put before the marker
                flush()
                rest = line[len(_MARK) + 1 :]
                if rest in ("managed", "containerd", "dump"):
                    section, buf = (rest, rest), []
                elif rest.startswith("dump-rc "):
                    section, buf, dump_rc = None, [], rest.split()[-1]
                else:
                    name, state = rest.rsplit(" ", 1)
                    section, buf = ("file", name), (["<absent>"] if state == "A" else [])
                continue
            if section is not None and not (section[0] == "file" and buf == ["<absent>"]):
                buf.append(line)
        flush()
        if dump_rc != "0":
            self.containerd_dump = None
        for p in self._cache:
            if self._cache[p] is not None and not self._cache[p].endswith("\n"):
                self._cache[p] += "\n"

    def read(self, p: str) -> str | None:
        if p not in self._cache:
            f = self.host.file(self.path(p))
            self._cache[p] = f.content_string if f.exists else None
        return self._cache[p]


def _occurrences(line: str | None, arg: str) -> list[str]:
    """Each ``arg`` argument of a command line, as written."""
    return [w for w in cmdline_words(line or "") if arg_name(w) == arg]


def check_kernel_args(view: HostView, facts: dict, plan: dict) -> list[dict]:
    """The plan's kernel arguments against the running kernel (``/proc/cmdline``) and against what
    the next boot will use (facts' ``kernel.next_boot_cmdline``, computed the way the host's boot
    loader does: :mod:`hostkit.core.boot_loader`). Right for the next boot but not in the running
    kernel: a pending reboot. Each argument must appear exactly once in the next boot's line."""
    kernel = facts["kernel"]
    booted_line, next_line = kernel.get("cmdline") or "", kernel.get("next_boot_cmdline")
    loader = kernel.get("boot_loader") or {}
    source = loader.get("next_boot_source") or "boot loader configuration"
    unsupported = loader.get("reason") or "no supported boot configuration"
    out = []
    for arg, want in plan["cmdline_set"].items():
        name, expected = f"kernel arg {arg}", format_arg(arg, want)
        booted, coming = _occurrences(booted_line, arg), _occurrences(next_line, arg)
        got = " ".join(booted) or "<absent>"
        if next_line is None:
            out.append(finding(name, "drift", want, got, "/proc/cmdline", unsupported))
        elif coming != [expected]:
            out.append(
                finding(
                    name,
                    "drift",
                    want,
                    " ".join(coming) or "<absent>",
                    source,
                    "the next boot has it more than once" if len(coming) > 1 else None,
                )
            )
        elif booted == [expected]:
            out.append(finding(name, "pass", want, want, "/proc/cmdline"))
        else:
            out.append(
                finding(
                    name,
                    "pending_reboot",
                    want,
                    got,
                    "/proc/cmdline",
                    f"the next boot has it ({source}); the running kernel was booted without it",
                )
            )
    for arg in plan["cmdline_remove"]:
        name = f"kernel arg {arg} removed"
        booted, coming = _occurrences(booted_line, arg), _occurrences(next_line, arg)
        if coming:
            out.append(finding(name, "drift", "<absent>", " ".join(coming), source))
        elif not booted:
            out.append(finding(name, "pass", "<absent>", "<absent>", "/proc/cmdline"))
        elif next_line is None:
            out.append(finding(name, "drift", "<absent>", " ".join(booted), "/proc/cmdline", unsupported))
        else:
            out.append(
                finding(
                    name,
                    "pending_reboot",
                    "<absent>",
                    " ".join(booted),
                    "/proc/cmdline",
                    f"the next boot is without it ({source}); still in the running kernel",
                )
            )
    if plan["isolation"] and plan["isolated"] and "isolcpus" in plan["cmdline_set"]:
        # The kernel lists only domain-isolated CPUs there: none for isolcpus=managed_irq,<cpus>.
        want = domain_isolated(plan["cmdline_set"]["isolcpus"])
        iso = (view.read("/sys/devices/system/cpu/isolated") or "").strip()
        booted_ok = all(_occurrences(booted_line, a) == [format_arg(a, v)] for a, v in plan["cmdline_set"].items())
        matches = same("cpulist", want, iso) if want else not iso
        status = "pass" if matches else ("drift" if booted_ok else "pending_reboot")
        out.append(
            finding("isolated CPUs", status, want or "<none>", iso or "<none>", "/sys/devices/system/cpu/isolated")
        )
    return out


def check_sysctls(facts: dict, plan: dict) -> list[dict]:
    out = []
    for key, want in plan["sysctl"].items():
        s = BY_KEY[key]
        got = facts["kernel"].get(s.fact)
        out.append(finding(f"sysctl {key}", "pass" if same(s.kind, want, got) else "drift", want, got, s.proc_path))
    return out


def check_sysfs(facts: dict, plan: dict) -> list[dict]:
    """The plan's /sys values (hostkit.tunables.SYSFS_VALUES) against the facts, one finding per key
    (EPP has a file per CPU), compared by each item's kind."""
    out, by_key = [], {}
    for item in plan.get("sysfs") or []:
        by_key.setdefault(item["key"], []).append(item)
    for key, items in by_key.items():
        seen = ((facts.get("sysfs") or {}).get(key) or {}).get("values") or {}
        wrong = [
            (i["path"], seen.get(i["path"])) for i in items if not same(i["kind"], i["value"], seen.get(i["path"]))
        ]
        path, got = wrong[0] if wrong else (items[0]["path"], seen.get(items[0]["path"]))
        out.append(
            finding(
                key,
                "drift" if wrong else "pass",
                items[0]["value"],
                got if len(wrong) <= 1 else f"{got} ({len(wrong)} of {len(items)} files differ)",
                path,
            )
        )
    return out


def check_pm_qos(facts: dict, plan: dict) -> list[dict]:
    """The latency ceiling in force (facts: /dev/cpu_dma_latency) is at most the plan's."""
    want = (plan.get("pm_qos") or {}).get("cpu_dma_latency_us")
    if want is None:
        return []
    got = (facts.get("cpuidle") or {}).get("latency_ceiling_us")
    status = "not_applicable" if got is None else ("pass" if got <= want else "drift")
    return [
        finding(
            "PM QoS latency ceiling",
            status,
            f"<= {want} us",
            got,
            "/dev/cpu_dma_latency",
            "not readable (needs root)" if got is None else None,
        )
    ]


def check_kthreads(facts: dict, plan: dict) -> list[dict]:
    """No kernel thread that may move is allowed on an isolated CPU (live hosts: facts.kthreads)."""
    want = plan.get("kthreads") or {}
    if not want.get("move"):
        return []
    check, expected = "kernel threads off isolated CPUs", f"no movable kernel thread on CPUs {want['isolated']}"
    seen = facts.get("kthreads") or {}
    if not seen.get("available"):
        return [
            finding(
                check,
                "not_applicable",
                expected,
                None,
                "/proc/*/status",
                seen.get("reason") or "the facts have no kernel threads",
            )
        ]
    isolated = parse_cpulist(want["isolated"])
    on = [f"{t['comm']} ({t['pid']}) on {t['cpus']}" for t in allowed_on(seen["movable"], isolated)]
    return [
        finding(
            check,
            "drift" if on else "pass",
            expected,
            "; ".join(on[:8]) + (f"; {len(on) - 8} more" if len(on) > 8 else "")
            if on
            else f"{len(seen['movable'])} movable kernel threads, none there",
            "/proc/*/status",
        )
    ]


def check_governor(facts: dict, plan: dict) -> list[dict]:
    if not plan["governor"]:
        return [
            finding(
                "cpufreq governor",
                "not_applicable",
                None,
                None,
                "/sys/devices/system/cpu/cpu*/cpufreq",
                "no cpufreq on this host, or the profile leaves the governor alone",
            )
        ]
    wrong = {g: c for g, c in facts["cpufreq"]["governors"].items() if g != plan["governor"]}
    if not wrong:
        return [
            finding(
                "cpufreq governor",
                "pass",
                plan["governor"],
                plan["governor"],
                "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
            )
        ]
    actual = "; ".join(f"{g} on CPUs {c}" for g, c in wrong.items())
    first = min(parse_cpulist(next(iter(wrong.values()))))
    return [
        finding(
            "cpufreq governor",
            "drift",
            f"{plan['governor']} on CPUs {plan['governor_cpus']}",
            actual,
            f"/sys/devices/system/cpu/cpu{first}/cpufreq/scaling_governor",
        )
    ]


def check_irqs(view: HostView, facts: dict, plan: dict) -> list[dict]:
    if not plan["irq"]["affinity"]:
        return [
            finding(
                "IRQ affinity",
                "not_applicable",
                None,
                None,
                "/proc/irq/*/smp_affinity_list",
                "the profile leaves IRQs to irqbalance",
            )
        ]
    irqs = {str(i["irq"]): i for i in facts["irqs"]}
    # IRQs have one owner (plan irq.owner). Where irqbalance places them, every movable IRQ must be
    # inside the IRQ CPUs, wherever in them it went; where hostkit pins them, each IRQ the plan names
    # where the plan put it, or inside that once an irqbalance banned from the rest runs beside it
    # (found on a real kernel in the VM lab: irqbalance moves pins within 0,2 after boot).
    by_irqbalance = plan["irq"].get("owner") == "irqbalance"
    wanted = (
        {n: plan["irq_cpus"] for n, i in irqs.items() if i.get("smp_affinity_list") is not None}
        if by_irqbalance
        else plan["irq"]["assignments"]
    )
    shared = plan["irq"].get("irqbalance") == "banned"  # irqbalance, owner or beside hostkit, kept to the IRQ CPUs
    out, tolerated = [], []
    for irq, want in wanted.items():
        got = (irqs.get(irq) or {}).get("smp_affinity_list")
        if got is None or same("cpulist", want, got):
            continue
        if shared and got and parse_cpulist(got) <= parse_cpulist(want):
            continue
        name = (irqs.get(irq) or {}).get("name", "")
        if MANAGED_IRQ_NAMES.match(name) or irq in view.managed_irqs:
            tolerated.append(irq)
            continue
        out.append(finding(f"IRQ {irq} affinity ({name})", "drift", want, got, f"/proc/irq/{irq}/smp_affinity_list"))
    if not out:
        out.append(
            finding(
                "IRQ affinity",
                "pass",
                plan["irq_cpus"],
                f"{len(wanted)} IRQs checked" + (", placed by irqbalance" if by_irqbalance else ""),
                "/proc/irq/*/smp_affinity_list",
            )
        )
    if tolerated:
        out.append(
            finding(
                "managed IRQs",
                "tolerated",
                "kernel-managed",
                f"IRQs {', '.join(tolerated)}",
                "/proc/irq/*/smp_affinity_list",
                "the kernel refuses affinity writes to managed IRQs",
            )
        )
    want_default = plan["irq"].get("default_smp_affinity")
    if want_default:
        got = facts.get("default_smp_affinity")
        ok = same("mask", want_default, got, got_kind="cpulist")
        out.append(
            finding(
                "default_smp_affinity",
                "pass" if ok else "drift",
                format_cpulist(parse_mask(want_default)),
                got,
                "/proc/irq/default_smp_affinity",
            )
        )
    return out


def irqbalance_config(view: HostView, plan: dict) -> str:
    """Where the irq_affinity role wrote: a path the inventory moved, else the one the host's facts found."""
    path = view.paths["irq_affinity_irqbalance_config"]
    if path == FILE_DEFAULTS["irq_affinity_irqbalance_config"]:
        return plan["irq"].get("irqbalance_config") or path
    return path


class IrqbalanceBan(NamedTuple):
    """irqbalance's environment file as irqbalance reads it: the CPUs banned and the variable that
    decides (None when neither is set), or why the file could not be read as one."""

    banned: str = ""
    variable: str | None = None
    error: str | None = None


def irqbalance_banned(view: HostView, plan: dict) -> IrqbalanceBan | None:
    """The ban in irqbalance's environment file; None: no file."""
    text = view.read(irqbalance_config(view, plan))
    if text is None:
        return None
    try:
        return IrqbalanceBan(*irqbalance_ban(text))
    except ValueError as exc:
        return IrqbalanceBan(error=str(exc))


def check_irqbalance(view: HostView, plan: dict) -> list[dict]:
    ban = irqbalance_banned(view, plan)
    config = irqbalance_config(view, plan)
    if ban is None:
        return [finding("irqbalance banned CPUs", "not_applicable", None, None, config, "irqbalance is not installed")]
    mode = plan["irq"]["irqbalance"]
    if mode == "leave":
        return []
    want = plan["irq"]["banned_cpulist"] if mode == "banned" else ""
    if ban.error is not None:
        return [finding("irqbalance banned CPUs", "drift", want or "<none>", f"unreadable: {ban.error}", config)]
    ok = ban.variable != IRQBALANCE_BANNED_CPUS and same("cpulist", want, ban.banned)
    return [
        finding(
            "irqbalance banned CPUs",
            "pass" if ok else "drift",
            want or "<none>",
            (ban.banned or "<none>")
            + (f" ({ban.variable}, which irqbalance reads first)" if ban.variable == IRQBALANCE_BANNED_CPUS else ""),
            config,
        )
    ]


def check_containerd(view: HostView, plan: dict) -> list[dict]:
    if not plan["containerd"]["enabled"]:
        return []
    path = view.paths["containerd_config"]
    if view.has_containerd and view.containerd_dump is not None and view.read(path) is not None:
        text, source = view.containerd_dump, f"containerd config dump ({path})"
    else:
        text, source = view.read(path), path
    if text is None:
        return [finding("containerd SystemdCgroup", "drift", "true", "<no config.toml>", path)]
    want = plan["containerd"]["systemd_cgroup"]
    m = re.search(r"SystemdCgroup\s*=\s*(true|false)", text)
    got = m.group(1) if m else "<unset>"
    return [
        finding(
            "containerd SystemdCgroup", "pass" if got == str(want).lower() else "drift", str(want).lower(), got, source
        )
    ]


def kubelet_config(view: HostView) -> dict | None:
    text = view.read(view.paths["kubelet_dropin"])
    if text is None:
        return None
    try:
        return yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return {"<unparseable>": True}


def check_kubelet(view: HostView, plan: dict) -> list[dict]:
    if not plan["kubelet"].get("enabled"):
        return []
    dropin = view.paths["kubelet_dropin"]
    cfg = kubelet_config(view)
    if cfg is None:
        return [finding("kubelet configuration", "drift", "drop-in present", "<absent>", dropin)]
    out = []
    for key, want in plan["kubelet"]["config"].items():
        got = cfg.get(key)
        ok = same("cpulist", want, str(got)) if key == "reservedSystemCPUs" else got == want
        out.append(finding(f"kubelet {key}", "pass" if ok else "drift", want, got, dropin))
    for state, field in KUBELET_STATES:
        state_file = f"{view.paths['kubelet_state_dir'].rstrip('/')}/{state}"
        text = view.read(state_file)
        if text:
            import json

            try:
                policy = json.loads(text).get("policyName")
            except ValueError:
                policy = "<unparseable>"
            want = plan["kubelet"]["config"].get(field)
            out.append(
                finding(
                    f"kubelet {state}",
                    "pass" if str(policy).lower() == str(want).lower() else "drift",
                    want,
                    policy,
                    state_file,
                    "a state file with another policy makes kubelet crash-loop",
                )
            )
    return out


def check_bios(plan: dict) -> list[dict]:
    out = []
    for c in plan["bios"]["checks"]:
        status = {True: "pass", False: "drift" if plan["bios"]["enforce"] else "tolerated", None: "not_applicable"}
        out.append(
            finding(
                f"BIOS {c['name']}",
                status[c["ok"]],
                c["expected"],
                c["actual"],
                "NUMA topology / DMI",
                None if c["ok"] is not False or plan["bios"]["enforce"] else "bios.enforce is false",
            )
        )
    return out


def check_cross_layer(view: HostView, facts: dict, plan: dict) -> list[dict]:
    """Housekeeping as every layer sees it must be one set, irqbalance kept to the IRQ CPUs; every NIC
    IRQ on its node."""
    out = []
    online = parse_cpulist(facts["topology"]["online"])
    hk, iso = parse_cpulist(plan["housekeeping"]), parse_cpulist(plan["isolated"])
    out.append(
        finding(
            "isolated ∪ housekeeping = online",
            "pass" if (hk | iso) == online and not hk & iso else "drift",
            facts["topology"]["online"],
            format_cpulist(hk | iso),
            "plan",
        )
    )
    if plan["isolation"]:
        views = {}
        cfg = kubelet_config(view) if plan["kubelet"].get("enabled") else None
        if cfg and cfg.get("reservedSystemCPUs") is not None:
            views["kubelet reservedSystemCPUs"] = str(cfg["reservedSystemCPUs"])
        ban = irqbalance_banned(view, plan)
        banned = ban.banned if ban and ban.error is None else ""  # an unreadable file: its own finding
        if banned:
            usable = format_cpulist(online - parse_cpulist(banned))
            out.append(
                finding(
                    "IRQ CPUs = online − irqbalance banned",
                    "pass" if same("cpulist", plan["irq_cpus"], usable) else "drift",
                    plan["irq_cpus"],
                    usable,
                    "cross-layer",
                )
            )
        system_conf = view.read("/etc/systemd/system.conf") or ""
        m = re.search(r"(?m)^\s*CPUAffinity=(.+)$", system_conf)
        if m:
            views["systemd CPUAffinity"] = format_cpulist(parse_cpulist(",".join(m.group(1).split())))
        for name, cpus in views.items():
            ok = same("cpulist", plan["housekeeping"], cpus)
            out.append(
                finding(f"housekeeping = {name}", "pass" if ok else "drift", plan["housekeeping"], cpus, "cross-layer")
            )
    nodes = {n["id"]: parse_cpulist(n["cpus"]) for n in facts["topology"]["numa_nodes"]}
    irqs = {i["irq"]: i for i in facts["irqs"]}
    for nic in facts["nics"]:
        node = nodes.get(nic["numa_node"])
        if not node or not plan["irq"]["affinity"]:
            continue
        off = [
            str(i)
            for i in nic["irqs"]
            if irqs.get(i) and irqs[i]["smp_affinity_list"] and not parse_cpulist(irqs[i]["smp_affinity_list"]) <= node
        ]
        out.append(
            finding(
                f"{nic['name']} IRQs on node {nic['numa_node']}",
                "drift" if off else "pass",
                f"CPUs of node {nic['numa_node']}",
                f"IRQs {', '.join(off)} elsewhere" if off else "all local",
                "/proc/irq/*/smp_affinity_list",
            )
        )
    return out


def run_checks(
    host, sysroot: str, facts: dict, plan: dict, paths: dict[str, str] | None = None, view: HostView | None = None
) -> list[dict]:
    """Every check of one host; ``paths``: :func:`role_paths` of its inventory variables (default: the roles');
    ``view``: the host's files already read (:meth:`HostView.load`), else they are read now."""
    if view is None:
        view = HostView(host, sysroot, paths)
        view.prefetch()
    return (
        check_kernel_args(view, facts, plan)
        + check_sysctls(facts, plan)
        + check_governor(facts, plan)
        + check_sysfs(facts, plan)
        + check_pm_qos(facts, plan)
        + check_kthreads(facts, plan)
        + check_irqs(view, facts, plan)
        + check_irqbalance(view, plan)
        + check_containerd(view, plan)
        + check_kubelet(view, plan)
        + check_bios(plan)
        + check_cross_layer(view, facts, plan)
    )
