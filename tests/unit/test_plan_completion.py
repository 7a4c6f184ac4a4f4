"""Issue 12, "the plan, completed": kubelet-managed partitions, kernel noise, the irqbalance owner, the RT
budget with stalld. Planner unit and property tests on the fixture facts; the facts they need read
from sysroot trees."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostkit.core.cpulist import format_cpulist, format_mask, parse_cpulist, parse_mask
from hostkit.core.kernel_args import split_isolcpus
from hostkit.core.kthreads import PF_KTHREAD, PF_NO_SETAFFINITY, plan_moves
from hostkit.errors import BadInput
from hostkit.facts import gather
from hostkit.plan import build_plan
from hostkit.profiles import apply_overrides, load_profile
from hostkit.tunables import HUGEPAGE_KB, IRQBALANCE_CONFIGS, KERNEL_ARGS, SYSFS_BY_KEY, profile_sections

BARE = ["epyc-9634-nps1", "epyc-9654-nps4-smt", "xeon-8480-snc2-ht"]


@pytest.fixture(scope="module")
def facts(sysroots):
    return {name: gather(str(sysroots[name])) for name in BARE}


def plan(f, overrides=None, profile="bare-metal-inference"):
    prof, pinned = apply_overrides(load_profile(profile), overrides)
    return build_plan(f, prof, pinned).to_dict()


def with_flags(f, **checked):
    f = copy.deepcopy(f)
    f["cpu_flags"]["checked"].update(checked)
    return f


def with_service(f, name, **state):
    """Facts in which the daemon ``name`` (facts.services) has ``state`` (installed, running, config)."""
    f = copy.deepcopy(f)
    f["services"][name] = {**f["services"].get(name, {}), **state}
    return f


# ----------------------------------------------------------------------------- kubelet vs static partition


def test_kubelet_static_cpu_manager_plans_a_balanced_partition(facts):
    p = plan(facts["xeon-8480-snc2-ht"])
    args = p["cmdline_set"]
    flags, cpus = split_isolcpus(args["isolcpus"])
    assert flags == ["managed_irq"] and parse_cpulist(cpus) == parse_cpulist(p["isolated"])
    assert args["systemd.cpu_affinity"] == p["housekeeping"]
    assert p["sysctl"]["kernel.timer_migration"] == 1
    assert sum(r.startswith("isolcpus without domain: kubelet's static CPU manager") for r in p["reasons"]) == 1
    assert sum(r.startswith("timer_migration=1:") for r in p["reasons"]) == 1
    assert sum(r.startswith("systemd.cpu_affinity=") for r in p["reasons"]) == 1


@pytest.mark.parametrize("kubelet", [{"enabled": False}, {"cpu_manager_policy": "none"}])
def test_a_static_partition_keeps_domain_and_timers_in_place(facts, kubelet):
    p = plan(facts["epyc-9634-nps1"], {"kubelet": kubelet})
    assert p["cmdline_set"]["isolcpus"] == f"managed_irq,domain,{p['isolated']}"
    assert "systemd.cpu_affinity" not in p["cmdline_set"]
    assert p["sysctl"]["kernel.timer_migration"] == 0
    assert sum(r.startswith("isolcpus with domain: a static partition") for r in p["reasons"]) == 1
    assert sum(r.startswith("timer_migration=0: static partition") for r in p["reasons"]) == 1


def test_kubelet_with_only_the_domain_flag_keeps_managed_irq_so_the_kernel_does_not_read_domain(facts):
    """isolcpus=<cpus> with no flag word is domain to the kernel: the plan must never write that for kubelet."""
    p = plan(facts["epyc-9634-nps1"], {"isolcpus_flags": ["domain"]})
    assert p["cmdline_set"]["isolcpus"] == f"managed_irq,{p['isolated']}"
    p = plan(facts["epyc-9634-nps1"], {"isolcpus_flags": []})
    assert p["cmdline_set"]["isolcpus"] == f"managed_irq,{p['isolated']}"


def test_a_profile_without_isolation_removes_the_systemd_affinity_too(facts):
    p = plan(facts["epyc-9634-nps1"], profile="vmware-guest")
    assert p["cmdline_set"] == {} and "systemd.cpu_affinity" in p["cmdline_remove"]
    assert p["sysctl"]["kernel.timer_migration"] == 0  # no isolation: the profile's value, no partition decision


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(BARE),
    enabled=st.booleans(),
    policy=st.sampled_from(["static", "none"]),
    flags=st.lists(st.sampled_from(["domain", "managed_irq", "nohz"]), unique=True, max_size=3),
    reserve=st.integers(min_value=1, max_value=4),
)
def test_domain_never_with_kubelet_static_cpu_manager_property(facts, name, enabled, policy, flags, reserve):
    p = plan(
        facts[name],
        {
            "kubelet": {"enabled": enabled, "cpu_manager_policy": policy},
            "isolcpus_flags": flags,
            "reserve_per_node": reserve,
        },
    )
    assert p["refused"] == []
    iso_flags, cpus = split_isolcpus(p["cmdline_set"]["isolcpus"])
    assert parse_cpulist(cpus) == parse_cpulist(p["isolated"])
    kubelet_static = enabled and policy == "static"
    if kubelet_static:
        assert "domain" not in iso_flags
        assert p["cmdline_set"]["systemd.cpu_affinity"] == p["housekeeping"]
        assert p["sysctl"]["kernel.timer_migration"] == 1
    else:
        assert iso_flags == (flags or ["domain"])  # the profile's flags as written
        assert "systemd.cpu_affinity" not in p["cmdline_set"]
        assert p["sysctl"]["kernel.timer_migration"] == 0


# ----------------------------------------------------------------------------- kernel noise


def test_kernel_noise_arguments_each_with_a_reason(facts):
    p = plan(facts["epyc-9634-nps1"])
    assert [(a, p["cmdline_set"].get(a, "<absent>")) for a in ("skew_tick", "nosoftlockup", "nmi_watchdog", "tsc")] == [
        ("skew_tick", "1"),
        ("nosoftlockup", None),
        ("nmi_watchdog", "0"),
        ("tsc", "reliable"),
    ]
    for shown in ("skew_tick=1: ", "nosoftlockup: ", "nmi_watchdog=0: ", "tsc=reliable: "):
        assert sum(r.startswith(shown) for r in p["reasons"]) == 1, shown
    assert "transparent_hugepage" not in p["cmdline_set"]  # null in the profile: the kernel's default


def test_kernel_noise_is_profile_controlled(facts):
    p = plan(
        facts["epyc-9634-nps1"],
        {"kernel_noise": {"skew_tick": False, "nmi_watchdog_off": False, "transparent_hugepage": "never"}},
    )
    assert "skew_tick" not in p["cmdline_set"] and "nmi_watchdog" not in p["cmdline_set"]
    assert p["cmdline_set"]["transparent_hugepage"] == "never" and "nosoftlockup" in p["cmdline_set"]
    with pytest.raises(BadInput, match="kernel_noise.transparent_hugepage must be one of never, madvise, always"):
        plan(facts["epyc-9634-nps1"], {"kernel_noise": {"transparent_hugepage": "sometimes"}})
    with pytest.raises(BadInput, match="kernel_noise.skew_tick must be true or false"):
        plan(facts["epyc-9634-nps1"], {"kernel_noise": {"skew_tick": 1}})


def test_no_kernel_noise_argument_without_isolation(facts):
    assert plan(facts["epyc-9634-nps1"], {"isolation": False})["cmdline_set"] == {}


@pytest.mark.parametrize("constant,nonstop", [(False, True), (True, False), (False, False)])
def test_tsc_reliable_needs_a_constant_nonstop_tsc(facts, constant, nonstop):
    p = plan(with_flags(facts["epyc-9634-nps1"], constant_tsc=constant, nonstop_tsc=nonstop))
    assert "tsc" not in p["cmdline_set"]
    missing = ", ".join(f for f, ok in (("constant_tsc", constant), ("nonstop_tsc", nonstop)) if not ok)
    assert [r for r in p["reasons"] if r.startswith("tsc=reliable left out")] == [
        f"tsc=reliable left out: /proc/cpuinfo lacks {missing} (the TSC may stop or drift, so the clocksource "
        "watchdog must keep checking it)"
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(BARE),
    constant=st.booleans(),
    nonstop=st.booleans(),
    wanted=st.booleans(),
    extra_flags=st.booleans(),
)
def test_tsc_reliable_never_without_both_flags_property(facts, name, constant, nonstop, wanted, extra_flags):
    f = with_flags(facts[name], constant_tsc=constant, nonstop_tsc=nonstop)
    if extra_flags:
        f["cpu_flags"] = {"count": 0, "hypervisor": False}  # facts of an older agent: no flags checked at all
    p = plan(f, {"kernel_noise": {"tsc_reliable": wanted}})
    has = p["cmdline_set"].get("tsc") == "reliable"
    assert has == (wanted and constant and nonstop and not extra_flags)


def test_every_table_entry_is_a_profile_key_of_its_section():
    prof = load_profile()
    for section, entries in profile_sections().items():
        assert list(prof[section]) == [getattr(e, "name", None) or e.key for e in entries], section
    assert [k.name for k in KERNEL_ARGS if k.section == "kernel_noise"] == list(prof["kernel_noise"])[:5]


def test_facts_check_the_tsc_flags_in_proc_cpuinfo(sysroot_copy):
    root = sysroot_copy("epyc-9634-nps1")
    assert gather(str(root))["cpu_flags"]["checked"] == {"constant_tsc": True, "nonstop_tsc": True}
    cpuinfo = root / "proc/cpuinfo"
    cpuinfo.write_text(cpuinfo.read_text().replace(" nonstop_tsc", ""))
    assert gather(str(root))["cpu_flags"]["checked"] == {"constant_tsc": True, "nonstop_tsc": False}


# ----------------------------------------------------------------------------- irqbalance, its file


def test_irqbalance_configs_are_the_table_s_and_rollback_restarts_for_both():
    from hostkit.agent import rollback

    assert IRQBALANCE_CONFIGS == ("/etc/default/irqbalance", "/etc/sysconfig/irqbalance")
    restart = ["systemctl", "try-restart", "irqbalance.service"]
    for path in IRQBALANCE_CONFIGS:
        assert [argv for prefix, argv, _ in rollback.FOLLOW_UP if path.startswith(prefix)] == [restart], path


def test_facts_find_the_rhel_irqbalance_file_and_running_daemons(sysroot_copy):
    root = sysroot_copy("epyc-9634-nps1")
    assert gather(str(root))["services"] == {
        "irqbalance": {
            "installed": True,
            "running": False,
            "config": "/etc/default/irqbalance",
            "banned_cpus": "0000ff00",
        },
        "stalld": {"installed": False, "running": False},
        "containerd": {"installed": True, "running": False},
        "kubelet": {"installed": True, "running": False},
    }
    # The RHEL family's layout: the irqbalance package's /etc/sysconfig/irqbalance, stalld in /usr/bin.
    (root / "etc/sysconfig").mkdir(parents=True)
    (root / "etc/default/irqbalance").rename(root / "etc/sysconfig/irqbalance")
    (root / "usr/bin").mkdir(parents=True, exist_ok=True)
    (root / "usr/bin/stalld").write_text("")
    for pid, comm in ((1, "systemd"), (812, "irqbalance"), (913, "stalld")):
        (root / f"proc/{pid}").mkdir()
        (root / f"proc/{pid}/comm").write_text(comm + "\n")
    f = gather(str(root))
    assert f["services"] == {
        "irqbalance": {
            "installed": True,
            "running": True,
            "config": "/etc/sysconfig/irqbalance",
            "banned_cpus": "0000ff00",
        },
        "stalld": {"installed": True, "running": True},
        "containerd": {"installed": True, "running": False},
        "kubelet": {"installed": True, "running": False},
    }
    p = build_plan(f, load_profile()).to_dict()
    assert p["irq"]["irqbalance_config"] == "/etc/sysconfig/irqbalance"
    assert p["irq"]["banned_cpulist"] == p["isolated"] and p["cmdline_set"]["irqaffinity"] == p["housekeeping"]
    assert (
        sum(
            r.startswith(
                "irqbalance runs: it keeps placing IRQs, banned in /etc/sysconfig/irqbalance from "
                "every CPU but the IRQ CPUs"
            )
            for r in p["reasons"]
        )
        == 1
    )
    assert p["irq"]["owner"] == "irqbalance" and not p["irq"]["assignments"]


def with_irqbalance(f, running: bool):
    return with_service(f, "irqbalance", installed=True, running=running)


def test_irqs_have_one_owner_irqbalance_where_it_runs_hostkit_elsewhere(facts):
    f = facts["epyc-9634-nps1"]
    beside = plan(with_irqbalance(f, True))["irq"]
    # irqbalance rewrites every IRQ it balances at its next pass: hostkit pins none beside it.
    assert (beside["owner"], beside["assignments"], beside["by_name"]) == ("irqbalance", {}, {})
    assert beside["irqbalance"] == "banned" and beside["default_smp_affinity"]  # new IRQs start on the IRQ CPUs
    alone = plan(with_irqbalance(f, False))["irq"]
    assert alone["owner"] == "hostkit" and alone["by_name"] and alone["assignments"]
    assert beside["banned_cpulist"] == alone["banned_cpulist"] == plan(f)["isolated"]
    from hostkit.plan.render import plan_text  # the operator reads the owner in the plan's text

    assert "(placed by irqbalance)" in plan_text(plan(with_irqbalance(f, True)))
    assert "(pinned by hostkit)" in plan_text(plan(with_irqbalance(f, False)))
    # No isolation and nothing pinned: nobody moves IRQs, nothing is banned.
    baseline = plan(with_irqbalance(f, True), profile="baseline")["irq"]
    assert (baseline["owner"], baseline["irqbalance"], baseline["banned_cpulist"]) == ("none", "leave", "")
    # Running, but no environment file to ban it in: hostkit pins, and the plan warns of the fight.
    unbannable = with_irqbalance(f, True)
    unbannable["services"]["irqbalance"]["config"] = None
    p = plan(unbannable)
    assert p["irq"]["owner"] == "hostkit" and p["irq"]["by_name"]
    assert sum(w.startswith("irqbalance runs with no environment file found to ban it in") for w in p["warnings"]) == 1


@given(st.booleans(), st.integers(min_value=1, max_value=3))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_irqbalance_is_banned_from_every_cpu_that_is_not_an_irq_cpu(facts, running, n_irq_cpus):
    """Pinned IRQ CPUs narrower than the housekeeping ones: irqbalance is kept off the rest too."""
    f = with_irqbalance(facts["epyc-9634-nps1"], running)
    housekeeping = sorted(parse_cpulist(plan(f)["housekeeping"]))
    irq_cpus = format_cpulist(set(housekeeping[:n_irq_cpus]))
    p = plan(f, {"irq_cpus": irq_cpus})
    online = parse_cpulist(f["topology"]["online"])
    assert parse_cpulist(p["irq"]["banned_cpulist"]) == online - parse_cpulist(irq_cpus)
    assert parse_cpulist(p["irq"]["banned_cpulist"]) >= parse_cpulist(p["isolated"])
    # One IRQ CPU leaves irqbalance nothing to balance: hostkit pins there, with no warning.
    assert p["irq"]["owner"] == ("irqbalance" if running and n_irq_cpus >= 2 else "hostkit")
    assert not any(w.startswith("irqbalance runs") for w in p["warnings"])
    assert all(parse_cpulist(c) <= parse_cpulist(irq_cpus) for c in p["irq"]["by_name"].values())


def test_audit_where_irqbalance_owns_irqs_checks_every_movable_irq_against_the_irq_cpus(sysroot_copy):
    from hostkit.audit.checks import MANAGED_IRQ_NAMES, run_checks
    from tests.unit.test_tunables import LocalHost

    root = sysroot_copy("epyc-9634-nps1")
    f = with_irqbalance(gather(str(root)), True)
    p = build_plan(f, load_profile()).to_dict()
    isolated = sorted(parse_cpulist(p["isolated"]))
    movable = [i for i in f["irqs"] if i.get("smp_affinity_list") is not None]
    for i in movable:  # where irqbalance put them: one IRQ CPU each
        i["smp_affinity_list"] = str(min(parse_cpulist(p["irq_cpus"])))
    # (the cross-layer "IRQ CPUs = online − irqbalance banned" reads the fixture's old ban: not this test's)
    found = [
        x
        for x in run_checks(LocalHost(), str(root), f, p)
        if x["check"].startswith("IRQ") and not x["check"].startswith("IRQ CPUs")
    ]
    assert [(x["check"], x["status"], x["actual"]) for x in found] == [
        ("IRQ affinity", "pass", f"{len(movable)} IRQs checked, placed by irqbalance")
    ]
    victim = next(i for i in movable if not MANAGED_IRQ_NAMES.match(i.get("name") or ""))
    victim["smp_affinity_list"] = str(isolated[0])
    found = [
        x
        for x in run_checks(LocalHost(), str(root), f, p)
        if x["check"].startswith("IRQ") and not x["check"].startswith("IRQ CPUs")
    ]
    assert [(x["status"], x["expected"], x["actual"]) for x in found] == [("drift", p["irq_cpus"], str(isolated[0]))]


# ----------------------------------------------------------------------------- components not installed


def test_a_node_without_kubelet_and_containerd_gets_the_kubelet_partition_and_no_files_for_them(facts, sysroot_copy):
    """The provisioning order: a bare-metal node tuned before Kubernetes is installed. The partition is
    the kubelet profile's all the same; the roles of the missing components have nothing to write."""
    root = sysroot_copy("epyc-9634-nps1")
    for program in ("kubelet", "containerd"):
        (root / "usr/bin" / program).unlink()
    f = gather(str(root))
    assert f["services"]["kubelet"] == f["services"]["containerd"] == {"installed": False, "running": False}
    p, equipped = plan(f), plan(facts["epyc-9634-nps1"])
    assert p["kubelet"] == {"enabled": False, "installed": False}
    assert p["containerd"]["enabled"] is False and p["containerd"]["installed"] is False
    assert sum(r.startswith("kubelet: not installed: no drop-in written, no restart") for r in p["reasons"]) == 1
    assert sum(r.startswith("containerd: not installed: no config written") for r in p["reasons"]) == 1
    assert equipped["kubelet"]["enabled"] and equipped["kubelet"]["installed"] and equipped["containerd"]["enabled"]
    assert not any(r.startswith(("kubelet: not installed", "containerd: not installed")) for r in equipped["reasons"])
    # the CPU partition and the kernel arguments are the kubelet profile's on both
    for key in ("housekeeping", "isolated", "cmdline_set", "sysctl"):
        assert p[key] == equipped[key], key
    # pre-seeded: the drop-in is planned, kubelet is not restarted (installed: false)
    seeded = plan(f, {"kubelet": {"preseed": True}})
    assert seeded["kubelet"]["enabled"] is True and seeded["kubelet"]["installed"] is False
    assert seeded["kubelet"]["config"] == equipped["kubelet"]["config"]
    assert (
        sum(
            r.startswith("kubelet: not installed: the drop-in is written for the kubelet installed later")
            for r in seeded["reasons"]
        )
        == 1
    )
    # facts without the services (an older agent): configured as before
    older = copy.deepcopy(f)
    del older["services"]["kubelet"], older["services"]["containerd"]
    assert plan(older)["kubelet"] == equipped["kubelet"] and plan(older)["containerd"]["enabled"] is True


