"""The OS's topology after a BIOS power cycle, predicted before it (hostkit.plan.after_bios), and the
plan made for it (hostkit.tuning.plan's bios_pending).

The oracle is real machines' files: the EPYC 9654 fixture was captured at NPS4 and the Xeon 8480 one
at SNC2. Each is folded back to one node per socket (the same machine as NPS1 / SNC off would show
it: the nodes of a socket merged), then predicted at its real setting again: the nodes must come
back as the kernel listed them.
"""

from __future__ import annotations

import copy

import pytest

from hostkit.actions import PlanArgs
from hostkit.actions import plan as plan_action
from hostkit.core.cpulist import format_cpulist, parse_cpulist
from hostkit.facts import gather
from hostkit.plan.after_bios import CannotPredict, changes_topology, predict


@pytest.fixture(scope="module")
def facts_of(sysroots):
    cache = {}

    def get(name: str) -> dict:
        if name not in cache:
            cache[name] = gather(str(sysroots[name]))
        return copy.deepcopy(cache[name])

    return get


def one_node_per_socket(facts: dict) -> dict:
    """The same machine with its BIOS at one NUMA node per socket: each socket's nodes merged."""
    topo = facts["topology"]
    nodes = []
    for s in topo["sockets_cpus"]:
        mine = [n for n in topo["numa_nodes"] if parse_cpulist(n["cpus"]) <= parse_cpulist(s["cpus"])]
        mem = [n["memory_kb"] for n in mine]
        nodes.append(
            {
                "id": len(nodes),
                "cpus": format_cpulist(frozenset().union(*(parse_cpulist(n["cpus"]) for n in mine))),
                "distances": [],
                "memory_kb": None if None in mem else sum(mem),
            }
        )
    out = copy.deepcopy(facts)
    out["topology"].update(numa_nodes=nodes, numa_per_socket=1)
    for nic in out["nics"]:
        sid = next(
            s["id"]
            for s in topo["sockets_cpus"]
            for n in topo["numa_nodes"]
            if n["id"] == nic["numa_node"] and parse_cpulist(n["cpus"]) <= parse_cpulist(s["cpus"])
        )
        nic["numa_node"] = sid
    return out


@pytest.mark.parametrize("fixture", ["epyc-9654-nps4-smt", "xeon-8480-snc2-ht"])
def test_a_real_machines_nodes_come_back_from_one_node_per_socket(facts_of, fixture):
    real = facts_of(fixture)
    per_socket = real["topology"]["numa_per_socket"]
    merged = one_node_per_socket(real)
    predicted, notes = predict(merged, {"numa_per_socket": per_socket, "threads_per_core": None})
    assert [(n["id"], n["cpus"], n["memory_kb"]) for n in predicted["topology"]["numa_nodes"]] == [
        (n["id"], n["cpus"], n["memory_kb"]) for n in real["topology"]["numa_nodes"]
    ]
    assert predicted["topology"]["numa_per_socket"] == per_socket
    assert predicted["topology"]["numa_mode"] == real["topology"]["numa_mode"]
    assert "checked once the host has booted" in notes[0]
    # The NIC is put on its socket's first node, and said so: where its root port lands is the boot's to say.
    nic = predicted["nics"][0]
    first_of_socket = {0: 0, 1: per_socket}[merged["nics"][0]["numa_node"]]
    assert nic["numa_node"] == first_of_socket
    assert any(nic["name"] in line and "assumed on NUMA node" in line for line in notes), notes


def test_no_topology_change_leaves_the_facts_as_they_are(facts_of):
    facts = facts_of("epyc-9634-nps1")
    same = {"numa_per_socket": 1, "threads_per_core": 1}
    assert not changes_topology(facts, same)
    assert predict(facts, same) == (facts, [])
    assert not changes_topology(facts, {"numa_per_socket": None, "threads_per_core": None})


