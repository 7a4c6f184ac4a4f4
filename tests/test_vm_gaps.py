"""The vCPU-gap probe on a real kernel: a 2-vCPU TCG guest (`small`) whose QEMU threads run spread
over this machine's two CPUs, then confined to one (`taskset -a -p -c 0`), as an overcommitted
hypervisor would run it. The guest kernel has no steal-time accounting under TCG, so a stopped
vCPU shows up in the guest as time charged to whatever ran: gaps "invisible to the kernel", and
co-stops when both vCPUs are stopped at once.

Measured on a quiet machine (one run each, gaps > 1 ms, 6 s): see docs/operator-guide.md ("The
vCPU-gap probe"). On a loaded machine the spread guest co-stops too: the host's other work
stops its vCPUs; the assertion is the ratio between the two placements of the same guest.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.labutil import cli_json
from tests.vmutil import ssh, start_vm_lab

pytestmark = pytest.mark.vm

VM = "gap"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = start_vm_lab(tmp_path_factory.mktemp("vm-gaps") / "lab", [(VM, "small")])
    try:
        yield lab
    finally:
        lab.down()


def place_qemu(lab, cpus: str) -> None:
    """Every thread of the guest's QEMU (vCPUs, I/O) onto these host CPUs."""
    pid = next(h.pid for h in lab.hosts() if h.name == VM)
    subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], check=True, capture_output=True)


def probe(lab) -> dict:
    rc, doc, proc = cli_json("gaps", "-i", str(lab.inventory), "--duration", "6", "--threshold-us", "1000")
    assert rc == 0, proc.stderr[-2000:]
    return doc["hosts"][VM]


def test_confined_qemu_co_stops_the_guest_far_more_than_spread(lab):
    place_qemu(lab, "0-1")
    spread = probe(lab)
    place_qemu(lab, "0")
    try:
        confined = probe(lab)
    finally:
        place_qemu(lab, "0-1")
    print("spread:", spread["costops"], "\nconfined:", confined["costops"])
    assert confined["cpus"] == [0, 1] and confined["costops"]["max_cpus"] == 2
    # Both vCPUs stopped at once, invisible to the guest kernel: far more when QEMU shares one CPU.
    assert confined["costops"]["total_ms"] >= 3 * spread["costops"]["total_ms"], (spread, confined)
    assert confined["costops"]["share_of_run"] >= 0.05
    for cpu in ("0", "1"):  # what the kernel was charged for dominates what it could explain
        assert confined["per_cpu"][cpu]["invisible_ms"] > confined["per_cpu"][cpu]["total_ms"] / 2


def smoke_on_guest(lab, *args) -> dict:
    rc, doc, proc = cli_json("smoke", "-i", str(lab.inventory), "--duration", "6", "--probe-gaps", *args)
    assert VM in doc["hosts"], proc.stderr[-2000:]
    return doc["hosts"][VM]


def primary(doc: dict) -> dict:
    (first,) = [d for d in doc["diagnosis"] if d["primary"]]
    return first


def test_confined_guest_smoke_names_hypervisor_costop_as_primary(lab):
    # Open loop at 250 req/s x 2 ms: the FIFO worker busy about half the time, well inside the RT
    # budget, so the tail can only come from below the guest.
    place_qemu(lab, "0")
    try:
        doc = smoke_on_guest(lab, "--rate", "250")
    finally:
        place_qemu(lab, "0-1")
    assert primary(doc)["cause"] == "hypervisor_costop", doc["diagnosis"]
    assert doc["gaps"]["tail_attribution"]["share"] >= 0.5, doc["gaps"]["tail_attribution"]


def test_rt_throttling_on_the_same_guest_is_named_before_the_hypervisor(lab):
    # The seed's other layer: a busy SCHED_FIFO worker against sched_rt_runtime_us=500000 (half of
    # every 1 s period). The kernel logs "RT throttling activated": confirmed, so primary.
    before = ssh(lab, VM, "cat /proc/sys/kernel/sched_rt_runtime_us").strip()
    ssh(lab, VM, "echo 500000 > /proc/sys/kernel/sched_rt_runtime_us")
    try:
        doc = smoke_on_guest(lab)
    finally:
        ssh(lab, VM, f"echo {before} > /proc/sys/kernel/sched_rt_runtime_us")
    assert primary(doc)["cause"] == "rt_throttling", doc["diagnosis"]