# ----------------------------------------------------------------------------- the RT budget


def test_rt_budget_is_unthrottled_only_where_stalld_runs(facts):
    f = facts["epyc-9634-nps1"]
    p = plan(with_service(f, "stalld", installed=True, running=True))
    assert p["sysctl"]["kernel.sched_rt_runtime_us"] == -1
    assert (
        sum(
            r.startswith("sched_rt_runtime_us=-1: inference CPUs are isolated and dedicated, and stalld runs")
            for r in p["reasons"]
        )
        == 1
    )
    for installed, state in ((True, "installed but not running"), (False, "not installed")):
        p = plan(with_service(f, "stalld", installed=installed, running=False))
        assert p["sysctl"]["kernel.sched_rt_runtime_us"] == 950000
        assert sum(r.startswith(f"sched_rt_runtime_us stays 950000: stalld is {state}") for r in p["reasons"]) == 1


def test_rt_budget_ignores_stalld_when_the_profile_says_so_or_nothing_is_isolated(facts):
    f = with_service(facts["epyc-9634-nps1"], "stalld", installed=True, running=True)
    assert plan(f, {"stalld": "ignore"})["sysctl"]["kernel.sched_rt_runtime_us"] == 950000
    assert plan(f, profile="vmware-guest")["sysctl"]["kernel.sched_rt_runtime_us"] == 950000
    with pytest.raises(BadInput, match="stalld must be one of use, ignore"):
        plan(f, {"stalld": "maybe"})


