"""The planner (pure function of facts + profile) and profile validation."""

from __future__ import annotations

import copy
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostkit.core.cpulist import format_cpulist, parse_cpulist
from hostkit.core.kernel_args import split_isolcpus
from hostkit.errors import BadInput
from hostkit.facts import gather
from hostkit.plan import Plan, build_plan, make_plan
from hostkit.profiles import apply_overrides, load_profile, shipped


@pytest.fixture(scope="module")
def facts(sysroots):
    return {name: gather(str(root)) for name, root in sysroots.items()}


def plan_for(facts, name, profile="bare-metal-inference", overrides=None, force=False):
    return typed_for(facts, name, profile, overrides, force).to_dict()


def typed_for(facts, name, profile="bare-metal-inference", overrides=None, force=False) -> Plan:
    prof, pinned = apply_overrides(load_profile(profile), overrides)
    return build_plan(facts[name], prof, pinned, force=force)


# The plan JSON contract: these keys, in this order (hostkit plan --json, the roles' hostkit_plan).
PLAN_KEYS = [
    "host",
    "profile",
    "isolation",
    "online",
    "housekeeping",
    "isolated",
    "irq_cpus",
    "irq_mask",
    "nic_irq_cpus",
    "nodes",
    "pools",
    "cmdline",
    "cmdline_set",
    "cmdline_remove",
    "sysctl",
    "governor",
    "governor_cpus",
    "irq",
    "containerd",
    "kubelet",
    "bios",
    "smoke",
    "tuned",
    "sysfs",
    "pm_qos",
    "kthreads",
    "warnings",
    "reasons",
    "refused",
    "refused_parts",
]


def assert_typed_invariants(plan: Plan):
    """What the typed plan makes expressible: per-node partitions that add up, and a kernel command line,
    IRQ placement and kubelet reservation that all name the same CPU sets."""
    assert plan.housekeeping | plan.isolated == plan.online and not plan.housekeeping & plan.isolated
    for n in plan.nodes:
        assert n.housekeeping | n.isolated == n.cpus & plan.online and not n.housekeeping & n.isolated
        assert n.housekeeping <= plan.housekeeping and n.isolated <= plan.isolated and n.irq_cpus <= plan.irq_cpus
    assert frozenset().union(*(n.cpus for n in plan.nodes)) >= plan.online  # every online CPU has a node
    if plan.isolation and plan.isolated and not plan.refused and not plan.refused_parts:
        args = plan.cmdline_set
        assert parse_cpulist(split_isolcpus(args["isolcpus"])[1]) == plan.isolated
        assert parse_cpulist(args["nohz_full"]) == parse_cpulist(args["rcu_nocbs"]) == plan.isolated
        assert parse_cpulist(args["irqaffinity"]) == plan.housekeeping
        assert all(parse_cpulist(c) <= plan.housekeeping for c in plan.irq.assignments.values())
        assert parse_cpulist(plan.irq.banned_cpulist) == plan.online - plan.irq_cpus >= plan.isolated
        if plan.kubelet.get("config", {}).get("reservedSystemCPUs"):
            assert parse_cpulist(plan.kubelet["config"]["reservedSystemCPUs"]) == plan.housekeeping
    if plan.refused_parts:  # a UKI host: its kernel arguments refused, nothing of them planned
        assert not plan.cmdline_set and not plan.cmdline_remove
    doc = plan.to_dict()
    assert list(doc) == PLAN_KEYS
    assert json.loads(json.dumps(doc)) == doc  # plain JSON, as extravars and --json carry it


def assert_invariants(plan, f):
    online = parse_cpulist(f["topology"]["online"])
    hk, iso = parse_cpulist(plan["housekeeping"]), parse_cpulist(plan["isolated"])
    assert hk | iso == online and not hk & iso  # a partition of the online CPUs
    assert 0 in hk  # CPU 0 stays housekeeping
    for core in f["topology"]["cores"]:
        c = parse_cpulist(core)
        assert c <= hk or c <= iso  # SMT siblings never split
    for node in f["topology"]["numa_nodes"]:
        assert parse_cpulist(node["cpus"]) & hk  # every node keeps housekeeping
    assert parse_cpulist(plan["irq_cpus"]) <= hk


