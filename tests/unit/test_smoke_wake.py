"""Wake-ups of the smoke worker: it blocks on its eventfd when idle, a ring wakes it, and it then
burns little CPU; the min-batch wait holds a batch back only for requests that are coming.

No test here times the transport (the machine is shared): the margins are seconds against
milliseconds, and CPU time is what the kernel reports (/proc/<pid>/schedstat).
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import threading
import time

import pytest

from hostkit.smoke.diagnose import read_proc
from hostkit.smoke.options import SmokeOptions
from hostkit.smoke.queue import DONE, FREE, NEVER, PROCESSING, READY, SharedInferenceQueue
from hostkit.smoke.session import run_smoke
from hostkit.smoke.wake import Bell, InheritedFd, Spin, new_eventfd
from hostkit.smoke.worker import _more, worker_main

pytestmark = pytest.mark.live


def state_of(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.fixture
def blocked_worker():
    """A real worker (spawned, pinned, adaptive idle) on a queue of one client, with a block
    timeout of 30 s: once asleep, only a ring wakes it within the test."""
    q = SharedInferenceQueue.create(nslots=8, req_size=1024, resp_size=1024, tensor_size=4096, nclients=1)
    wfd, cfd = new_eventfd(), new_eventfd()
    opts = SmokeOptions(
        infer_ms=0,
        slots=8,
        clients=1,
        client_batch=1,
        max_batch=4,
        min_batch=1,
        req_size=1024,
        resp_size=1024,
        tensor_size=4096,
    )
    cfg = {
        **dataclasses.asdict(opts),
        "cpu": max(os.sched_getaffinity(0)),
        "queue": q.name,
        "idle_block_s": 30.0,
        "wake_fds": {"worker": InheritedFd(wfd), "clients": [InheritedFd(cfd)]},
    }
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=worker_main, args=(cfg, child), daemon=True)
    p.start()
    child.close()
    assert parent.poll(60) and parent.recv()["ready"]
    worker_bell = Bell(q.party_flag(0), wfd)
    # asleep: its flag up and the process sleeping, seen twice 0.2 s apart
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if worker_bell.flag[0] == 1 and state_of(p.pid) == "S":
            time.sleep(0.2)
            if worker_bell.flag[0] == 1 and state_of(p.pid) == "S":
                break
        time.sleep(0.05)
    else:
        pytest.fail("the idle worker never blocked")
    try:
        yield q, worker_bell, p
    finally:
        q.request_stop()
        worker_bell.ring_always()
        p.join(10)
        if p.is_alive():
            p.kill()
            p.join()
        parent.close()
        q.close()
        q.unlink()
        os.close(wfd)
        os.close(cfd)


def submit(q: SharedInferenceQueue, i: int) -> None:
    q.set_state(i, FREE)
    q.submit_meta(i, seq=1, submit_ns=time.monotonic_ns(), owner_pid=os.getpid(), req_len=16, client=0)
    q.set_state(i, READY)


def wait_for(pred, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def test_a_blocked_worker_wakes_for_one_request_when_rung(blocked_worker):
    q, bell, _ = blocked_worker
    submit(q, 0)
    # published without a ring: a blocked worker does not poll, the request waits
    assert not wait_for(lambda: q.state(0) != READY, 1.0)
    assert bell.ring() is True  # it was asleep: the ring costs one eventfd write
    assert wait_for(lambda: q.state(0) == DONE, 10.0)  # well inside its 30 s block
    claim, done, wall, cpu = q.result(0)
    assert 0 < claim <= done and q.completed() == 1


def test_an_idle_worker_burns_little_cpu(blocked_worker):
    _, _, p = blocked_worker
    before, t0 = read_proc(p.pid)["cpu_ns"], time.monotonic()
    time.sleep(2.0)
    used_s, wall_s = (read_proc(p.pid)["cpu_ns"] - before) / 1e9, time.monotonic() - t0
    # A spinning worker would use ~all of it; blocked, it uses next to nothing. Generous: shared machine.
    assert used_s < 0.2 * wall_s, f"idle worker used {used_s:.3f} s of CPU in {wall_s:.2f} s"


def test_a_whole_run_needs_no_wakeup_it_missed():
    r = run_smoke(SmokeOptions(requests=4000, infer_ms=0, clients=4, target_p999_ms=1000))
    assert r["samples"] == 4000 and r["errors"]["count"] == 0 and r["faults"] == []
    assert r["wake"]["idle"] == "adaptive" and r["wake"]["worker"]["missed_wakeups"] == 0


def test_open_loop_at_a_low_rate_blocks_instead_of_spinning():
    r = run_smoke(SmokeOptions(duration=2, rate=20, clients=1, infer_ms=0, target_p999_ms=1000))
    assert r["samples"] >= 20 and r["errors"]["count"] == 0 and r["faults"] == []
    worker = r["wake"]["worker"]
    assert worker["sleeps"] >= r["samples"] // 2  # between requests 50 ms apart it blocks, mostly
    assert worker["missed_wakeups"] == 0
    assert r["wake"]["clients"]["rings_sent"] >= worker["sleeps"] // 2


# ---------------------------------------------------------------------------------- min-batch wait


@pytest.fixture
def queue():
    q = SharedInferenceQueue.create(nslots=16, req_size=64, resp_size=64, tensor_size=64, nclients=2)
    yield q
    q.close()
    q.unlink()


def test_min_batch_wait_does_not_wait_when_no_client_is_about_to_submit(queue):
    assert queue.coming_by(NEVER - 1) == 0
    t = time.monotonic()
    assert _more(queue, 1, 0, 16, 8, time.monotonic_ns() + 10 * 10**9, fixed=False) == []
    assert time.monotonic() - t < 5  # not the 10 s allowed


def test_the_seeds_fixed_wait_waits_the_whole_time(queue):
    t = time.monotonic()
    assert _more(queue, 1, 0, 16, 8, time.monotonic_ns() + 300 * 10**6, fixed=True) == []
    assert time.monotonic() - t >= 0.3


def test_min_batch_wait_takes_a_request_that_was_announced(queue):
    queue.announce(2, time.monotonic_ns(), 1)  # client 1 is submitting one now

    def submitted():
        queue.set_state(5, READY)
        queue.announce(2, NEVER, 0)

    threading.Timer(0.1, submitted).start()
    more = _more(queue, 1, 0, 16, 2, time.monotonic_ns() + 10 * 10**9, fixed=False)
    assert more == [5] and queue.state(5) == PROCESSING  # claimed: the next scan skips it


def test_min_batch_wait_does_not_wait_for_a_batch_that_cannot_fill(queue):
    queue.announce(1, time.monotonic_ns(), 3)  # 1 claimed + 3 coming < 8
    t = time.monotonic()
    assert _more(queue, 1, 0, 16, 8, time.monotonic_ns() + 10 * 10**9, fixed=False) == []
    assert time.monotonic() - t < 5
    queue.announce(2, time.monotonic_ns() + 20 * 10**9, 4)  # 4 more, but due after the deadline
    assert queue.coming_by(time.monotonic_ns() + 10 * 10**9) == 3


def test_spin_budget_follows_the_waits_it_sees():
    spin = Spin(64_000)
    word = memoryview(bytearray(4)).cast("I")
    assert spin.until_changed(word, 0, 1) is True and spin.hits == 1  # already changed: caught at once
    word[0] = 7
    assert spin.until_at_least(word, 0, 7) > 0 and spin.hits == 2  # returns when it saw it
    for _ in range(10):
        assert spin.until_changed(word, 0, 7) is False and spin.until_at_least(word, 0, 8) == 0
        spin.learn(10**9)  # then blocked for a second: spinning was wasted
    assert spin.budget_ns == 1_000 and spin.misses == 20  # down to the floor, not to nothing
    for _ in range(40):
        spin.learn(20_000)  # steady waits of 20 us: about twice that catches them
    assert 38_000 <= spin.budget_ns <= 44_000
    for _ in range(40):  # waits of 2 to 20 us: the spread keeps the budget above the longest
        spin.learn(2_000)
        spin.learn(20_000)
    assert 30_000 <= spin.budget_ns <= 64_000
    for _ in range(40):
        spin.learn(60_000)
    assert spin.budget_ns == 64_000  # never beyond the bound