# ----------------------------------------------------------------------------- memory channels (SMBIOS)


def _with_table(root, raw: bytes):
    (root / "sys/firmware/dmi/tables").mkdir(parents=True, exist_ok=True)
    (root / "sys/firmware/dmi/tables/DMI").write_bytes(raw)


def test_epyc_with_4_of_12_channels_per_socket_is_reported_and_fails_the_bare_metal_check(sysroot_copy):
    from tests import smbios_gen

    root = sysroot_copy("epyc-9634-nps1")
    _with_table(root, smbios_gen.table(smbios_gen.epyc_4_of_12()))
    f = gather(str(root))
    assert f["memory"] == {
        "source": "/sys/firmware/dmi/tables/DMI",
        "slots": 24,
        "populated": 8,
        "total_mb": 8 * 32768,
        "speed_mts": 4800,
        "unrecognised": 0,
        "channels": {
            "0": {"total": 12, "populated": ["A", "C", "G", "I"]},
            "1": {"total": 12, "populated": ["A", "C", "G", "I"]},
        },
    }
    p = build_plan(f, load_profile()).to_dict()
    (check,) = [c for c in p["bios"]["checks"] if c["name"] == "memory_channels_per_socket"]
    assert check == {
        "name": "memory_channels_per_socket",
        "expected": 12,
        "actual": 4,
        "per_socket": {"0": "4/12", "1": "4/12"},
        "source": "/sys/firmware/dmi/tables/DMI",
        "ok": False,
    }
    from hostkit.audit.checks import check_bios
    from hostkit.plan.render import plan_text

    assert "bios memory_channels_per_socket: expected 12, got 4 (MISMATCH) [per socket: 0: 4/12, 1: 4/12]" in plan_text(
        p
    )
    # bios.enforce is false in the bare-metal profile: the audit reports it, tolerated
    (finding,) = [x for x in check_bios(p) if x["check"] == "BIOS memory_channels_per_socket"]
    assert (finding["status"], finding["expected"], finding["actual"]) == ("tolerated", 12, 4)


