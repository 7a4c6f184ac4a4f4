"""Clients of the smoke test: K processes pinned to housekeeping CPUs, closed or open loop.

Closed loop: submit a batch, wait for all of it, repeat. Open loop at ``rate`` requests/s:
requests are due on a fixed schedule and latency is measured from when each was *due*
(coordinated omission: a stalled system does not get to delay its own measurements).

Waiting for answers: with ``idle`` adaptive (see worker.py and wake.py) a client spins briefly,
then blocks on its eventfd until the worker rings; otherwise it polls with ``poll_sleep_us``
sleeps in between, as the seed's clients did (0: polls without sleeping). Each client announces how many
requests it will submit from when (``coming``, ``next_submit_ns``): the worker's min-batch wait
goes by that.
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
import time
from array import array

from hostkit.smoke.queue import (DONE, ERROR, FREE, NEVER, READY, FlockAllocator, PartitionAllocator,
                                 SharedInferenceQueue)

# done_s: when the inference ended (monotonic clock, seconds): ties slow inferences to probe events.
FIELDS = ("rpc_ms", "service_rpc_ms", "queue_wait_ms", "infer_wall_ms", "infer_cpu_ms", "client_ms", "done_s")


def client_main(cfg: dict, client_id: int, conn) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the orchestrator owns Ctrl-C and cleanup
    if cfg.get("client_cpus"):
        try:
            os.sched_setaffinity(0, set(cfg["client_cpus"]))
        except OSError:
            pass
    samples = array("d")
    errors: list[str] = []
    stats: dict = {}
    _preload()
    conn.send({"ready": True})
    conn.recv()  # "go": every client starts together, none measures another's start-up
    cpu0 = time.process_time()
    try:
        if cfg["transport"] == "shm":
            _run_shm(cfg, client_id, samples, errors, stats)
        else:
            _run_socket(cfg, client_id, samples, errors)
    except Exception as exc:
        errors.append(f"client {client_id} failed: {exc!r}")
        raise
    finally:
        stats["cpu_s"] = time.process_time() - cpu0
        conn.send({"client": client_id, "samples": samples.tobytes(), "errors": errors[:50],
                   "error_count": len(errors), "stats": stats})


def _preload() -> None:
    """Import now what the run will import (numpy, for the tensors): not on the clock, where 16
    clients importing numpy on one CPU cost more than their first thousand requests."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        pass


def _quota(cfg: dict, client_id: int) -> int | None:
    if cfg.get("requests") is None:
        return None
    n, k = cfg["requests"], cfg["clients"]
    return n // k + (1 if client_id < n % k else 0)


WAIT_BLOCK_S = 0.1  # the longest a blocked client waits before it looks at the stop flag and its timeouts
TIMER_SLACK_NS = 100_000  # open loop: block until this long before a request is due, then spin to it