def test_nps0_is_one_node_over_both_sockets(facts_of):
    facts = facts_of("epyc-9634-nps1")
    predicted, _ = predict(facts, {"numa_per_socket": 0, "threads_per_core": 1})
    nodes = predicted["topology"]["numa_nodes"]
    assert [(n["id"], n["cpus"]) for n in nodes] == [(0, facts["topology"]["online"])]
    assert nodes[0]["memory_kb"] == sum(n["memory_kb"] for n in facts["topology"]["numa_nodes"])
    assert {nic["numa_node"] for nic in predicted["nics"]} == {0}


def test_what_has_no_one_answer_before_the_boot_is_said(facts_of):
    facts = facts_of("epyc-9634-nps1")  # 84 cores per socket, no SMT
    with pytest.raises(CannotPredict, match="threads per core from 1 to 2"):
        predict(facts, {"numa_per_socket": 1, "threads_per_core": 2})
    with pytest.raises(CannotPredict, match="84 cores do not split evenly into 8 NUMA nodes"):
        predict(facts, {"numa_per_socket": 8, "threads_per_core": 1})


def test_the_plan_is_made_for_the_topology_the_bios_gives(facts_of):
    facts = facts_of("epyc-9634-nps1")
    now = plan_action(PlanArgs(host="h", facts=facts, hostvars={}, writable=False))
    after = plan_action(
        PlanArgs(
            host="h",
            facts=facts,
            hostvars={},
            writable=False,
            bios_pending={"numa_per_socket": 4},  # the BIOS plan's cycle_changes
        )
    )
    assert "after_bios" not in now and len(now["plan"]["nodes"]) == 2
    assert after["after_bios"]["predicted"] is True and len(after["plan"]["nodes"]) == 8
    # every node keeps a housekeeping CPU of its own: the partition is the new topology's
    assert all(n["housekeeping"] for n in after["plan"]["nodes"])
    assert after["plan"]["cmdline_set"]["isolcpus"] != now["plan"]["cmdline_set"]["isolcpus"]
    unknown = plan_action(
        PlanArgs(
            host="h",
            facts=facts,
            hostvars={},
            writable=False,
            bios_pending={"threads_per_core": 2},
        )
    )
    assert unknown["after_bios"]["predicted"] is False
    assert "planned again once the host has booted" in unknown["after_bios"]["why"]
    assert unknown["plan"] == {**now["plan"]}  # planned as the host is now


def plan_for(facts: dict, **kw) -> dict:
    return plan_action(PlanArgs(host="h", facts=facts, hostvars={}, writable=False, **kw))


@pytest.mark.parametrize(
    ("fixture", "held"),
    [
        # the Xeon's NIC is on the first node of its socket, where the prediction puts it: the plan holds
        ("xeon-8480-snc2-ht", True),
        # the EPYC's NIC is on its socket's second node: its IRQs go to that node's housekeeping CPUs,
        # which the check after the cycle names; the partition and the kernel arguments are the same
        # (the roles' second pass moves the IRQs, no second boot)
        ("epyc-9654-nps4-smt", False),
    ],
)
def test_the_plan_after_the_cycle_says_whether_the_prediction_held(facts_of, fixture, held):
    real = facts_of(fixture)
    merged = one_node_per_socket(real)
    after = {"numa_per_socket": real["topology"]["numa_per_socket"], "threads_per_core": None}
    before = plan_for(merged, bios_pending=after)["plan"]  # what the apply wrote before the cycle
    booted = plan_for(real, planned_before=before)  # the host as it booted
    assert booted["prediction"]["held"] is held, booted["prediction"]
    if not held:
        missed = {line.split(":", 1)[0] for line in booted["prediction"]["misses"]}
        assert missed == {"nic_irq_cpus", "irq.by_name"}, booted["prediction"]
    assert plan_for(real, planned_before=booted["plan"])["prediction"] == {"held": True, "misses": []}