def test_every_channel_populated_passes_and_speed_has_a_minimum(sysroot_copy):
    from tests import smbios_gen

    root = sysroot_copy("xeon-8480-snc2-ht")
    _with_table(root, smbios_gen.table(smbios_gen.xeon_all_8(speed=4400)))
    f = gather(str(root))
    assert f["memory"]["channels"] == {s: {"total": 8, "populated": list("ABCDEFGH")} for s in ("0", "1")}
    p = plan(f, {"bios": {"min_memory_speed_mts": 4800}})
    checks = {c["name"]: c for c in p["bios"]["checks"]}
    assert (checks["memory_channels_per_socket"]["actual"], checks["memory_channels_per_socket"]["ok"]) == (8, True)
    assert (checks["memory_speed_mts"]["actual"], checks["memory_speed_mts"]["ok"]) == (4400, False)


def test_no_smbios_table_leaves_the_channel_check_unknown(facts):
    p = plan(facts["epyc-9634-nps1"])
    (check,) = [c for c in p["bios"]["checks"] if c["name"] == "memory_channels_per_socket"]
    assert (check["expected"], check["actual"], check["ok"], check["source"]) == ("all", None, None, None)


def test_audit_reads_irqbalance_where_the_facts_found_it_on_the_rhel_layout(sysroot_copy):
    """No inventory path: the audit follows the plan's irq.irqbalance_config, as the role does."""
    from hostkit.audit.checks import run_checks
    from tests.unit.test_tunables import LocalHost

    root = sysroot_copy("epyc-9634-nps1")
    (root / "etc/sysconfig").mkdir(parents=True)
    (root / "etc/default/irqbalance").rename(root / "etc/sysconfig/irqbalance")
    f = gather(str(root))
    p = build_plan(f, load_profile()).to_dict()
    (root / "etc/sysconfig/irqbalance").write_text(f"IRQBALANCE_BANNED_CPULIST={p['isolated']}\n")
    found = {x["check"]: x for x in run_checks(LocalHost(), str(root), f, p)}
    assert (found["irqbalance banned CPUs"]["status"], found["irqbalance banned CPUs"]["source"]) == (
        "pass",
        "/etc/sysconfig/irqbalance",
    )


