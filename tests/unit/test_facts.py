"""What the facts engine says about each fixture, beyond what lscpu can check."""

from __future__ import annotations

import pytest

from hostkit.core.cpulist import parse_cpulist
from hostkit.facts import gather
from hostkit.facts.irqs import parse_interrupts
from hostkit.facts.kernel import parse_cmdline


@pytest.fixture(scope="module")
def facts(sysroots):
    return {name: gather(str(root)) for name, root in sysroots.items()}


def test_epyc_9634_nps1_has_12_ccds_of_7_cores_per_socket(facts):
    f = facts["epyc-9634-nps1"]
    t = f["topology"]
    assert (t["sockets"], t["cores_per_socket"], t["threads_per_core"], t["cpus"]) == (2, 84, 1, 168)
    assert t["numa_per_socket"] == 1 and t["numa_mode"] == "NPS1"
    assert [n["cpus"] for n in t["numa_nodes"]] == ["0-83", "84-167"]
    assert len(t["l3_groups"]) == 24
    assert t["l3_groups"][0]["cpus"] == "0-6" and t["l3_groups"][12]["cpus"] == "84-90"
    assert t["smt"]["active"] is False
    assert f["virtualization"] == {
        "hypervisor": None,
        "virtual": False,
        "evidence": [],
        "deceptive_topology": False,
        "reasons": [],
        "steal_reported": None,
    }
    assert f["cpufreq"]["governors"] == {"schedutil": "0-167"}


def test_epyc_nps4_smt_siblings_and_nodes(facts):
    t = facts["epyc-9654-nps4-smt"]["topology"]
    assert t["cpus"] == 384 and t["threads_per_core"] == 2
    assert t["numa_per_socket"] == 4 and t["numa_mode"] == "NPS4"
    assert t["numa_nodes"][0]["cpus"] == "0-23,192-215"  # first threads, then their SMT siblings
    assert t["numa_nodes"][0]["distances"][:5] == [10, 12, 12, 12, 32]
    assert "0,192" in t["cores"]


def test_intel_snc2(facts):
    t = facts["xeon-8480-snc2-ht"]["topology"]
    assert t["numa_mode"] == "SNC2" and len(t["numa_nodes"]) == 4
    assert len(t["l3_groups"]) == 2  # one L3 per socket on Sapphire Rapids


def test_vmware_guest_is_deceptive_with_reasons(facts):
    f = facts["vmware-88vcpu"]
    v = f["virtualization"]
    assert v["hypervisor"] == "vmware" and v["deceptive_topology"] is True
    assert len(v["reasons"]) == 2
    assert "own socket" in v["reasons"][0] and "one NUMA node" in v["reasons"][1]
    k = f["kernel"]
    assert k["sched_rt_runtime_us"] == 500000
    assert k["rt_throttling"] == {"enabled": True, "max_stall_ms": 500.0}
    assert k["cmdline_args"]["isolcpus"] == {"flags": ["domain"], "cpus": "8-87"}
    assert f["topology"]["isolated"] == "8-87"
    assert f["cpufreq"]["available"] is False
    assert f["steal"]["total"]["percent"] == pytest.approx(4.0, abs=0.01)
    assert f["nics"][0]["numa_node"] == -1 and len(f["nics"][0]["irqs"]) == 8


def test_small_kvm_guest_is_virtual_but_not_deceptive(facts):
    v = facts["kvm-small"]["virtualization"]
    assert v["hypervisor"] == "kvm" and not v["deceptive_topology"]
    nic = facts["kvm-small"]["nics"][0]
    assert nic["name"] == "enp1s0" and nic["irqs"] == [24, 25]  # virtio-net: IRQs on the PCI parent


def test_nic_irqs_and_locality(facts):
    nics = {n["name"]: n for n in facts["xeon-8480-snc2-ht"]["nics"]}
    nic = nics["ens785f0"]
    assert nic["numa_node"] == 2
    node2 = facts["xeon-8480-snc2-ht"]["topology"]["numa_nodes"][2]["cpus"]
    assert nic["local_cpulist"] == node2
    irqs = {i["irq"]: i for i in facts["xeon-8480-snc2-ht"]["irqs"]}
    for irq in nic["irqs"]:
        assert irqs[irq]["name"].startswith("ens785f0-TxRx-")
        assert parse_cpulist(irqs[irq]["effective_affinity_list"]) <= parse_cpulist(node2)


def test_this_machine_capture_is_a_kvm_guest(facts):
    f = facts["this-machine"]
    assert f["virtualization"]["hypervisor"] == "kvm"
    assert f["topology"]["cpus"] >= 1


@pytest.mark.live
def test_live_facts_read_this_machine():
    f = gather("/")
    t = f["topology"]
    import os

    assert t["cpus"] >= len(os.sched_getaffinity(0))
    assert f["kernel"]["sched_rt_period_us"] == int(open("/proc/sys/kernel/sched_rt_period_us").read())
    assert f["kernel"]["release"] == os.uname().release
    assert len(f["irqs"]) > 0


def test_parse_cmdline_flags_and_init_args():
    c = parse_cmdline(
        "ro quiet isolcpus=managed_irq,domain,2-5 nohz_full=2-5 rcu_nocbs=2-5 irqaffinity=0-1 -- isolcpus=9"
    )
    assert c["isolcpus"] == {"flags": ["managed_irq", "domain"], "cpus": "2-5"}
    assert c["nohz_full"] == "2-5" and c["rcu_nocbs"] == "2-5" and c["irqaffinity"] == "0-1"
    assert c["args"]["ro"] is None and "isolcpus" in c["args"]
    assert parse_cmdline("ro")["isolcpus"] is None


def test_parse_interrupts_columns_and_names():
    text = (
        "           CPU0       CPU1       \n"
        "  0:         42          0   IO-APIC   2-edge      timer\n"
        " 41:       1157          3  PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx, eth0\n"
        "NMI:          0          0   Non-maskable interrupts\n"
        "ERR:          0\n"
    )
    rows = parse_interrupts(text)
    assert [r["irq"] for r in rows] == [0, 41]
    assert rows[1]["per_cpu"] == [1157, 3] and rows[1]["total"] == 1160
    assert rows[1]["chip"] == "PCI-MSIX-0000:00:04.0" and rows[1]["name"] == "virtio3-rx, eth0"
