"""On a lab host with the RHEL family's layout, over real SSH and Ansible: the irq_affinity role bans the
isolated CPUs in /etc/sysconfig/irqbalance and rollback restores it and restarts irqbalance. (The
refusal of --verify-smoke without --reboot is decided on the controller: tests/unit/test_verify_smoke.py.)"""

from __future__ import annotations

import pytest

from tests.conftest import lab_port
from tests.labutil import cli_json, sysroot, trees


@pytest.fixture(scope="module")
def lab(make_lab):
    lab = make_lab([("rhel", "epyc-9634-nps1")], lab_port(9))
    # The RHEL family's layout: the irqbalance package's environment file is /etc/sysconfig/irqbalance.
    root = sysroot(lab, "rhel")
    (root / "etc/sysconfig").mkdir(parents=True, exist_ok=True)
    (root / "etc/default/irqbalance").rename(root / "etc/sysconfig/irqbalance")
    return lab


def test_irqbalance_ban_goes_where_a_rhel_host_has_its_file_and_rollback_restarts_irqbalance(lab):
    before = trees(lab)["rhel"]
    root = sysroot(lab, "rhel")
    rc, doc, proc = cli_json("apply", "-i", lab.inventory, "--limit", "rhel", "--tags", "irq_affinity")
    assert rc == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rc, plan, _ = cli_json("plan", "-i", lab.inventory, "--limit", "rhel")
    assert plan["hosts"]["rhel"]["irq"]["irqbalance_config"] == "/etc/sysconfig/irqbalance"
    banned = [
        line
        for line in (root / "etc/sysconfig/irqbalance").read_text().splitlines()
        if line.startswith("IRQBALANCE_BANNED_CPULIST=")
    ]
    assert banned == [f"IRQBALANCE_BANNED_CPULIST={plan['hosts']['rhel']['isolated']}"]
    assert not (root / "etc/default/irqbalance").exists()
    rc, rb, proc = cli_json("rollback", "-i", lab.inventory, "--limit", "rhel")
    assert rc == 0, proc.stdout[-2000:]
    assert ["systemctl", "try-restart", "irqbalance.service"] in rb["hosts"]["rhel"]["would_run"]
    assert trees(lab)["rhel"] == before
