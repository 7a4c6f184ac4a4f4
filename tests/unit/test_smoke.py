"""The on-host SHM smoke test: queue, zero copy, pinning/FIFO, stalls, RT throttling, faults, cleanup."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostkit.smoke.options import SmokeOptions
from hostkit.smoke.queue import (
    DONE,
    FREE,
    PROCESSING,
    READY,
    WRITING,
    FlockAllocator,
    PartitionAllocator,
    SharedInferenceQueue,
)
from hostkit.smoke.session import run_smoke

pytestmark = pytest.mark.live


def segments() -> set[str]:
    return set(glob.glob("/dev/shm/hostkit-smoke-*"))


def children(pid: int) -> set[int]:
    """Live child processes of ``pid`` (multiprocessing's resource tracker aside: it lives as long as we do)."""
    out = set()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, ValueError):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[1] == str(pid) and fields[0] != "Z" and b"resource_tracker" not in cmdline:
            out.add(int(entry))
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def settle(check, seconds: float = 30.0):
    """``check()`` until it returns something empty, or ``seconds``; returns its last value."""
    deadline = time.monotonic() + seconds
    while (left := check()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.fixture(autouse=True)
def no_leaks():
    # Other smoke runs may share this machine (the lab's hosts are on it): a segment that is not
    # ours disappears when its own run ends; a leaked one never does.
    before = segments()
    yield
    assert not settle(lambda: segments() - before), "a /dev/shm segment of a smoke run was left behind"
    assert not settle(lambda: children(os.getpid()), 10), "smoke processes outlived their run"


@pytest.fixture
def queue():
    q = SharedInferenceQueue.create(nslots=16, req_size=1024, resp_size=1024, tensor_size=4096)
    yield q
    q.close()
    q.unlink()


def test_segment_is_private_and_laid_out(queue):
    mode = stat.S_IMODE(os.stat(f"/dev/shm/{queue.name}").st_mode)
    assert mode == 0o600
    assert queue.states() == [FREE] * 16
    # one cache line per slot state: two neighbouring states never share a line
    assert queue.state_stride == 64


def test_zero_copy_worker_sees_client_bytes_in_place(queue):
    worker_side = SharedInferenceQueue.attach(queue.name)
    try:
        client_tensor = queue.tensor(3, count=1024)
        worker_tensor = worker_side.tensor(3, count=1024)
        assert not client_tensor.flags.owndata and not worker_tensor.flags.owndata  # views, no copies
        client_tensor[:] = np.arange(1024, dtype=np.float32)
        assert worker_tensor[1023] == 1023.0  # the same pages, seen through the other mapping
        worker_tensor[0] = -7.0
        assert client_tensor[0] == -7.0
        del client_tensor, worker_tensor
    finally:
        worker_side.close()


@settings(max_examples=80, deadline=None)
@given(
    ops=st.lists(st.tuples(st.sampled_from(["submit", "claim", "finish", "collect"]), st.integers(0, 2)), max_size=120),
    allocator=st.sampled_from(["partition", "flock"]),
)
def test_state_machine_one_writer_per_transition(tmp_path_factory, ops, allocator):
    q = SharedInferenceQueue.create(nslots=12, req_size=64, resp_size=64, tensor_size=64)
    lock = str(tmp_path_factory.mktemp("lock") / "q.lock")
    try:
        allocs = [
            PartitionAllocator(q, c, 3) if allocator == "partition" else FlockAllocator(q, lock) for c in range(3)
        ]
        owned: dict[int, int] = {}
        for op, client in ops:
            if op == "submit":
                i = allocs[client].acquire(timeout=0)
                if i is None:
                    assert q.find(FREE, slots=allocs[client].slots if allocator == "partition" else None) == []
                    continue
                assert i not in owned and q.state(i) == WRITING
                if allocator == "partition":
                    assert i % 3 == client  # never another client's slot
                owned[i] = client
                q.set_state(i, READY)
            elif op == "claim":
                for i in q.find(READY, limit=4):
                    q.set_state(i, PROCESSING)
            elif op == "finish":
                for i in q.find(PROCESSING):
                    q.set_state(i, DONE)
            else:
                for i in [i for i, c in owned.items() if c == client and q.state(i) == DONE]:
                    allocs[client].release(i)
                    del owned[i]
            states = q.states()
            assert all(s in (FREE, WRITING, READY, PROCESSING, DONE) for s in states)
            assert {i for i, s in enumerate(states) if s != FREE} == set(owned)
    finally:
        q.close()
        q.unlink()


def can_fifo() -> bool:
    code = "import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


@pytest.mark.parametrize("allocator,transport", [("partition", "shm"), ("flock", "shm"), ("partition", "socket")])
def test_run_records_pinning_fifo_and_every_request(allocator, transport):
    seen = {}
    r = run_smoke(
        SmokeOptions(
            requests=1500, infer_ms=0.2, clients=3, allocator=allocator, transport=transport, target_p999_ms=1000
        ),
        on_started=lambda info: seen.update(info),
    )
    assert r["samples"] == 1500 and r["errors"]["count"] == 0 and r["faults"] == []
    assert r["cpu"] == max(os.sched_getaffinity(0)) and r["pinned"] is True
    assert r["nice"] == -20
    assert r["sched_fifo"]["available"] is can_fifo()
    assert r["sched_fifo"]["used"] is can_fifo()
    assert r["deschedule_ms"]["n"] == 1500 and "not credible" in r["p999_credibility"]
    # too few samples for a credible p999, nothing above the generous target: never PASSED
    assert r["slo"]["verdict"] == "INCONCLUSIVE" and r["slo"]["passed"] is False
    assert r["slo"]["samples_missing"] == 10000 - 1500
    if transport == "shm":
        assert seen["segment"].startswith("/dev/shm/hostkit-smoke-")
        assert r["shm_numa_nodes"] and sum(r["shm_numa_nodes"].values()) > 0


def test_model_calibration_takes_the_fastest_plausible_trial(monkeypatch):
    """The synthetic model's steps for --infer-ms: the fastest of the timed trials (noise only adds
    time), leaving out a trial the clock reports implausibly fast (a TCG guest's nohz_full CPU read 0
    for one: the worker then died on a division by zero). The clock is scripted; the steps run."""
    import hostkit.smoke.model as model

    # sizing run: 1 step in 12 ms; trials of 1 step: 0 ms (left out), 6 ms, 0.5 ms (left out), 9 ms
    readings = iter([0.0, 0.012, 1.0, 1.0, 2.0, 2.006, 3.0, 3.0005, 4.0, 4.009])
    monkeypatch.setattr(model.time, "thread_time", lambda: next(readings))
    m = model.SyntheticModel(60.0)
    assert m.reps == 10  # 60 ms / 6 ms a step
    assert next(readings, None) is None  # every trial was timed


def test_injected_stalls_are_detected():
    r = run_smoke(
        SmokeOptions(duration=3, infer_ms=2, clients=2, inject_stall_ms=20, inject_every_s=0.5, target_p999_ms=1.0)
    )
    assert r["injected_stalls"]["count"] >= 4
    assert r["deschedule_ms"]["p999"] >= 15.0
    assert r["injected_stalls"]["detected"] >= 1
    assert r["diagnosis"][0]["cause"] == "injected_stall"
    assert r["slo"]["passed"] is False


@pytest.mark.skipif(os.geteuid() != 0, reason="writing kernel.sched_rt_runtime_us needs root")
@contextlib.contextmanager
def rt_budget(runtime_us: int):
    """This machine's RT budget lowered to ``runtime_us`` for the block, restored (and checked) after."""
    if not can_fifo():
        pytest.skip("SCHED_FIFO is not permitted here: RT throttling cannot happen")
    path = Path("/proc/sys/kernel/sched_rt_runtime_us")
    # With CONFIG_RT_GROUP_SCHED (cgroup v1 here) the root group's budget must come down first
    # and go back up last: the kernel refuses a global budget below a group's (EINVAL).
    group = Path("/sys/fs/cgroup/cpu/cpu.rt_runtime_us")
    old = path.read_text().strip()
    old_group = group.read_text().strip() if group.exists() else None
    # RT time the kernel charged to a CPU (earlier tests' SCHED_FIFO workers, up to the old budget)
    # drains at the old budget within one period; lowered before that, the new budget starts
    # overdrawn and parks the next RT task for periods (a run here: 660 ms right after another test).
    time.sleep(1.1 * int(Path("/proc/sys/kernel/sched_rt_period_us").read_text()) / 1e6)
    try:
        if old_group is not None:
            group.write_text(f"{runtime_us}\n")
        path.write_text(f"{runtime_us}\n")
        yield
    finally:
        path.write_text(old + "\n")
        if old_group is not None:
            group.write_text(old_group + "\n")
    assert path.read_text().strip() == old
    if old_group is not None:  # the machine decides: a cgroup-v1 rt group file exists or not
        assert group.read_text().strip() == old_group


# A worker busy all the time (3 clients x 4 requests of 5 ms, busy polling), against a budget of 300 ms per second.
BUSY = dict(duration=3, infer_ms=5, clients=3, client_batch=4, idle="spin", min_batch_wait_ms=0, target_p999_ms=1.0)


def test_the_default_worker_keeps_under_the_rt_budget_and_is_never_parked():
    """--fifo budget (the default): the same busy worker at the same budget leaves SCHED_FIFO before
    it spends 285 ms (300 less 5%) in any second; the throttle never parks it, and the time it gives
    back goes to this CPU's other tasks in CFS slices (it keeps nice -20), not in one 700 ms park.
    The limit counts only the worker's own SCHED_FIFO time: RT time still charged to the CPU when the
    budget came down parked it 230-660 ms in runs right after other tests' workers, hence the wait
    in ``rt_budget`` (a diagnosis names rt_throttling as possible past 350 ms, see diagnose.py)."""
    with rt_budget(300000):
        r = run_smoke(SmokeOptions(**BUSY))
    fifo = r["sched_fifo"]
    assert fifo["policy"] == "budget" and fifo["used"] and fifo["limit_ms_per_period"] == 285.0, fifo
    assert fifo["held_batches"] > 0, fifo  # it did run batches in SCHED_OTHER to keep to the limit
    # (the run's average may exceed 285/1000 by up to one period's limit over its length: 3 s here)
    assert r["fifo_duty"] <= 0.285 * 4 / 3, (r["fifo_duty"], r["deschedule_ms"], fifo)
    assert "rt_throttling" not in {d["cause"] for d in r["diagnosis"]}, r["diagnosis"]
    # No park: the throttle's would be up to 700 ms; on this shared machine CFS peers in the worker's
    # SCHED_OTHER stretches, or RT time the kernel still charges from an earlier hog, took up to 52 ms
    assert r["deschedule_ms"]["max"] < 350, r["deschedule_ms"]


def test_rt_throttling_is_named_against_a_low_rt_budget(tracefs):
    """The seed's worker (--fifo always: SCHED_FIFO for every inference) is parked 700 ms a second,
    and the sched_switch trace of its CPU shows the parks, idle running instead. This machine's kernel
    traces no switch out of idle on CPU 1 (see sched_trace.long_deschedules): the parks are timed by
    the inferences they interrupted (before that was handled: 0 traced)."""
    with rt_budget(300000):
        r = run_smoke(SmokeOptions(fifo="always", trace_sched=True, **BUSY))
    rt = [d for d in r["diagnosis"] if d["cause"] == "rt_throttling"]  # the run's figures and the trace's
    assert rt and all("sched_rt_runtime_us=300000" in d["evidence"] for d in rt), r["diagnosis"]
    assert r["deschedule_ms"]["max"] >= 350  # parked: up to 700 ms a second
    assert r["sched_fifo"]["limit_ms_per_period"] is None and r["sched_fifo"]["held_batches"] == 0
    t = r["sched_trace"]
    # On a quiet machine the parks end from idle, untraced here: timed by their inferences. Under
    # load a CFS task can end one, traced (a run beside make test's lab suite: 1 of 7 events).
    parks = [e["ms"] for e in t["events"] if e["rt_throttled"]]
    assert parks and max(parks) >= 350, t
    assert "confirmed" in [d["confidence"] for d in rt], rt


def kill_later(pid_of, sig, delay):
    def go(info):
        threading.Timer(delay, lambda: os.kill(pid_of(info), sig)).start()

    return go


def test_killed_client_is_reported_and_its_slots_reclaimed():
    r = run_smoke(
        SmokeOptions(duration=2.5, infer_ms=0.5, clients=2, target_p999_ms=1000),
        on_started=kill_later(lambda i: i["clients"][0], signal.SIGKILL, 0.8),
    )
    assert any("client 0 died" in f for f in r["faults"])
    assert r["samples"] > 0  # the other client went on
    assert r["slo"]["passed"] is False


def test_killed_worker_fails_clients_within_the_timeout():
    t = time.monotonic()
    r = run_smoke(
        SmokeOptions(duration=30, infer_ms=0.5, clients=2, request_timeout_s=1.0, target_p999_ms=1000),
        on_started=kill_later(lambda i: i["worker"], signal.SIGKILL, 0.8),
    )
    assert time.monotonic() - t < 25  # bounded, well short of the 30 s asked for (slack for a loaded machine)
    assert any("worker died" in f for f in r["faults"])
    assert r["slo"]["passed"] is False


def test_worker_that_stops_answering_is_a_fault():
    stopped = {}

    def stop(info):
        stopped["pid"] = info["worker"]
        threading.Timer(0.8, lambda: os.kill(info["worker"], signal.SIGSTOP)).start()

    t = time.monotonic()
    try:
        r = run_smoke(
            SmokeOptions(duration=30, infer_ms=0.5, clients=2, request_timeout_s=1.0, target_p999_ms=1000),
            on_started=stop,
        )
    finally:
        try:
            os.kill(stopped["pid"], signal.SIGCONT)
        except (KeyError, ProcessLookupError):
            pass
    assert time.monotonic() - t < 25  # well short of the 30 s asked for (slack for a loaded machine)
    # Both sides see it: the clients' requests time out after 1 s, the orchestrator faults the
    # worker after 2 s (2x the timeout) without a completed inference while requests wait.
    assert any(f.startswith("worker not answering") for f in r["faults"]), r["faults"]
    assert r["errors"]["count"] > 0
    assert r["slo"]["passed"] is False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_cli_run_leaves_nothing_behind(sig):
    before = segments()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hostkit.cli", "smoke", "--duration", "30", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 20
    while len(children(proc.pid)) < 3 and time.monotonic() < deadline:  # the worker and two clients
        time.sleep(0.1)
    time.sleep(1.0)
    run = children(proc.pid)
    assert len(run) >= 3 and segments() - before
    proc.send_signal(sig)
    proc.wait(timeout=20)
    assert proc.returncode == 130  # SIGTERM is turned into the same interrupt as SIGINT
    assert not settle(lambda: {p for p in run if alive(p)}, 10), "the run's worker or clients outlived it"


def test_cli_json_contract_and_bad_input(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hostkit.cli",
            "smoke",
            "--requests",
            "10000",
            "--infer-ms",
            "0",
            "--json",
            "--target-p999-ms",
            "1000",
            "--plot",
            str(tmp_path / "p.png"),
            "--prom",
            str(tmp_path / "m.prom"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    for key in ("samples", "deschedule_ms", "queue_wait_ms", "rpc_ms", "sched_fifo", "cpu", "slo", "diagnosis"):
        assert key in r
    assert set(r["deschedule_ms"]) >= {"p50", "p99", "p999", "max"}
    assert r["samples"] == 10000 and r["slo"]["target_p999_ms"] == 1000
    assert r["slo"]["verdict"] == "PASSED" and r["slo"]["passed"] is True  # a credible p999 within a 1 s target
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    assert "hostkit_smoke_deschedule_seconds_bucket{" in (tmp_path / "m.prom").read_text()  # test_smoke_metrics
    for args, needle in (
        (["--inject-stall", "20"], "MS@EVERY_S"),
        (["--clients", "0"], "--clients"),
        (["--requests", "10", "--duration", "1"], "not allowed with"),
    ):
        bad = subprocess.run([sys.executable, "-m", "hostkit.cli", "smoke", *args], capture_output=True, text=True)
        assert bad.returncode == 2 and needle in bad.stderr, bad.stderr


def test_cli_with_too_few_samples_is_inconclusive_never_passed():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hostkit.cli",
            "smoke",
            "--requests",
            "600",
            "--infer-ms",
            "0",
            "--target-p999-ms",
            "1000",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    assert "INCONCLUSIVE" in proc.stdout and "9,400 short of the 10,000" in proc.stdout
    assert "PASSED" not in proc.stdout


def test_no_fifo_run_reports_sched_fifo_off_not_unpermitted():
    """--no-fifo (--fifo off) is the operator's choice: the report says so, whether or not this host
    permits SCHED_FIFO (it used to read "not permitted")."""
    proc = subprocess.run(
        [sys.executable, "-m", "hostkit.cli", "smoke", "--requests", "600", "--infer-ms", "0", "--no-fifo"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr  # 600 samples: INCONCLUSIVE
    assert "SCHED_FIFO: off (--fifo off)" in proc.stdout, proc.stdout
    assert "not permitted" not in proc.stdout


def test_the_migration_table_says_what_the_worker_s_sched_fifo_was():
    from hostkit.smoke.migration import ROWS

    (cell,) = [get for name, get in ROWS if name == "SCHED_FIFO"]
    states = [
        {"used": True, "available": True, "policy": "budget"},
        {"used": False, "available": False, "policy": "off"},
        {"used": False, "available": True, "policy": "budget"},
        {"used": False, "available": False, "policy": "budget"},
    ]
    assert [cell({"sched_fifo": f}) for f in states] == [
        "used",
        "off (--fifo off)",
        "available, not used",
        "not permitted",
    ]


def test_migration_report_from_two_real_runs(tmp_path):
    def smoke(*extra):
        proc = subprocess.run(
            [sys.executable, "-m", "hostkit.cli", "smoke", "--duration", "2", "--infer-ms", "2", "--json", *extra],
            capture_output=True,
            text=True,
            timeout=120,
        )
        # 2 s at 2 ms per inference: about 1,000 samples, too few for a credible p999, so never PASSED.
        assert proc.returncode == 1, proc.stderr
        return json.loads(proc.stdout)

    before, after = tmp_path / "vm.json", tmp_path / "bm.json"
    before.write_text(json.dumps(smoke("--inject-stall", "20@0.5")))  # the VM's co-stops, stood in for
    after.write_text(json.dumps(smoke()))
    md, png = tmp_path / "report.md", tmp_path / "cdf.png"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hostkit.cli",
            "migrate",
            "report",
            str(before),
            str(after),
            "--md",
            str(md),
            "--plot",
            str(png),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr  # the "after" run is INCONCLUSIVE (see above): not passed
    text = md.read_text()
    assert "| deschedule p999 (ms) |" in text and "injected_stall" in text and "**Verdict after:**" in text
    assert png.read_bytes()[:4] == b"\x89PNG"
    bad = subprocess.run(
        [sys.executable, "-m", "hostkit.cli", "migrate", "report", str(md), str(after)], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "is not JSON" in bad.stderr
