"""apply --verify-smoke on a plan that changes kernel arguments (issue 12): refused for that host
unless --reboot, nothing changed, over real SSH on a lab host."""

from __future__ import annotations

import pytest

from tests.conftest import lab_port
from tests.labutil import cli_json, trees

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("bm", "epyc-9634-nps1")], lab_port(9))


def test_verify_smoke_without_reboot_refuses_a_plan_that_changes_kernel_arguments(lab):
    before = trees(lab)["bm"]
    rc, doc, proc = cli_json("apply", "-i", lab.inventory, "--verify-smoke", "--smoke-duration", "2")
    assert rc == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    host = doc["hosts"]["bm"]
    assert host["status"] == "refused" and len(host["refused"]) == 1
    assert host["refused"][0].startswith("--verify-smoke would measure the running kernel, booted without "
                                         "isolcpus=managed_irq,2-83,86-167 nohz_full=2-83,86-167 "
                                         "rcu_nocbs=2-83,86-167 ...: add --reboot")
    assert doc["verify_smoke"] == {}
    assert trees(lab)["bm"] == before