def test_shipped_profiles():
    assert {"bare-metal-inference", "virtual-guest", "vmware-guest", "baseline"} <= set(shipped())
    guest = load_profile("virtual-guest")
    assert guest["extends"] == "bare-metal-inference" and guest["isolation"] is False
    assert guest["sysctl"]["kernel.sched_rt_runtime_us"] == 950000 and guest["smoke"]["transport"] == "socket"
    vmware = load_profile("vmware-guest")  # the VMware specialization: virtual-guest's values, its own name
    assert vmware["extends"] == "virtual-guest" and vmware["name"] == "vmware-guest"
    assert {k: v for k, v in vmware.items() if k not in ("name", "extends", "description")} == {
        k: v for k, v in guest.items() if k not in ("name", "extends", "description")
    }


# A shipped profile named in a message: "the <name> profile" (the guards' advice), "profile <name>:" (a reason).
PROFILE_NAMED = re.compile(r"\bthe ([a-z0-9][a-z0-9-]*) profile\b|^profile ([a-z0-9][a-z0-9-]*):")


def test_every_profile_the_planner_names_exists(facts):
    """Refusals, warnings and reasons advise only profiles that load: every message of every fixture's
    plan under every shipped profile, forced or not, and the guards' advice for each hypervisor."""
    from hostkit.plan.planner import GUEST_PROFILE, GUEST_PROFILES, guest_profile

    named: set[str] = set()
    for name in facts:
        for profile in shipped():
            for force in (False, True):
                try:
                    p = plan_for(facts, name, profile, force=force)
                except BadInput:
                    continue
                for text in p["refused"] + p["refused_parts"] + p["warnings"] + p["reasons"]:
                    named |= {a or b for a, b in PROFILE_NAMED.findall(text)}
    assert {"virtual-guest", "vmware-guest", "baseline"} <= named  # the messages were read
    for profile in named | {GUEST_PROFILE, *GUEST_PROFILES.values()}:
        assert load_profile(profile)["name"] == profile
    assert guest_profile("vmware") == "vmware-guest" and guest_profile("kvm") == guest_profile(None) == "virtual-guest"


@pytest.mark.parametrize("name,advice", [("vmware-88vcpu", "vmware-guest"), ("kvm-small", "virtual-guest")])
def test_the_guards_advise_the_guest_s_own_profile(facts, name, advice):
    p = plan_for(facts, name)
    assert p["refused"] and p["refused"][0].endswith(f"(use the {advice} profile, or --force)"), p["refused"]
    assert plan_for(facts, name, advice)["refused"] == []


def test_seed_host_partition(facts):
    p = plan_for(facts, "epyc-9634-nps1")
    assert p["housekeeping"] == "0-1,84-85" and p["isolated"] == "2-83,86-167"
    # kubelet's static CPU manager (the profile's): no domain, host processes on housekeeping, timers may move
    assert p["cmdline"] == (
        "isolcpus=managed_irq,2-83,86-167 nohz_full=2-83,86-167 "
        "rcu_nocbs=2-83,86-167 irqaffinity=0-1,84-85 systemd.cpu_affinity=0-1,84-85 "
        "skew_tick=1 nosoftlockup nmi_watchdog=0 tsc=reliable"
    )
    assert p["nic_irq_cpus"] == {"ens1f0np0": "0-1", "ens1f1np1": "0-1"}  # NIC on node 0
    assert p["pools"] == {"0": "2-83", "1": "86-167"}
    assert p["sysctl"] == {
        "kernel.sched_rt_runtime_us": 950000,
        "kernel.numa_balancing": 0,
        "kernel.timer_migration": 1,
        "vm.zone_reclaim_mode": 0,
        "vm.stat_interval": 10,
    }
    assert p["kubelet"]["config"]["reservedSystemCPUs"] == "0-1,84-85"
    assert p["refused"] == [] and p["governor"] == "performance"
    assert_invariants(p, facts["epyc-9634-nps1"])
    assert_typed_invariants(typed_for(facts, "epyc-9634-nps1"))


