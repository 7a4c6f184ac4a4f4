"""The vCPU-gap probe on a real kernel: a 2-vCPU TCG guest (`small`) whose QEMU threads run spread
over this machine's two CPUs, then confined to one (`taskset -a -p -c 0`), as an overcommitted
hypervisor would run it. The guest kernel has no steal-time accounting under TCG, so a stopped
vCPU shows up in the guest as time charged to whatever ran: gaps "invisible to the kernel", and
co-stops when both vCPUs are stopped at once.

Figures: docs/dev/measurements.md ("The vCPU-gap probe"). On a loaded machine the spread guest
co-stops too (the host's other work stops its vCPUs): the assertion is the ratio between the two
placements of the same guest. The same guest also shows the seed's other layer, RT throttling,
event by event through the sched_switch trace of the worker's CPU.

The smoke diagnosis names `hypervisor_costop` from the worker's own slow inferences (CPU time the
guest kernel charged beyond the computation) and the spinners' stopped time, checked against
ground truth from this host's kernel: how long QEMU's threads waited for a host CPU during the run.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.labutil import cli_json
from tests.vmutil import qemu_wait_during, ssh, vm_lab_fixture

VM = "gap"


lab = vm_lab_fixture("vm-gaps", [(VM, "small")])


def place_qemu(lab, cpus: str) -> None:
    """Every thread of the guest's QEMU (vCPUs, I/O) onto these host CPUs."""
    pid = lab.qemu_pid(VM)
    subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], check=True, capture_output=True)


def confined(lab, measure):
    """``measure(lab)`` with every QEMU thread on host CPU 0, then back on both."""
    place_qemu(lab, "0")
    try:
        return measure(lab)
    finally:
        place_qemu(lab, "0-1")


def smoke_probed(lab) -> tuple[dict, float]:
    """A smoke run with the gap probe on the guest; and, measured by this host (the hypervisor), the
    share of the time QEMU's threads wanted a host CPU that they waited for one: ground truth for
    how much the hypervisor stopped the guest during the run."""
    # --no-fifo: the worker runs nice -20 in SCHED_OTHER, so the guest cannot RT-throttle it. A
    # stopped vCPU's time is charged to a FIFO worker as CPU time, pushing its duty over the guest's
    # RT budget (88-94% measured confined): the guest then throttles it for up to 50 ms per period
    # and the tail mixes both layers (hostkit.smoke.diagnose.throttled_at_most ranks them; a CI run
    # found 39% charged, 61% descheduled). The RT layer has its own test above.
    (rc, doc, proc), waited = qemu_wait_during(
        lab,
        VM,
        lambda: cli_json(
            "smoke",
            "-i",
            str(lab.inventory),
            "--duration",
            "6",
            "--probe-gaps",
            "--gap-threshold-us",
            "1000",
            "--no-fifo",
        ),
    )
    assert rc in (0, 1), proc.stderr[-2000:]  # 1: MISSED or INCONCLUSIVE (a TCG guest's few samples)
    return doc["hosts"][VM], waited


def probe(lab) -> tuple[dict, float]:
    """The gap probe on the guest, and QEMU's host-measured wait share meanwhile (as smoke_probed)."""
    (rc, doc, proc), waited = qemu_wait_during(
        lab, VM, lambda: cli_json("gaps", "-i", str(lab.inventory), "--duration", "6", "--threshold-us", "1000")
    )
    assert rc == 0, proc.stderr[-2000:]
    return doc["hosts"][VM], waited


# The spread guest counts as uncontended while QEMU's runnable threads waited for a host CPU less
# than this share of the time (ground truth from this host's scheduler). The diagnosis names the
# hypervisor when its spinners were stopped for 10% of their charged CPU time: a different share,
# and a smaller one for the same host (the spinners run only in the guest's idle time, QEMU's wait
# also counts its I/O threads): at 8-8.5% QEMU wait the spinners measured 1.9-2.8% stopped. On this
# 2-CPU machine the test's own controller (ssh, the smoke orchestration) keeps a spread guest
# waiting 7-9% with nothing else running (the spread guest then co-stopped 10-13 ms against
# 541-665 ms confined); a 5% limit skipped every run, these included. Beside make test's other
# suites the wait is far higher (73-77%) and these checks skip, saying so.
SPREAD_WAIT_MAX = 0.10


def test_rt_throttling_is_traced_per_event_and_named_primary(lab):
    # First in the module: the guest kernel logs "RT throttling activated" once per boot.
    # The seed's other layer: a busy SCHED_FIFO worker against sched_rt_runtime_us=500000 (half of
    # every 1 s period). The sched_switch trace of the worker's CPU shows each throttle: the
    # runnable FIFO worker off its CPU for hundreds of ms while only idle and CFS threads ran.
    before = ssh(lab, VM, "cat /proc/sys/kernel/sched_rt_runtime_us").strip()
    ssh(lab, VM, "echo 500000 > /proc/sys/kernel/sched_rt_runtime_us")
    try:
        # Throttled only while runnable beyond the budget: the worker must want its CPU for more than
        # 500 ms of each period, whatever the clients' pace on a slow TCG vCPU: 100 ms of computation
        # per request (8 outstanding: 0.8 s a round), spinning under SCHED_FIFO up to 100 ms between rounds;
        # SCHED_FIFO for every inference as the seed's worker had it (--fifo always), not kept under the budget.
        rc, doc, proc = cli_json(
            "smoke",
            "-i",
            str(lab.inventory),
            "--duration",
            "6",
            "--trace-sched",
            "--infer-ms",
            "100",
            "--spin-us",
            "100000",
            "--fifo",
            "always",
        )
    finally:
        ssh(lab, VM, f"echo {before} > /proc/sys/kernel/sched_rt_runtime_us")
    r = doc["hosts"][VM]
    t = r["sched_trace"]
    assert "error" not in t, t  # Debian's systemd mounts tracefs in the guest
    assert t["rt_throttled"] >= 1, t
    assert max(e["ms"] for e in t["events"]) >= 100, t["events"]  # throttled for a good part of the 500 ms
    (primary,) = [d for d in r["diagnosis"] if d["primary"]]
    assert primary["cause"] == "rt_throttling" and primary["confidence"] == "confirmed", r["diagnosis"]