def _run_shm(cfg, client_id, samples, errors, stats) -> None:
    from hostkit.smoke.wake import Bell, Spin

    q = SharedInferenceQueue.attach(cfg["queue"])
    alloc = (PartitionAllocator(q, client_id, cfg["clients"]) if cfg["allocator"] == "partition"
             else FlockAllocator(q, cfg["lockfile"]))
    tensor_count = q.tensor_size // 4
    pid = os.getpid()
    party = client_id + 1
    quota = _quota(cfg, client_id)
    deadline = time.monotonic() + cfg["duration"] if cfg.get("duration") else None
    timeout_ns = int(cfg["request_timeout_s"] * 1e9)
    batch = cfg["client_batch"]
    idle = cfg["idle"]
    poll_sleep = cfg["poll_sleep_us"] / 1e6
    interval_ns = int(1e9 * cfg["clients"] / cfg["rate"]) if cfg.get("rate") else None
    fds = cfg.get("wake_fds") or {}
    me = Bell(q.party_flag(party), fds["clients"][client_id]) if idle == "adaptive" else None
    worker = Bell(q.party_flag(0), fds["worker"]) if me else None
    spin = Spin(int(cfg["spin_us"] * 1000))
    announce = q.announce
    state, set_state, result, now_ns, try_slot = q.state, q.set_state, q.result, time.monotonic_ns, alloc.try_slot
    next_due = now_ns()
    seq = 0
    pending: dict[int, tuple[int, int]] = {}  # slot -> (submit_ns, due_ns)
    payload = None
    tensors: dict = {}  # slot -> the shared ndarray view, made once

    def finished() -> bool:
        if q.stop_requested():
            return True
        if quota is not None and seq >= quota:
            return True
        return deadline is not None and time.monotonic() >= deadline

    def submit(due: int) -> bool:
        nonlocal seq, payload
        i = try_slot()  # the common case, without acquire's deadline arithmetic
        if i is None:
            i = alloc.acquire(timeout=cfg["request_timeout_s"])
        if i is None:
            errors.append("no free slot within the request timeout")
            return False
        t = tensors.get(i)
        if t is None:
            t = tensors[i] = q.tensor(i, count=tensor_count)
        if payload is None:
            try:
                import numpy as np

                payload = np.linspace(0, 1, tensor_count, dtype=np.float32)
            except ImportError:  # no numpy on this host: the same bytes, written as bytes
                payload = struct.pack(f"<{tensor_count}f", *(k / tensor_count for k in range(tensor_count)))
        t[:] = payload  # the request tensor, written in place into the shared ndarray slot
        if isinstance(t, memoryview):
            struct.pack_into("<f", t, 0, seq)
        else:
            t[0] = seq
        now = now_ns()
        q.submit_meta(i, seq, now, pid, tensor_count * 4, client_id)
        set_state(i, READY)
        if worker is not None:
            worker.ring()
        pending[i] = (now, due)
        seq += 1
        return True

    def poll() -> int:
        """Collect what is DONE (or failed); returns how many requests left ``pending``."""
        now = now_ns()
        gone = 0
        for i in list(pending):
            st = state(i)
            submit_ns, due = pending[i]
            if st == DONE:
                seen = now_ns()
                claim, done_ns, wall, cpu = result(i)
                samples.extend(((seen - due) / 1e6, (seen - submit_ns) / 1e6, (claim - submit_ns) / 1e6,
                                wall / 1e6, cpu / 1e6, (seen - done_ns) / 1e6, done_ns / 1e9))
                set_state(i, FREE)  # the allocator's release, inlined: this is every request's path
                del pending[i]
                gone += 1
            elif st == ERROR:
                errors.append(f"slot {i}: the worker reported an error")
                alloc.release(i)
                del pending[i]
                gone += 1
            elif now - submit_ns > timeout_ns:
                errors.append(f"slot {i}: no answer within {cfg['request_timeout_s']} s (worker not answering)")
                del pending[i]  # left to the orchestrator to reclaim
                gone += 1
        return gone

    def answered() -> bool:
        return any(state(i) >= DONE for i in pending)  # DONE or ERROR

    def wait(until_ns: int | None = None) -> None:
        """Until a pending request is answered (or ``until_ns``, or the oldest request's timeout)."""
        if idle != "adaptive":  # the seed's clients: poll, sleep a little, poll again
            if poll_sleep:
                time.sleep(poll_sleep)
            return
        if pending and spin.run(answered):
            return
        limit = min(s for s, _ in pending.values()) + timeout_ns if pending else now_ns() + int(WAIT_BLOCK_S * 1e9)
        if until_ns is not None:
            limit = min(limit, until_ns)
        me.sleep(lambda: answered() or q.stop_requested(), min(WAIT_BLOCK_S, max(0, limit - now_ns()) / 1e9))
        if pending:  # how long the spin would have had to last
            waited = now_ns() - spin.started_ns
            if answered() or waited > spin.max_ns:
                spin.learn(waited)

    while not finished():
        if interval_ns is None:  # closed loop: a batch, then wait for all of it
            n = batch if quota is None else min(batch, quota - seq)
            for k in range(n):
                now = now_ns()
                announce(party, now, n - k)  # submitting these now
                if not submit(now):
                    break
                if k and idle == "adaptive":
                    poll()  # answers that came back while we were submitting: seen now, not after the batch
            announce(party, NEVER, 0)  # nothing more until this batch is back
            while pending and not q.stop_requested():
                if not poll():
                    wait()
        else:  # open loop: requests due on a fixed schedule, whatever came back
            now = now_ns()
            while now >= next_due and not finished():
                submit(next_due)
                next_due += interval_ns
            announce(party, next_due, 1)
            poll()
            if idle != "adaptive":
                wait()
            elif next_due - now_ns() > TIMER_SLACK_NS:
                wait(next_due - TIMER_SLACK_NS)
        if len(errors) > 100:
            break
    announce(party, NEVER, 0)
    end = now_ns() + timeout_ns
    while pending and now_ns() < end and not q.stop_requested():
        if not poll():
            wait()
    stats.update({"spin": spin.stats(), "sleeps": me.sleeps if me else 0, "rings_sent": worker.rings if worker else 0})
    q.close()


def _run_socket(cfg, client_id, samples, errors) -> None:
    sock = socket.create_connection(("127.0.0.1", cfg["port"]))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(cfg["request_timeout_s"])
    quota = _quota(cfg, client_id)
    deadline = time.monotonic() + cfg["duration"] if cfg.get("duration") else None
    tensor = bytes(cfg["req_size"])
    seq = 0
    while not (quota is not None and seq >= quota) and not (deadline and time.monotonic() >= deadline):
        sent = []
        for _ in range(cfg["client_batch"]):
            if quota is not None and seq >= quota:
                break
            submit = time.monotonic_ns()
            msg = pickle.dumps({"id": seq, "tensor": tensor}, protocol=pickle.HIGHEST_PROTOCOL)
            sock.sendall(struct.pack("<I", len(msg)) + msg)
            sent.append(submit)
            seq += 1
        for submit in sent:
            try:
                head = _recv_exact(sock, 4)
                reply = pickle.loads(_recv_exact(sock, struct.unpack("<I", head)[0]))
            except (OSError, TypeError, struct.error):
                errors.append(f"no answer within {cfg['request_timeout_s']} s (worker not answering)")
                return
            seen = time.monotonic_ns()
            samples.extend(((seen - submit) / 1e6, (seen - submit) / 1e6, (reply["claim_ns"] - submit) / 1e6,
                            reply["wall_ns"] / 1e6, reply["cpu_ns"] / 1e6, (seen - reply["done_ns"]) / 1e6,
                            reply["done_ns"] / 1e9))
    sock.close()


def _recv_exact(sock, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)
