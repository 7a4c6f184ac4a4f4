"""Plan and apply on lab hosts built from the fixtures, then rollback: over real SSH, through ansible-runner.

One behaviour per test on one module fleet (3 bare-metal hosts, 3 guests). Each test asks the
``fleet`` for the state it needs (pristine or applied, see ``labutil.Fleet``), so any test runs
alone or in any order; in file order the whole module costs one apply and one rollback.
"""

from __future__ import annotations

import pytest

from hostkit.core.cpulist import parse_cpulist
from hostkit.core.kthreads import NOT_LIVE
from hostkit.facts import gather
from hostkit.plan import make_plan
from hostkit.profiles import apply_overrides, load_profile
from tests.conftest import lab_port
from tests.labutil import Fleet, cli, cli_json, inventory_with, sysroot, trees
from tests.modules.runner import REPO

BARE = ["epyc-9634-nps1", "epyc-9654-nps4-smt", "xeon-8480-snc2-ht"]
GUESTS = ["vmware-88vcpu", "kvm-small", "this-machine"]


def profile_of(host: str) -> str:
    return "vmware-guest" if host in GUESTS else "bare-metal-inference"


@pytest.fixture(scope="module")
def lab_fleet(make_lab, tmp_path_factory):
    lab = make_lab([(n, n) for n in BARE + GUESTS], lab_port(3))
    inv = inventory_with(
        lab, tmp_path_factory.mktemp("inv") / "inventory.yml", {g: {"hostkit_profile": "vmware-guest"} for g in GUESTS}
    )
    fleet = Fleet(lab, inv)
    # Each host's plan, computed on the controller from its pristine tree (what the apply plans).
    plans = {}
    for h in BARE + GUESTS:
        profile, pinned = apply_overrides(load_profile(profile_of(h)), None)
        plans[h] = make_plan(gather(str(sysroot(lab, h))), profile, pinned, host=h)
    return fleet, plans


@pytest.fixture
def fleet(lab_fleet):
    return lab_fleet[0]


@pytest.fixture
def plans(lab_fleet):
    return lab_fleet[1]


# ----------------------------------------------------------------------------- on the pristine fleet


def journals(lab) -> dict[str, list[str]]:
    return {h: sorted(p.name for p in (sysroot(lab, h) / "var/lib/hostkit/journal").glob("*")) for h in BARE + GUESTS}