def test_confined_qemu_co_stops_the_guest_far_more_than_spread(lab):
    conf, _ = confined(lab, probe)
    spread, waited = probe(lab)
    print(
        "spread:",
        spread["costops"]["total_ms"],
        "ms, host-measured QEMU wait",
        round(waited, 3),
        "\nconfined:",
        conf["costops"]["total_ms"],
        "ms",
    )
    assert conf["cpus"] == [0, 1] and conf["costops"]["max_cpus"] == 2
    # Both vCPUs stopped at once, invisible to the guest kernel: far more when QEMU shares one CPU.
    # Measured here at load ~2: spread 7 ms of co-stops (0.1% of 6 s), confined 422 ms (7%).
    assert conf["costops"]["share_of_run"] >= 0.02
    for cpu in ("0", "1"):  # what the kernel was charged for dominates what it could explain
        assert conf["per_cpu"][cpu]["invisible_ms"] > conf["per_cpu"][cpu]["total_ms"] / 2
    if waited >= SPREAD_WAIT_MAX:
        # At load 12-15 the spread guest co-stopped for 75% of the run, the confined one 67%: the
        # host's other work stops both vCPUs of a spread guest too. The contrast needs free CPUs.
        pytest.skip(
            f"the host kept QEMU's runnable threads waiting {waited:.0%} of the time while spread (load "
            f"{os.getloadavg()[0]:.1f}): its other work stopped the spread guest too"
        )
    assert conf["costops"]["total_ms"] >= 3 * spread["costops"]["total_ms"], (spread, conf)


def hypervisor(r: dict) -> dict:
    assert "tail_attribution" in r["gaps"], r["gaps"]
    return r["gaps"]["tail_attribution"]["hypervisor"]


def test_smoke_names_the_hypervisor_primary_when_qemu_is_confined(lab):
    # Confined, the guest's two vCPU threads (and QEMU's main loop) share host CPU 0: while the
    # clients or a spinner keep vCPU 0 busy, the worker's vCPU gets at most half of it, stopped in
    # host time slices the guest kernel charges to the worker as CPU time (TCG: no steal time).
    r, waited = confined(lab, smoke_probed)
    h = hypervisor(r)
    print(
        "confined: host-measured QEMU wait",
        round(waited, 3),
        "tail",
        r["gaps"]["tail_attribution"],
        "\ndiagnosis",
        r["diagnosis"],
    )
    assert waited >= 0.25, waited  # the confinement took: QEMU's threads waited for CPU 0 (three threads, one CPU)
    # The tail is the hypervisor's: charged CPU time beyond the computation (the worker, nice -20 alone
    # on its vCPU, is hardly ever descheduled by the guest), and the spinners stopped for much of
    # the time they were charged (about half or more against the 10% the diagnosis asks for).
    assert h["invisible_share"] >= 0.5 and h["vcpu_stopped"] >= 0.25, h
    (primary,) = [d for d in r["diagnosis"] if d["primary"]]
    assert primary["cause"] == "hypervisor_costop" and primary["share_of_tail"] == h["invisible_share"], r["diagnosis"]
    assert f"p999 {r['gaps']['tail_attribution']['p999_wall_ms']} ms" in primary["evidence"]


def test_smoke_does_not_name_the_hypervisor_when_qemu_has_a_cpu_per_vcpu(lab):
    """A run where no co-stop fell under the slowest inferences has no ``tail_attribution`` (the
    smoke attributes the tail only to co-stops under it, hostkit.smoke.session): nothing of the tail
    to give the hypervisor, the negative itself. A clean-clone run got one, and this test read the
    key unconditionally: a KeyError before its figures were printed."""
    place_qemu(lab, "0-1")
    r, waited = smoke_probed(lab)
    attribution = r["gaps"].get("tail_attribution")
    print(
        "spread: host-measured QEMU wait",
        round(waited, 3),
        "co-stops",
        r["gaps"].get("costops"),
        "tail",
        attribution,
        "\ndiagnosis",
        r["diagnosis"],
    )
    assert "costops" in r["gaps"], r["gaps"]  # the probe ran (a failed probe's report is its error)
    if waited >= SPREAD_WAIT_MAX:
        # Other work on this machine took the host CPUs from the spread guest too: then the hypervisor
        # did stop it, and naming it is right. The negative needs a host CPU free for each vCPU.
        pytest.skip(
            f"the host kept QEMU's runnable threads waiting {waited:.0%} of the time (load "
            f"{os.getloadavg()[0]:.1f}): the spread guest was stopped by the host's other work"
        )
    if attribution is not None:
        assert attribution["hypervisor"]["vcpu_stopped"] < 0.1, attribution
    assert "hypervisor_costop" not in [d["cause"] for d in r["diagnosis"]], r["diagnosis"]