def test_smt_siblings_reserved_together_and_irq_cores_on_nic_node(facts):
    p = plan_for(facts, "epyc-9654-nps4-smt", overrides={"irq_cores": 1})
    nodes = {n["id"]: n for n in p["nodes"]}
    assert nodes[0]["housekeeping"] == "0-1,192-193"
    assert nodes[1]["housekeeping"] == "24-26,216-218"  # the NIC's node: 2 + 1 cores
    assert p["nic_irq_cpus"]["enp65s0f0np0"] == "24-26,216-218"
    assert_invariants(p, facts["epyc-9654-nps4-smt"])


@pytest.mark.parametrize("name,needle", [("vmware-88vcpu", "deceptive topology"), ("kvm-small", "virtual machine")])
def test_guards_refuse_isolation_on_guests(facts, name, needle):
    p = plan_for(facts, name)
    assert p["refused"] and needle in p["refused"][0]
    assert p["cmdline"] == ""


def test_force_plans_isolation_on_a_guest(facts):
    p = plan_for(facts, "kvm-small", force=True)
    assert p["refused"] == [] and p["isolated"] == "2-3"


def test_vmware_guest_profile_removes_isolation(facts):
    p = plan_for(facts, "vmware-88vcpu", "vmware-guest")
    assert p["cmdline"] == "" and set(p["cmdline_remove"]) == {
        "isolcpus",
        "nohz_full",
        "rcu_nocbs",
        "irqaffinity",
        "systemd.cpu_affinity",
    }
    assert p["irq"]["irqbalance"] == "restore" and p["irq"]["affinity"] is False
    assert p["smoke"]["transport"] == "socket"
    assert any("500000 -> 950000" in r for r in p["reasons"])


def test_pinned_isolated_override(facts):
    p = plan_for(facts, "epyc-9634-nps1", overrides={"isolated": "8-83,92-167"})
    assert p["isolated"] == "8-83,92-167" and p["housekeeping"] == "0-7,84-91"
    assert_invariants(p, facts["epyc-9634-nps1"])


@pytest.mark.parametrize(
    "overrides,needle",
    [
        ({"isolated": "0-167"}, "CPU 0"),
        ({"isolated": "1-83,84-167"}, "no housekeeping"),
        ({"isolated": "193"}, "split"),
    ],
)
def test_pinned_partitions_that_guards_refuse(facts, overrides, needle):
    name = "epyc-9654-nps4-smt" if "193" in overrides["isolated"] else "epyc-9634-nps1"
    p = plan_for(facts, name, overrides=overrides)
    assert any(needle in r for r in p["refused"]), p["refused"]


@pytest.mark.parametrize(
    "overrides,needle",
    [
        ({"isolated": "3-1"}, "runs backwards"),
        ({"isolated": "0-"}, "not a CPU number"),
        ({"isolated": "a"}, "not a CPU number"),
        ({"isolated": "160-200"}, "not online"),
        ({"isolated": "0-3; rm -rf /"}, "not a CPU number"),
        ({"reserve_per_node": 84}, "must be <= 64"),
        ({"reserve_per_node": 0}, "must be >= 1"),
        ({"sysctl": {"kernel.sched_rt_runtime_us": -5}}, "must be >= -1"),
        ({"sysctl": {"kernel.sched_rt_runtime_us": 10**9}}, "must be <= 1000000"),
        ({"sysctl": {"kernel.sched_rt_runtime_us": "950000"}}, "must be an integer"),
        ({"governor": "turbo"}, "must be one of"),
        ({"no_such_key": 1}, "unknown key 'no_such_key'"),
        ({"kubelet": {"cpu_manager_policy": "dynamic"}}, "kubelet.cpu_manager_policy"),
        ({"cmdline_extra": ["quiet; reboot"]}, "not a plain kernel argument"),
        ({"isolation": "yes"}, "must be true or false"),
    ],
)
def test_bad_overrides_are_bad_input(facts, overrides, needle):
    with pytest.raises(BadInput) as exc:
        plan_for(facts, "epyc-9634-nps1", overrides=overrides)
    assert needle in str(exc.value)


def test_reserve_all_cores_of_a_node_is_bad_input(facts):
    with pytest.raises(BadInput, match="reserve_per_node=28 leaves no isolated core on NUMA node 0 .it has 28 cores"):
        plan_for(facts, "xeon-8480-snc2-ht", overrides={"reserve_per_node": 28})