@pytest.mark.parametrize(
    "text, ban",
    [
        ("#IRQBALANCE_BANNED_CPUS=ff\nIRQBALANCE_BANNED_CPULIST=2-5\n", ("2-5", "IRQBALANCE_BANNED_CPULIST")),
        ("IRQBALANCE_BANNED_CPULIST=2-5\nIRQBALANCE_BANNED_CPUS=0000ff00\n", ("8-15", "IRQBALANCE_BANNED_CPUS")),
        ('IRQBALANCE_BANNED_CPUS="00000001,00000000"\n', ("32", "IRQBALANCE_BANNED_CPUS")),
        ("IRQBALANCE_BANNED_CPUS=\nIRQBALANCE_BANNED_CPULIST=1\n", ("1", "IRQBALANCE_BANNED_CPULIST")),
        ("IRQBALANCE_BANNED_CPULIST=1\nIRQBALANCE_BANNED_CPULIST=3\n", ("3", "IRQBALANCE_BANNED_CPULIST")),
        ("#IRQBALANCE_BANNED_CPULIST=\n", ("", None)),
    ],
)
def test_irqbalance_s_ban_is_read_as_irqbalance_reads_it(text, ban):
    """irqbalance (cputree.c) reads IRQBALANCE_BANNED_CPUS first and, when it is set, ignores the list."""
    from hostkit.facts.services import irqbalance_ban

    assert irqbalance_ban(text) == ban


