"""Plan and apply on lab hosts built from the fixtures, then rollback: over real SSH, through ansible-runner."""

from __future__ import annotations

import pytest

from hostkit.agent.cpulist import parse_cpulist
from hostkit.facts import gather
from tests.labutil import cli, cli_json, inventory_with, sysroot, trees

pytestmark = pytest.mark.lab

BARE = ["epyc-9634-nps1", "epyc-9654-nps4-smt", "xeon-8480-snc2-ht"]
GUESTS = ["vmware-88vcpu", "kvm-small", "this-machine"]


@pytest.fixture(scope="module")
def fleet(make_lab, tmp_path_factory):
    lab = make_lab([(n, n) for n in BARE + GUESTS], port=2331)
    inv = inventory_with(lab, tmp_path_factory.mktemp("inv") / "inventory.yml",
                         {g: {"hostkit_profile": "vmware-guest"} for g in GUESTS})
    return lab, inv


def test_check_changes_nothing_and_diff_shows_files(fleet):
    lab, inv = fleet
    before = trees(lab)
    proc = cli("apply", "-i", inv, "--check", "--diff")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "/etc/sysctl.d/60-hostkit-rt.conf" in proc.stdout
    assert "+kernel.sched_rt_runtime_us = 950000" in proc.stdout
    assert trees(lab) == before
    for h in lab.hosts():  # check mode writes no journal either
        assert not (sysroot(lab, h.name) / "var/lib/hostkit/journal").exists()


def test_apply_idempotence_facts_and_exact_rollback(fleet):
    lab, inv = fleet
    before = trees(lab)
    rc, doc, proc = cli_json("apply", "-i", inv)
    assert rc == 0, proc.stderr[-3000:]
    hosts = doc["hosts"]
    assert {h: v["status"] for h, v in hosts.items()} == {h: "changed" for h in BARE + GUESTS}
    for h in BARE:
        assert hosts[h]["reboot_required"] is True  # isolcpus planned, not booted
        assert ["update-grub"] in hosts[h]["would_run"]  # recorded, never run on this machine
    for h in GUESTS:
        assert hosts[h]["reboot_required"] is (h == "vmware-88vcpu")  # its isolcpus= must go

    # facts now show the planned state
    plans = {}
    for h in BARE + GUESTS:
        rc, plan, _ = cli_json("plan", "--sysroot", sysroot(lab, h),
                               "--profile", "vmware-guest" if h in GUESTS else "bare-metal-inference")
        plans[h] = plan
        f = gather(str(sysroot(lab, h)))
        k = f["kernel"]
        assert (k["sched_rt_runtime_us"], k["numa_balancing"], k["timer_migration"], k["stat_interval"]) == \
            (950000, 0, 0, 10), h
        if h in BARE:
            assert f["cpufreq"]["governors"] == {"performance": f["topology"]["online"]}, h
            irqs = {i["irq"]: i for i in f["irqs"]}
            for nic in f["nics"]:
                for irq in nic["irqs"]:
                    assert irqs[irq]["smp_affinity_list"] == plan["nic_irq_cpus"][nic["name"]], (h, irq)
            nvme = [i for i in f["irqs"] if i["name"].startswith("nvme0q") and i["name"] != "nvme0q0"]
            assert nvme and all(parse_cpulist(i["smp_affinity_list"]) - parse_cpulist(plan["housekeeping"])
                                for i in nvme)  # managed IRQs stay where the kernel put them
            assert f["default_smp_affinity"] == plan["irq_cpus"]
    grub = (sysroot(lab, "epyc-9634-nps1") / "etc/default/grub.d/hostkit.cfg").read_text()
    assert f"isolcpus=managed_irq,domain,{plans['epyc-9634-nps1']['isolated']}" in grub
    irqbalance = (sysroot(lab, "epyc-9634-nps1") / "etc/default/irqbalance").read_text()
    assert f"IRQBALANCE_BANNED_CPULIST={plans['epyc-9634-nps1']['isolated']}" in irqbalance
    kubelet = (sysroot(lab, "xeon-8480-snc2-ht") / "etc/kubernetes/kubelet.conf.d/60-hostkit.conf").read_text()
    assert "cpuManagerPolicy: static" in kubelet and "topologyManagerPolicy: single-numa-node" in kubelet
    assert f"reservedSystemCPUs: {plans['xeon-8480-snc2-ht']['housekeeping']}" in kubelet
    # the CPU manager policy changed (none -> static): the stale state files are gone
    assert not (sysroot(lab, "xeon-8480-snc2-ht") / "var/lib/kubelet/cpu_manager_state").exists()
    containerd = (sysroot(lab, "epyc-9634-nps1") / "etc/containerd/config.toml").read_text()
    assert "SystemdCgroup = true" in containerd and containerd.startswith("#")
    # the VMware guest tuned by another tool: no isolation arguments left in its boot config
    vm_grub = (sysroot(lab, "vmware-88vcpu") / "etc/default/grub").read_text()
    assert "isolcpus" not in vm_grub and "nohz_full" not in vm_grub and "rcu_nocbs" not in vm_grub
    assert not (sysroot(lab, "vmware-88vcpu") / "etc/default/grub.d/hostkit.cfg").exists()
    assert gather(str(sysroot(lab, "vmware-88vcpu")))["kernel"]["sched_rt_runtime_us"] == 950000

    # a second apply changes nothing, on every role of every host
    rc, again, proc = cli_json("apply", "-i", inv)
    assert rc == 0, proc.stderr[-3000:]
    for h, v in again["hosts"].items():
        assert v["changed"] == 0, (h, {r: x for r, x in v["roles"].items() if x["changed"]})

    # history lists the run on every host
    rc, hist, _ = cli_json("history", "-i", inv)
    assert rc == 0 and all(len(hist[h]["runs"]) == 1 for h in BARE + GUESTS)
    assert hist["epyc-9634-nps1"]["runs"][0]["run_id"] == doc["run_id"]

    # rollback --check changes nothing; rollback restores every tree exactly; a second changes nothing
    applied = trees(lab)
    rc, chk, _ = cli_json("rollback", "-i", inv, "--check")
    assert rc == 0 and all(v["changed"] for v in chk["hosts"].values())
    assert trees(lab) == applied
    rc, rb, proc = cli_json("rollback", "-i", inv)
    assert rc == 0, proc.stdout[-3000:]
    assert all(v["verify"]["ok"] for v in rb["hosts"].values())
    assert rb["hosts"]["epyc-9634-nps1"]["reboot_required"] is True  # kernel args restored: reboot to take effect
    assert trees(lab) == before
    rc, rb2, _ = cli_json("rollback", "-i", inv)
    assert rc == 0 and not any(v["changed"] for v in rb2["hosts"].values())
    assert trees(lab) == before


