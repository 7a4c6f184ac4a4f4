"""Rollback on the lab: adoption of a host tuned by another tool, smoke-verified apply that reverts,
and an apply cut off by a dropped SSH connection, then rolled back to the byte."""

from __future__ import annotations

import pytest

from hostkit.facts import gather
from tests.conftest import lab_port
from tests.labutil import cli_json, inventory_with, start_apply_and_wait_for_changes, sysroot, trees


@pytest.fixture(scope="module")
def lab(make_lab):
    # One host per test (each test leaves its host as it found it): any test runs alone or in any order.
    return make_lab([("vm", "vmware-88vcpu"), ("bm", "epyc-9634-nps1"), ("bm2", "epyc-9634-nps1")], lab_port(4))


def test_adopt_a_guest_tuned_by_another_tool_then_roll_back_to_it(lab, tmp_path):
    before = trees(lab)["vm"]
    assert "isolcpus=8-87" in (sysroot(lab, "vm") / "etc/default/grub").read_text()
    rc, doc, proc = cli_json("rollback", "-i", lab.inventory, "--limit", "vm", "--adopt", "--profile", "vmware-guest")
    assert rc == 0, proc.stdout + proc.stderr
    assert doc["hosts"]["vm"]["adopted_run"] and "/etc/default/grub" in doc["hosts"]["vm"]["adopted_files"]
    assert doc["hosts"]["vm"]["apply_status"] == "changed"
    grub = (sysroot(lab, "vm") / "etc/default/grub").read_text()
    assert "isolcpus" not in grub and "nohz_full" not in grub and "rcu_nocbs" not in grub
    assert gather(str(sysroot(lab, "vm")))["kernel"]["sched_rt_runtime_us"] == 950000
    rc, hist, _ = cli_json("history", "-i", lab.inventory, "--limit", "vm")
    assert [r["adopted"] for r in hist["hosts"]["vm"]["runs"]] == [True, False]
    rc, rb, _ = cli_json("rollback", "-i", lab.inventory, "--limit", "vm")
    assert rc == 0 and rb["hosts"]["vm"]["verify"]["ok"]
    assert trees(lab)["vm"] == before  # the adopted state, exactly


def test_verify_smoke_reverts_a_host_that_misses_its_slo(lab, tmp_path):
    before = trees(lab)["bm"]
    inv = inventory_with(lab, tmp_path / "inv.yml", {"bm": {"hostkit_overrides": {"smoke": {"target_p999_ms": 0.001}}}})
    # --reboot: the plan changes kernel arguments; without a (lab-simulated) reboot the smoke run is refused
    rc, doc, proc = cli_json(
        "apply", "-i", inv, "--limit", "bm", "--verify-smoke", "--revert-on-fail", "--smoke-duration", "2", "--reboot"
    )
    assert rc == 1, proc.stderr[-2000:]
    v = doc["verify_smoke"]["bm"]
    assert v["passed"] is False and "MISSED" in v["verdict"] and "rolled back" in v["rollback"]
    assert trees(lab)["bm"] == before


def test_apply_cut_off_by_a_dropped_ssh_connection_rolls_back_exactly(lab):
    before = trees(lab)["bm2"]
    proc = start_apply_and_wait_for_changes(lab, "bm2")
    lab.kill_host("bm2")  # the network drops mid-apply
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err[-2000:]
    assert trees(lab)["bm2"] != before  # a half-finished apply
    lab.start_host("bm2")
    rc, rb, p = cli_json("rollback", "-i", lab.inventory, "--limit", "bm2")
    assert rc == 0, p.stdout
    assert trees(lab)["bm2"] == before
    rc, again, _ = cli_json("rollback", "-i", lab.inventory, "--limit", "bm2")
    assert rc == 0 and again["hosts"]["bm2"]["changed"] is False