def test_an_old_irqbalance_ban_is_found_removed_by_the_plan_and_is_drift_until_then(facts, sysroot_copy):
    """The fixture's Debian file carries IRQBALANCE_BANNED_CPUS=0000ff00 (CPUs 8-15), which wins over
    any IRQBALANCE_BANNED_CPULIST: the plan says the apply removes it, the audit reads what irqbalance
    reads (drift, naming the old variable), and once only hostkit's list is left the check passes."""
    from hostkit.audit.checks import run_checks
    from tests.unit.test_tunables import LocalHost

    p = plan(facts["epyc-9634-nps1"])
    assert (
        sum(
            r.startswith(
                "irqbalance: IRQBALANCE_BANNED_CPUS=0000ff00 in /etc/default/irqbalance wins over "
                "IRQBALANCE_BANNED_CPULIST"
            )
            for r in p["reasons"]
        )
        == 1
    )
    left = plan(facts["epyc-9634-nps1"], {"irqbalance": "leave"})
    assert sum(w.startswith("irqbalance: IRQBALANCE_BANNED_CPUS=0000ff00") for w in left["warnings"]) == 1
    root = sysroot_copy("epyc-9634-nps1")
    f = gather(str(root))
    config = root / "etc/default/irqbalance"
    config.write_text(
        config.read_text().replace("#IRQBALANCE_BANNED_CPULIST=\n", f"IRQBALANCE_BANNED_CPULIST={p['isolated']}\n")
    )
    found = {x["check"]: x for x in run_checks(LocalHost(), str(root), f, p)}
    assert (found["irqbalance banned CPUs"]["status"], found["irqbalance banned CPUs"]["actual"]) == (
        "drift",
        "8-15 (IRQBALANCE_BANNED_CPUS, which irqbalance reads first)",
    )
    config.write_text(config.read_text().replace("IRQBALANCE_BANNED_CPUS=0000ff00\n", "#IRQBALANCE_BANNED_CPUS=\n"))
    found = {x["check"]: x for x in run_checks(LocalHost(), str(root), f, p)}
    assert found["irqbalance banned CPUs"]["status"] == "pass"


def test_an_irqbalance_mask_that_is_not_one_is_drift_and_no_cross_layer_check(facts, sysroot_copy):
    """A mask irqbalance could not read: the ban check says so (drift, with the reason), and the
    cross-layer check that needs the ban is not made from it."""
    from hostkit.audit.checks import run_checks
    from tests.unit.test_tunables import LocalHost

    p = plan(facts["epyc-9634-nps1"])
    root = sysroot_copy("epyc-9634-nps1")
    f = gather(str(root))
    (root / "etc/default/irqbalance").write_text("IRQBALANCE_BANNED_CPUS=zz00\n")
    found = {x["check"]: x for x in run_checks(LocalHost(), str(root), f, p)}
    ban = found["irqbalance banned CPUs"]
    assert ban["status"] == "drift" and ban["actual"].startswith("unreadable: "), ban
    assert "IRQ CPUs = online − irqbalance banned" not in found


# ----------------------------------------------------------------------------- C-states and frequency


def with_sysfs(f, key, values, offered=None):
    """Facts as hostkit.facts.power reads them: the files of one SysfsValue and what they offer."""
    f = copy.deepcopy(f)
    f.setdefault("sysfs", {})[key] = {"values": dict(values), "offered": offered}
    return f


EPPS = ("default", "performance", "balance_performance", "balance_power", "power")


def epp_files(f, offered=EPPS, now="balance_performance"):
    v = SYSFS_BY_KEY["energy_performance_preference"]
    cpus = parse_cpulist(f["topology"]["online"])
    return with_sysfs(f, v.key, dict.fromkeys(v.paths(cpus), now), sorted(offered) if offered is not None else None)


def test_c_state_boot_arguments_only_on_request(facts):
    p = plan(facts["xeon-8480-snc2-ht"])
    assert not {"idle", "processor.max_cstate", "intel_idle.max_cstate"} & set(p["cmdline_set"])
    p = plan(
        facts["xeon-8480-snc2-ht"],
        {"cpu_power": {"processor_max_cstate": 1, "intel_idle_max_cstate": 0, "idle_poll": True}},
    )
    assert (
        p["cmdline_set"]["processor.max_cstate"],
        p["cmdline_set"]["intel_idle.max_cstate"],
        p["cmdline_set"]["idle"],
    ) == ("1", "0", "poll")
    for shown in ("processor.max_cstate=1: ", "intel_idle.max_cstate=0: ", "idle=poll: "):
        assert sum(r.startswith(shown) for r in p["reasons"]) == 1, shown
    with pytest.raises(BadInput, match="cpu_power.processor_max_cstate must be <= 9"):
        plan(facts["xeon-8480-snc2-ht"], {"cpu_power": {"processor_max_cstate": 10}})
    with pytest.raises(BadInput, match="cpu_power.idle_poll must be true or false"):
        plan(facts["xeon-8480-snc2-ht"], {"cpu_power": {"idle_poll": "yes"}})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(BARE),
    poll=st.booleans(),
    isolation=st.booleans(),
    kubelet=st.booleans(),
    cstate=st.one_of(st.none(), st.integers(0, 9)),
    latency=st.one_of(st.none(), st.integers(0, 1000)),
)
def test_idle_poll_never_without_the_profile_asking_property(facts, name, poll, isolation, kubelet, cstate, latency):
    p = plan(
        facts[name],
        {
            "isolation": isolation,
            "kubelet": {"enabled": kubelet},
            "cpu_power": {"idle_poll": poll, "processor_max_cstate": cstate, "cpu_dma_latency_us": latency},
        },
    )
    assert (p["cmdline_set"].get("idle") == "poll") == (poll and isolation)
    assert ("idle" in p["cmdline_set"]) == (poll and isolation)