def test_check_changes_nothing_and_diff_shows_files(fleet):
    fleet.pristine()
    before, journaled = trees(fleet.lab), journals(fleet.lab)
    # One bare-metal host and the guest another tool tuned: every role has something to report.
    proc = cli("apply", "-i", fleet.inventory, "--check", "--diff", "--limit", "epyc-9634-nps1,vmware-88vcpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "/etc/sysctl.d/60-hostkit-rt.conf" in proc.stdout
    assert "+kernel.sched_rt_runtime_us = 950000" in proc.stdout
    assert trees(fleet.lab) == before
    assert journals(fleet.lab) == journaled  # check mode writes no journal either


def test_guest_with_bare_metal_profile_is_refused_and_untouched(fleet):
    before = trees(fleet.lab)
    rc, doc, _ = cli_json(
        "apply", "-i", fleet.inventory, "--limit", "vmware-88vcpu,kvm-small", "--profile", "bare-metal-inference"
    )
    assert rc == 3
    assert doc["hosts"]["vmware-88vcpu"]["status"] == "refused"
    assert "deceptive topology" in doc["hosts"]["vmware-88vcpu"]["refused"][0]
    assert doc["hosts"]["kvm-small"]["status"] == "refused"
    assert trees(fleet.lab) == before


def test_containerd_config_rejected_by_containerd_is_never_installed(fleet, tmp_path):
    fleet.pristine()
    target = sysroot(fleet.lab, "epyc-9654-nps4-smt") / "etc/containerd/config.toml"
    assert not target.exists()
    inv = inventory_with(
        fleet.lab, tmp_path / "inv.yml", {"epyc-9654-nps4-smt": {"containerd_extra_toml": "broken = ["}}
    )
    rc, doc, _ = cli_json("apply", "-i", inv, "--limit", "epyc-9654-nps4-smt", "--tags", "containerd")
    assert rc == 1
    host = doc["hosts"]["epyc-9654-nps4-smt"]
    assert host["status"] == "failed" and "validation" in host["msg"]
    assert not target.exists()


def test_isolcpus_from_another_tool_is_replaced_not_duplicated(fleet):
    fleet.pristine()
    root = sysroot(fleet.lab, "epyc-9634-nps1")
    grub, proc_cmdline = root / "etc/default/grub", root / "proc/cmdline"
    originals = {grub: grub.read_text(), proc_cmdline: proc_cmdline.read_text()}
    to_roll_back = False
    try:
        grub.write_text(
            originals[grub].replace(
                'GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="isolcpus=4-7 nohz_full=4-7 mitigations=off"'
            )
        )
        proc_cmdline.write_text(originals[proc_cmdline].strip() + " isolcpus=4-7 nohz_full=4-7\n")
        to_roll_back = True
        # --reboot: on a lab sysroot the reboot is simulated (proc/cmdline rewritten as a boot would)
        rc, doc, proc = cli_json(
            "apply", "-i", fleet.inventory, "--limit", "epyc-9634-nps1", "--tags", "isolcpus", "--reboot"
        )
        assert rc == 0, proc.stderr[-3000:]
        assert doc["hosts"]["epyc-9634-nps1"]["reboot_required"] is False  # the lab "rebooted"
        text = grub.read_text()
        assert "isolcpus" not in text and "nohz_full" not in text and "mitigations=off" in text
        cmdline = proc_cmdline.read_text().split()
        assert len([a for a in cmdline if a.startswith("isolcpus=")]) == 1
        assert len([a for a in cmdline if a.startswith("nohz_full=")]) == 1
        assert "isolcpus=managed_irq,2-83,86-167" in cmdline  # kubelet's static CPU manager: no domain
        rc, _, proc = cli_json("rollback", "-i", fleet.inventory, "--limit", "epyc-9634-nps1")
        to_roll_back = rc != 0
        assert rc == 0, proc.stdout[-3000:]
        assert "isolcpus=4-7" in grub.read_text() and "isolcpus=4-7" in proc_cmdline.read_text()
    finally:  # the other tool's arguments were this test's own: the fleet goes back to pristine
        if to_roll_back:
            cli("rollback", "-i", fleet.inventory, "--limit", "epyc-9634-nps1")
        for path, text in originals.items():
            path.write_text(text)


# ----------------------------------------------------------------------------- on the applied fleet


def test_apply_changes_every_host_and_says_which_need_a_reboot(fleet):
    hosts = fleet.applied()["hosts"]
    assert {h: v["status"] for h, v in hosts.items()} == dict.fromkeys(BARE + GUESTS, "changed")
    for h in BARE:
        assert hosts[h]["reboot_required"] is True, h  # isolcpus planned, not booted
        assert ["update-grub"] in hosts[h]["would_run"], h  # recorded, never run on this machine
    for h in GUESTS:
        assert hosts[h]["reboot_required"] is (h == "vmware-88vcpu"), h  # its isolcpus= must go


def test_apply_reports_the_managed_irqs_the_kernel_refuses_to_move(fleet):
    hosts = fleet.applied()["hosts"]
    # A kernel answers EIO to an affinity write on a managed IRQ (the NVMe queues here); a lab
    # sysroot marks those IRQs with a .managed file and answers the same. Every other write succeeds.
    expected = {
        h: sorted(
            f"/proc/irq/{m.parent.name}/smp_affinity_list" for m in sysroot(fleet.lab, h).glob("proc/irq/*/.managed")
        )
        for h in BARE + GUESTS
    }
    assert {h: sorted(r["path"] for r in v["irq_refused"]) for h, v in hosts.items()} == expected
    assert {r["error"] for v in hosts.values() for r in v["irq_refused"]} == {"Input/output error (lab: managed IRQ)"}


@pytest.mark.parametrize("host", BARE + GUESTS)
def test_facts_after_apply_show_the_planned_kernel_values(fleet, host):
    fleet.applied()
    k = gather(str(sysroot(fleet.lab, host)))["kernel"]
    # timer_migration 1 where kubelet's static CPU manager owns the isolated CPUs (bare metal), else the profile's 0
    assert (k["sched_rt_runtime_us"], k["numa_balancing"], k["timer_migration"], k["stat_interval"]) == (
        950000,
        0,
        1 if host in BARE else 0,
        10,
    )


@pytest.mark.parametrize("host", BARE)
def test_facts_after_apply_show_governor_and_irqs_on_housekeeping(fleet, plans, host):
    fleet.applied()
    plan, f = plans[host], gather(str(sysroot(fleet.lab, host)))
    assert f["cpufreq"]["governors"] == {"performance": f["topology"]["online"]}
    irqs = {i["irq"]: i for i in f["irqs"]}
    for nic in f["nics"]:
        for irq in nic["irqs"]:
            assert irqs[irq]["smp_affinity_list"] == plan["nic_irq_cpus"][nic["name"]], irq
    assert f["default_smp_affinity"] == plan["irq_cpus"]


@pytest.mark.parametrize("host", BARE)
def test_managed_nvme_irqs_stay_where_the_kernel_put_them(fleet, plans, host):
    fleet.applied()
    f = gather(str(sysroot(fleet.lab, host)))
    nvme = [i for i in f["irqs"] if i["name"].startswith("nvme0q") and i["name"] != "nvme0q0"]
    housekeeping = parse_cpulist(plans[host]["housekeeping"])
    assert nvme
    assert [i["name"] for i in nvme if not parse_cpulist(i["smp_affinity_list"]) - housekeeping] == []


def test_boot_config_and_irqbalance_ban_the_isolated_cpus(fleet, plans):
    fleet.applied()
    root, isolated = sysroot(fleet.lab, "epyc-9634-nps1"), plans["epyc-9634-nps1"]["isolated"]
    assert f"isolcpus=managed_irq,{isolated}" in (root / "etc/default/grub.d/hostkit.cfg").read_text()
    irqbalance = (root / "etc/default/irqbalance").read_text()
    assert f"\nIRQBALANCE_BANNED_CPULIST={isolated}\n" in irqbalance
    # the fixture's old IRQBALANCE_BANNED_CPUS=0000ff00 (irqbalance reads it first) is gone
    assert "IRQBALANCE_BANNED_CPUS=" not in irqbalance


def test_kubelet_pins_pods_and_stale_cpu_manager_state_is_removed(fleet, plans):
    fleet.applied()
    root = sysroot(fleet.lab, "xeon-8480-snc2-ht")
    kubelet = (root / "etc/kubernetes/kubelet.conf.d/60-hostkit.conf").read_text()
    assert "cpuManagerPolicy: static" in kubelet and "topologyManagerPolicy: single-numa-node" in kubelet
    assert f"reservedSystemCPUs: {plans['xeon-8480-snc2-ht']['housekeeping']}" in kubelet
    # the CPU manager policy changed (none -> static): the stale state files are gone
    assert not (root / "var/lib/kubelet/cpu_manager_state").exists()


def test_containerd_uses_the_systemd_cgroup_driver(fleet):
    fleet.applied()
    containerd = (sysroot(fleet.lab, "epyc-9634-nps1") / "etc/containerd/config.toml").read_text()
    assert "SystemdCgroup = true" in containerd and containerd.startswith("#")


def test_guest_tuned_by_another_tool_keeps_no_isolation_arguments(fleet):
    fleet.applied()
    root = sysroot(fleet.lab, "vmware-88vcpu")
    vm_grub = (root / "etc/default/grub").read_text()
    assert "isolcpus" not in vm_grub and "nohz_full" not in vm_grub and "rcu_nocbs" not in vm_grub
    assert not (root / "etc/default/grub.d/hostkit.cfg").exists()
    assert gather(str(root))["kernel"]["sched_rt_runtime_us"] == 950000


def test_kernel_threads_step_says_a_lab_host_has_no_threads_to_move(fleet, plans):
    hosts = fleet.applied()["hosts"]
    program = (REPO / "hostkit/core/kthreads.py").read_bytes()
    for h in BARE:
        skipped = hosts[h]["roles"]["kthreads"]["skipped"]
        assert len(skipped) == 1 and skipped[0].startswith(NOT_LIVE), (h, skipped)
        root = sysroot(fleet.lab, h)
        assert (
            f"--housekeeping {plans[h]['housekeeping']} --isolated {plans[h]['isolated']}\n"
            in (root / "etc/systemd/system/hostkit-kthreads.service").read_text()
        )
        assert (root / "usr/local/lib/hostkit/hostkit_kthreads.py").read_bytes() == program
    for h in GUESTS:  # nothing isolated: nothing to move, no unit
        assert "skipped" not in hosts[h]["roles"]["kthreads"], h
        assert not (sysroot(fleet.lab, h) / "etc/systemd/system/hostkit-kthreads.service").exists()


def test_second_apply_changes_nothing_on_any_role(fleet):
    fleet.applied()
    rc, again, proc = cli_json("apply", "-i", fleet.inventory)
    assert rc == 0, proc.stderr[-3000:]
    assert {h: {r: x["changed"] for r, x in v["roles"].items() if x["changed"]} for h, v in again["hosts"].items()} == {
        h: {} for h in BARE + GUESTS
    }


def test_history_lists_the_apply_as_the_newest_run_on_every_host(fleet):
    run_id = fleet.applied()["run_id"]
    rc, doc, _ = cli_json("history", "-i", fleet.inventory)
    assert rc == 0
    hist = doc["hosts"]
    assert {
        h: (hist[h]["runs"][-1]["run_id"], hist[h]["runs"][-1]["rolled_back"]) for h in BARE + GUESTS
    } == dict.fromkeys(BARE + GUESTS, (run_id, None))


def test_rollback_check_changes_nothing(fleet):
    fleet.applied()
    applied = trees(fleet.lab)
    rc, chk, _ = cli_json("rollback", "-i", fleet.inventory, "--check")
    assert rc == 0
    assert {h: v["changed"] for h, v in chk["hosts"].items()} == dict.fromkeys(BARE + GUESTS, True)
    assert trees(fleet.lab) == applied


# ----------------------------------------------------------------------------- rolling back


def test_rollback_restores_every_tree_exactly(fleet):
    fleet.applied()
    rb = fleet.roll_back()
    assert {h: v["verify"]["ok"] for h, v in rb["hosts"].items()} == dict.fromkeys(BARE + GUESTS, True)
    # kernel arguments restored: a reboot is needed for them to take effect (bare metal only)
    assert {h: v["reboot_required"] for h, v in rb["hosts"].items()} == {
        h: h in BARE or h == "vmware-88vcpu" for h in BARE + GUESTS
    }
    assert trees(fleet.lab) == fleet.before


def test_second_rollback_changes_nothing(fleet):
    fleet.pristine(rolled_back=True)
    rc, rb2, _ = cli_json("rollback", "-i", fleet.inventory)
    assert rc == 0
    assert {h: v["changed"] for h, v in rb2["hosts"].items()} == dict.fromkeys(BARE + GUESTS, False)
    assert trees(fleet.lab) == fleet.before