def test_governor_not_offered_is_bad_input(facts):
    f = copy.deepcopy(facts["epyc-9654-nps4-smt"])  # amd-pstate-epp offers performance/powersave only
    prof = load_profile()
    prof["governor"] = "schedutil"
    with pytest.raises(BadInput, match="not offered"):
        make_plan(f, prof)


def test_profile_files_extends_and_errors(tmp_path):
    good = tmp_path / "mine.yml"
    good.write_text("name: mine\nextends: bare-metal-inference\nreserve_per_node: 3\n")
    assert load_profile(str(good))["reserve_per_node"] == 3
    for text, needle in (
        ("name: x\nbogus: 1\n", "unknown key 'bogus'"),
        ("- a\n", "mapping"),
        ("name: [\n", "not valid YAML"),
        ("name: x\nextends: nope\n", "unknown profile"),
    ):
        bad = tmp_path / "bad.yml"
        bad.write_text(text)
        with pytest.raises(BadInput, match=needle.replace("[", r"\[")):
            load_profile(str(bad))
    loop = tmp_path / "loop.yml"
    loop.write_text(f"name: loop\nextends: {loop}\n")
    with pytest.raises(BadInput, match="extends itself"):
        load_profile(str(loop))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    reserve=st.integers(min_value=1, max_value=6),
    irq_cores=st.integers(min_value=0, max_value=3),
    name=st.sampled_from(["epyc-9634-nps1", "epyc-9654-nps4-smt", "xeon-8480-snc2-ht"]),
)
def test_planner_invariants_property(facts, reserve, irq_cores, name):
    typed = typed_for(facts, name, overrides={"reserve_per_node": reserve, "irq_cores": irq_cores})
    p = typed.to_dict()
    assert p["refused"] == []
    assert_invariants(p, facts[name])
    assert_typed_invariants(typed)
    hk = parse_cpulist(p["housekeeping"])
    for node in facts[name]["topology"]["numa_nodes"]:
        cores = {c for c in facts[name]["topology"]["cores"] if parse_cpulist(c) <= parse_cpulist(node["cpus"])}
        reserved = {c for c in cores if parse_cpulist(c) <= hk}
        assert len(reserved) >= reserve


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_pinned_isolated_property(facts, data):
    f = facts["xeon-8480-snc2-ht"]
    cores = [parse_cpulist(c) for c in f["topology"]["cores"]]
    chosen = data.draw(st.sets(st.sampled_from(range(len(cores))), min_size=1, max_size=len(cores)))
    isolated = set().union(*(cores[i] for i in chosen))
    typed = typed_for(facts, "xeon-8480-snc2-ht", overrides={"isolated": format_cpulist(isolated)})
    p = typed.to_dict()
    assert_typed_invariants(typed)
    if not p["refused"]:
        assert_invariants(p, f)
    else:
        assert 0 in isolated or any(not parse_cpulist(n["cpus"]) - isolated for n in f["topology"]["numa_nodes"])


@pytest.mark.parametrize("profile", shipped())
def test_make_plan_is_the_typed_plan_s_document_on_every_fixture(facts, profile):
    for name in facts:
        prof = load_profile(profile)
        for force in (False, True):
            try:
                typed = build_plan(facts[name], prof, force=force, host=name)
            except BadInput as exc:  # e.g. forced isolation on a 2-core guest: bad input either way
                with pytest.raises(BadInput, match=re.escape(str(exc))):
                    make_plan(facts[name], prof, force=force, host=name)
                continue
            assert make_plan(facts[name], prof, force=force, host=name) == typed.to_dict()
            assert_typed_invariants(typed)


def test_to_dict_is_a_fresh_copy(facts):
    typed = typed_for(facts, "epyc-9634-nps1")
    doc = typed.to_dict()
    doc["kubelet"]["config"]["reservedSystemCPUs"] = "0-167"
    doc["irq"]["assignments"].clear()
    doc["reasons"].append("changed by a reader")
    assert typed.to_dict() == plan_for(facts, "epyc-9634-nps1")