def test_latency_ceiling_held_by_hostkit_s_unit_or_by_tuned_when_driving_it(facts):
    f = copy.deepcopy(facts["xeon-8480-snc2-ht"])
    f["cpuidle"] = {
        "driver": "intel_idle",
        "latency_ceiling_us": 2000000000,
        "governor": "menu",
        "states": [
            {"name": "POLL", "latency_us": 0},
            {"name": "C1", "latency_us": 1},
            {"name": "C1E", "latency_us": 2},
            {"name": "C6", "latency_us": 290},
        ],
    }
    p = plan(f)
    assert p["pm_qos"] == {"cpu_dma_latency_us": 3, "holder": "unit"}
    assert [r for r in p["reasons"] if r.startswith("cpu_dma_latency_us=")] == [
        "cpu_dma_latency_us=3: every CPU wakes within 3 us, by hostkit-pm-qos.service holding /dev/cpu_dma_latency "
        "open from boot; cpuidle intel_idle: skips C6 (290 us), keeps POLL, C1, C1E"
    ]
    f["tuned"] = {
        "installed": True,
        "active": True,
        "running": True,
        "active_profile": "cpu-partitioning",
        "base_profiles": {},
    }
    p = plan(f)
    assert p["pm_qos"] == {"cpu_dma_latency_us": 3, "holder": "tuned"} and p["tuned"]["mode"] == "drive"
    assert "\n[cpu]\ngovernor=performance\nforce_latency=3\n" in p["tuned"]["conf"]
    p = plan(f, {"cpu_power": {"cpu_dma_latency_us": None}})
    assert p["pm_qos"] == {"cpu_dma_latency_us": None, "holder": None} and "force_latency" not in p["tuned"]["conf"]


def test_epp_where_the_driver_offers_it(facts):
    f = facts["xeon-8480-snc2-ht"]
    p = plan(f)  # the captured intel_pstate host has no EPP files: left out, saying which driver
    assert not p["sysfs"] or all(i["key"] != "energy_performance_preference" for i in p["sysfs"])
    assert [r for r in p["reasons"] if r.startswith("energy_performance_preference left out")] == [
        "energy_performance_preference left out: this host has no /sys/devices/system/cpu/cpuN/cpufreq/"
        "energy_performance_preference (cpufreq driver: intel_pstate; intel_pstate and amd-pstate in active mode "
        "offer a preference)"
    ]
    p = plan(epp_files(f))
    epp = [i for i in p["sysfs"] if i["key"] == "energy_performance_preference"]
    assert len(epp) == 224 and {i["value"] for i in epp} == {"performance"}
    assert epp[5] == {
        "key": "energy_performance_preference",
        "kind": "str",
        "value": "performance",
        "path": "/sys/devices/system/cpu/cpu5/cpufreq/energy_performance_preference",
        "allowed_from": "/sys/devices/system/cpu/cpu5/cpufreq/energy_performance_available_preferences",
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(BARE),
    wanted=st.sampled_from((None,) + EPPS),
    offered=st.one_of(st.none(), st.sets(st.sampled_from(EPPS))),
    files=st.booleans(),
)
def test_epp_only_where_the_driver_offers_it_property(facts, name, wanted, offered, files):
    f = epp_files(facts[name], offered) if files else with_sysfs(facts[name], "energy_performance_preference", {})
    p = plan(f, {"cpu_power": {"energy_performance_preference": wanted}})
    epp = [i for i in p["sysfs"] if i["key"] == "energy_performance_preference"]
    offered_it = files and wanted is not None and (offered is None or wanted in offered)
    assert bool(epp) == offered_it
    assert all(
        i["value"] == wanted and i["allowed_from"].endswith("/energy_performance_available_preferences") for i in epp
    )


# ----------------------------------------------------------------------------- workqueues, THP, KSM, hugepages

WQ = "/sys/devices/virtual/workqueue/cpumask"
WB = "/sys/bus/workqueue/devices/writeback/cpumask"


def test_workqueue_and_writeback_masks_on_housekeeping(facts):
    f = facts["epyc-9634-nps1"]
    full = format_mask(parse_cpulist(f["topology"]["online"]), f["topology"]["cpus"])
    f = with_sysfs(with_sysfs(f, "workqueue_cpumask", {WQ: full}), "writeback_cpumask", {WB: full})
    p = plan(f)
    masks = {i["path"]: i for i in p["sysfs"] if i["kind"] == "mask"}
    assert set(masks) == {WQ, WB}
    assert all(parse_mask(i["value"]) == parse_cpulist(p["housekeeping"]) for i in masks.values())
    assert sum(r.startswith("workqueue_cpumask=") for r in p["reasons"]) == 1
    p = plan(f, {"kernel_noise": {"writeback_cpumask": False}})
    assert [i["path"] for i in p["sysfs"] if i["kind"] == "mask"] == [WQ]
    # nothing isolated: the kernel's full mask stands; a mask an earlier tuning narrowed is widened again
    assert not [i for i in plan(f, {"isolation": False})["sysfs"] if i["kind"] == "mask"]
    narrowed = with_sysfs(f, "workqueue_cpumask", {WQ: "3"})
    p = plan(narrowed, {"isolation": False})
    assert [(i["path"], parse_mask(i["value"])) for i in p["sysfs"] if i["kind"] == "mask"] == [
        (WQ, parse_cpulist(f["topology"]["online"]))
    ]