def test_guest_with_bare_metal_profile_is_refused_and_untouched(fleet):
    lab, inv = fleet
    before = trees(lab)
    rc, doc, _ = cli_json("apply", "-i", inv, "--limit", "vmware-88vcpu,kvm-small", "--profile",
                          "bare-metal-inference")
    assert rc == 3
    assert doc["hosts"]["vmware-88vcpu"]["status"] == "refused"
    assert "deceptive topology" in doc["hosts"]["vmware-88vcpu"]["refused"][0]
    assert doc["hosts"]["kvm-small"]["status"] == "refused"
    assert trees(lab) == before


def test_isolcpus_from_another_tool_is_replaced_not_duplicated(fleet, tmp_path):
    lab, _ = fleet
    root = sysroot(lab, "epyc-9634-nps1")
    grub = root / "etc/default/grub"
    grub.write_text(grub.read_text().replace('GRUB_CMDLINE_LINUX=""',
                                             'GRUB_CMDLINE_LINUX="isolcpus=4-7 nohz_full=4-7 mitigations=off"'))
    (root / "proc/cmdline").write_text((root / "proc/cmdline").read_text().strip() + " isolcpus=4-7 nohz_full=4-7\n")
    inv = inventory_with(lab, tmp_path / "inv.yml", {"epyc-9634-nps1": {"isolcpus_reboot_ok": True}})
    rc, doc, proc = cli_json("apply", "-i", inv, "--limit", "epyc-9634-nps1", "--tags", "isolcpus")
    assert rc == 0, proc.stderr[-3000:]
    assert doc["hosts"]["epyc-9634-nps1"]["reboot_required"] is False  # the lab "rebooted"
    text = grub.read_text()
    assert "isolcpus" not in text and "nohz_full" not in text and "mitigations=off" in text
    cmdline = (root / "proc/cmdline").read_text().split()
    assert len([a for a in cmdline if a.startswith("isolcpus=")]) == 1
    assert len([a for a in cmdline if a.startswith("nohz_full=")]) == 1
    assert "isolcpus=managed_irq,domain,2-83,86-167" in cmdline
    rc, _, _ = cli_json("rollback", "-i", inv, "--limit", "epyc-9634-nps1")
    assert rc == 0
    assert "isolcpus=4-7" in grub.read_text() and "isolcpus=4-7" in (root / "proc/cmdline").read_text()


def test_containerd_config_rejected_by_containerd_is_never_installed(fleet, tmp_path):
    lab, _ = fleet
    root = sysroot(lab, "epyc-9654-nps4-smt")
    target = root / "etc/containerd/config.toml"
    assert not target.exists()
    inv = inventory_with(lab, tmp_path / "inv.yml", {"epyc-9654-nps4-smt": {"containerd_extra_toml": "broken = ["}})
    rc, doc, _ = cli_json("apply", "-i", inv, "--limit", "epyc-9654-nps4-smt", "--tags", "containerd")
    assert rc == 1
    host = doc["hosts"]["epyc-9654-nps4-smt"]
    assert host["status"] == "failed" and "validation" in host["msg"]
    assert not target.exists()


def test_bad_tags_and_unknown_profile_are_bad_input(fleet):
    lab, inv = fleet
    before = trees(lab)
    for args, needle in ((["--tags", "nosuchrole"], "unknown role"), (["--profile", "nosuch"], "unknown profile")):
        proc = cli("apply", "-i", inv, *args)
        assert proc.returncode == 2 and needle in proc.stderr
    assert trees(lab) == before