def test_thp_and_ksm_from_the_profile_and_only_offered_choices(facts):
    f = with_sysfs(
        facts["epyc-9634-nps1"],
        "thp_enabled",
        {"/sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never"},
    )
    f = with_sysfs(
        f, "thp_defrag", {"/sys/kernel/mm/transparent_hugepage/defrag": "always defer defer+madvise [madvise] never"}
    )
    f = with_sysfs(f, "ksm_run", {"/sys/kernel/mm/ksm/run": "1"})
    p = plan(f)
    assert {i["key"]: (i["value"], i["kind"]) for i in p["sysfs"]} == {
        "thp_enabled": ("madvise", "choice"),
        "thp_defrag": ("defer", "choice"),
        "ksm_run": ("0", "int"),
    }
    p = plan(with_sysfs(f, "thp_defrag", {"/sys/kernel/mm/transparent_hugepage/defrag": "[always] madvise never"}))
    assert "thp_defrag" not in {i["key"] for i in p["sysfs"]}
    assert "thp_defrag=defer left out: the kernel offers always, madvise, never" in p["reasons"]
    p = plan(f, {"memory": {"thp_enabled": None, "thp_defrag": None, "ksm_run": None}})
    assert not p["sysfs"]


def hugepage_facts(f):
    v = SYSFS_BY_KEY["hugepages_2m_per_node"]
    nodes = [n["id"] for n in f["topology"]["numa_nodes"] if n["memory_kb"]]
    return with_sysfs(f, v.key, dict.fromkeys(v.paths(nodes=nodes), "0"))


def test_hugepages_per_node_and_the_node_memory_limit(facts):
    f = hugepage_facts(facts["xeon-8480-snc2-ht"])  # four nodes of 125 GiB
    p = plan(f, {"memory": {"hugepages_2m_per_node": 8192}})
    pages = [i for i in p["sysfs"] if i["key"] == "hugepages_2m_per_node"]
    assert [(i["path"], i["value"]) for i in pages] == [
        (f"/sys/devices/system/node/node{n}/hugepages/hugepages-2048kB/nr_hugepages", "8192") for n in range(4)
    ]
    assert any(
        r.startswith("hugepages_2m_per_node=8192: ") and r.endswith("(16384 MiB per node)") for r in p["reasons"]
    )
    p = plan(f, {"memory": {"hugepages_2m_per_node": 64000}})
    assert p["refused"][0].startswith(
        "hugepages_2m_per_node=64000 needs 128000 MiB on NUMA node 0, which has "
        "128000 MiB: at most 112000 MiB (56000 pages) may be hugepages"
    )
    assert not [i for i in p["sysfs"] if i["key"] == "hugepages_2m_per_node"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(BARE), pages=st.integers(0, 1 << 24))
def test_hugepages_per_node_never_more_than_the_node_s_memory_property(facts, name, pages):
    f = hugepage_facts(facts[name])
    p = plan(f, {"memory": {"hugepages_2m_per_node": pages}})
    planned = [i for i in p["sysfs"] if i["key"] == "hugepages_2m_per_node"]
    mem = {n["id"]: n["memory_kb"] for n in f["topology"]["numa_nodes"] if n["memory_kb"]}
    for i in planned:
        node = int(i["path"].split("/node/node")[1].split("/")[0])
        assert int(i["value"]) * HUGEPAGE_KB < mem[node]
    assert bool(planned) != bool([r for r in p["refused"] if r.startswith("hugepages_2m_per_node")])


# ----------------------------------------------------------------------------- kernel threads


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(BARE),
    wanted=st.booleans(),
    isolation=st.booleans(),
    reserve=st.integers(min_value=1, max_value=3),
    data=st.data(),
)
def test_kernel_threads_never_go_to_an_isolated_cpu_property(facts, name, wanted, isolation, reserve, data):
    """Whatever the threads' allowed CPUs (all, a node's, one CPU) and flags: a thread the plan moves
    lands on housekeeping CPUs only, on its own node's when it has some; bound threads never move."""
    p = plan(
        facts[name],
        {"isolation": isolation, "reserve_per_node": reserve, "kernel_noise": {"kthreads_housekeeping": wanted}},
    )
    k = p["kthreads"]
    assert k["move"] == (wanted and isolation and not p["refused"])
    if not k["move"]:
        assert (k["housekeeping"], k["isolated"]) == ("", "")
        return
    hk, iso = parse_cpulist(k["housekeeping"]), parse_cpulist(k["isolated"])
    assert (hk, iso) == (parse_cpulist(p["housekeeping"]), parse_cpulist(p["isolated"])) and hk and not hk & iso
    online = sorted(parse_cpulist(p["online"]))
    nodes = [parse_cpulist(n["cpus"]) for n in p["nodes"]]
    allowed = st.one_of(
        st.just(frozenset(online)), st.sampled_from(nodes), st.sets(st.sampled_from(online), min_size=1).map(frozenset)
    )
    threads = [
        {
            "pid": pid,
            "comm": f"k{pid}",
            "start": pid,
            "cpus": format_cpulist(cpus),
            "flags": PF_KTHREAD | (PF_NO_SETAFFINITY if bound else 0),
        }
        for pid, (cpus, bound) in enumerate(
            data.draw(st.lists(st.tuples(allowed, st.booleans()), min_size=1, max_size=12)), start=2
        )
    ]
    moves = {m["pid"]: m for m in plan_moves(threads, hk, iso)}
    for t in threads:
        cpus = parse_cpulist(t["cpus"])
        bound = bool(t["flags"] & PF_NO_SETAFFINITY)
        assert (t["pid"] in moves) == (not bound and bool(cpus & iso)), t
        if t["pid"] in moves:
            after = parse_cpulist(moves[t["pid"]]["after"])
            assert after and after <= hk and not after & iso
            assert after == ((cpus & hk) or hk)  # a per-node thread stays on its node's housekeeping CPUs
