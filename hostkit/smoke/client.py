"""Clients of the smoke test: K processes pinned to housekeeping CPUs, closed or open loop.

Closed loop: submit a batch, wait for all of it, repeat. Open loop at ``rate`` requests/s:
requests are due on a fixed schedule and latency is measured from when each was *due*
(coordinated omission: a stalled system does not get to delay its own measurements).

Waiting for answers: with ``idle`` adaptive (see worker.py and wake.py) a client spins briefly,
then blocks on its eventfd until the worker rings; otherwise it polls with ``poll_sleep_us``
sleeps in between, as the original inference actor's clients did (0: polls without sleeping). Each
client announces how many requests it will submit from when (``coming``, ``next_submit_ns``): the
worker's min-batch wait goes by that.
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
import time
from array import array

from hostkit.smoke.queue import (
    DONE,
    ERROR,
    FREE,
    NEVER,
    READY,
    SLOT_META,
    TOKEN_MASK,
    FlockAllocator,
    PartitionAllocator,
    SharedInferenceQueue,
    announcements_matter,
    doorbell_token,
)

# done_s: when the inference ended (monotonic clock, seconds): ties slow inferences to probe events.
FIELDS = ("rpc_ms", "service_rpc_ms", "queue_wait_ms", "infer_wall_ms", "infer_cpu_ms", "client_ms", "done_s")
# What a client records per answered request, as it comes (integers, monotonic ns): when the answer
# was seen, when the request was due and submitted, and the worker's claim, done, wall and CPU
# times. ``samples`` turns them into FIELDS once the run is over, off the clock.
RAW = ("seen", "due", "submit", "claim", "done", "wall", "cpu")


def samples(raw: array) -> array:
    """RAW records (``array("q")``) as FIELDS records (``array("d")``, ms; done_s in seconds)."""
    out = array("d")
    for k in range(0, len(raw), len(RAW)):
        seen, due, submit, claim, done, wall, cpu = raw[k : k + len(RAW)]
        out.extend(
            (
                (seen - due) / 1e6,
                (seen - submit) / 1e6,
                (claim - submit) / 1e6,
                wall / 1e6,
                cpu / 1e6,
                (seen - done) / 1e6,
                done / 1e9,
            )
        )
    return out


def client_main(cfg: dict, client_id: int, conn) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the orchestrator owns Ctrl-C and cleanup
    if cfg.get("client_cpus"):
        try:
            os.sched_setaffinity(0, set(cfg["client_cpus"]))
        except OSError:
            pass
    raw = array("q")
    errors: list[str] = []
    stats: dict = {}
    conn.send({"ready": True})
    conn.recv()  # "go": every client starts together, none measures another's start-up
    cpu0 = time.process_time()
    try:
        if cfg["transport"] == "shm":
            _run_shm(cfg, client_id, raw, errors, stats)
        else:
            _run_socket(cfg, client_id, raw, errors)
    except Exception as exc:
        errors.append(f"client {client_id} failed: {exc!r}")
        raise
    finally:
        stats["cpu_s"] = time.process_time() - cpu0
        conn.send(
            {
                "client": client_id,
                "samples": samples(raw).tobytes(),
                "errors": errors[:50],
                "error_count": len(errors),
                "stats": stats,
            }
        )


def _quota(cfg: dict, client_id: int) -> int | None:
    if cfg.get("requests") is None:
        return None
    n, k = cfg["requests"], cfg["clients"]
    return n // k + (1 if client_id < n % k else 0)


WAIT_BLOCK_S = 0.1  # the longest a blocked client waits before it looks at the stop flag and its timeouts
TIMER_SLACK_NS = 100_000  # open loop: block until this long before a request is due, then spin to it


def _payload(count: int) -> memoryview:
    """The request tensor every client writes: ``count`` float32 evenly from 0 to 1 (numpy's
    ``linspace(0, 1, count)``), as a float32 view."""
    return memoryview(array("f", (k / max(1, count - 1) for k in range(count))))


def _run_shm(cfg, client_id, raw, errors, stats) -> None:
    """Every request passes through ``submit`` and ``collect``: what they need is bound to local
    names once, slot offsets are precomputed, shared words are read and stored through one-item
    views, and nothing is allocated per request but the record it appends.

    It stays one long function on purpose: the closures and locals it binds are what keep a
    request's path free of attribute lookups and calls (bench/smoke_transport.py measures that path
    against the bare floor); split into helpers, each request would pay their calls."""
    from hostkit.smoke.wake import Bell, Spin

    q = SharedInferenceQueue.attach(cfg["queue"])
    alloc = (
        PartitionAllocator(q, client_id, cfg["clients"])
        if cfg["allocator"] == "partition"
        else FlockAllocator(q, cfg["lockfile"])
    )
    nslots, tensor_count = q.nslots, q.tensor_size // 4
    pid = os.getpid()
    party = client_id + 1
    quota = _quota(cfg, client_id)
    deadline = time.monotonic() + cfg["duration"] if cfg.get("duration") else None
    timeout_ns = int(cfg["request_timeout_s"] * 1e9)
    batch = cfg["client_batch"]
    adaptive = cfg["idle"] == "adaptive"
    poll_sleep = cfg["poll_sleep_us"] / 1e6
    interval_ns = int(1e9 * cfg["clients"] / cfg["rate"]) if cfg.get("rate") else None
    fds = cfg.get("wake_fds") or {}
    me = Bell(q.party_flag(party), fds["clients"][client_id]) if adaptive else None
    worker = Bell(q.party_flag(0), fds["worker"]) if me else None
    doorbell, bell = q.party_word(0, "doorbell"), doorbell_token(party, 0)
    spin = Spin(int(cfg["spin_us"] * 1000))
    states, step = q.state_words()
    stop = q.header_word("stop")
    buf, now_ns, try_slot = q.shm.buf, time.monotonic_ns, alloc.try_slot
    pack_meta, meta_at = SLOT_META.whole.pack_into, [q.off_meta + i * SLOT_META.size for i in range(nslots)]
    unpack_result, result_at = q.RESULT.unpack_from, [q.result_offset(i) for i in range(nslots)]
    pack_announce, announce_at = q.ANNOUNCE.pack_into, q.announce_offset(party)
    announce = announcements_matter(cfg)
    extend = raw.extend
    payload = _payload(tensor_count)
    tensors: list = [None] * nslots  # slot -> its tensor area as a float32 view, made once
    submitted = [0] * nslots  # slot -> when its request was submitted, and when it was due (ns)
    due_at = [0] * nslots
    pending: list[int] = []  # slots with a request out, in the order they were submitted
    next_due = now_ns()
    seq = 0
    caught = -1  # the slot whose answer the last spin caught
    learn = False  # whether that wait is one to learn from (a sampled hit), once its record is made

    def finished() -> bool:
        if stop[0]:
            return True
        if quota is not None and seq >= quota:
            return True
        return deadline is not None and time.monotonic() >= deadline

    def submit(due: int) -> bool:
        nonlocal seq
        i = try_slot()  # the common case, without acquire's deadline arithmetic
        if i is None:
            i = alloc.acquire(timeout=cfg["request_timeout_s"])
        if i is None:
            errors.append("no free slot within the request timeout")
            return False
        t = tensors[i]
        if t is None:
            t = tensors[i] = q.tensor_floats(i, tensor_count)
        t[:] = payload  # the request tensor, written in place where the worker reads it as an ndarray
        t[0] = seq
        now = now_ns()
        pack_meta(buf, meta_at[i], seq, now, 0, 0, 0, 0, pid, tensor_count * 4, client_id, 0)  # q.submit_meta
        states[i * step] = READY
        if worker is not None:
            doorbell[0] = bell | seq & TOKEN_MASK  # doorbell_token(party, seq): what a spinning worker watches
            worker.ring()  # and what wakes a blocked one
        submitted[i] = now
        due_at[i] = due
        pending.append(i)
        seq += 1
        return True

    def collect(seen: int = 0) -> int:
        """Record what is DONE (and what failed); returns how many requests left ``pending``.
        ``seen``: when the oldest one was seen DONE (by ``wait``), else now."""
        nonlocal caught
        gone = k = 0
        while k < len(pending):
            i = pending[k]
            st = states[i * step]
            if st == DONE:
                extend((seen if seen and i == caught else now_ns(), due_at[i], submitted[i]))  # RAW
                result = unpack_result(buf, result_at[i])
                extend(result)
                states[i * step] = FREE  # the allocator's release, inlined: this is every request's path
                if i == caught:
                    if learn:
                        spin.caught(result[1])  # waited until the answer was done
                    caught = -1
            elif st == ERROR:
                errors.append(f"slot {i}: the worker reported an error")
                alloc.release(i)
                if i == caught:
                    caught = -1
            else:
                k += 1
                continue
            del pending[k]
            gone += 1
        return gone

    def expire() -> None:
        """Give up on requests unanswered for the request timeout (left to the orchestrator to reclaim)."""
        now = now_ns()
        while pending and now - submitted[pending[0]] > timeout_ns:
            errors.append(
                f"slot {pending.pop(0)}: no answer within {cfg['request_timeout_s']} s (worker not answering)"
            )

    def answered() -> bool:
        return any(states[i * step] >= DONE for i in pending)  # DONE or ERROR

    def wait(until_ns: int | None = None) -> int:
        """Until a pending request is answered (or ``until_ns``, or the oldest request's timeout);
        returns when the spin saw the oldest one answered (monotonic ns), else 0."""
        nonlocal caught, learn
        if not adaptive:  # the original actor's clients: poll, sleep a little, poll again
            if poll_sleep:
                time.sleep(poll_sleep)
            expire()
            return 0
        # the oldest request is, nearly always, the first answered: its state is the word to watch
        if pending:
            seen = spin.until_at_least(states, pending[0] * step, DONE)
            if seen:
                caught, learn = pending[0], spin.learns_this_hit()
                return seen
        limit = submitted[pending[0]] + timeout_ns if pending else now_ns() + int(WAIT_BLOCK_S * 1e9)
        if until_ns is not None:
            limit = min(limit, until_ns)
        me.sleep(lambda: answered() or stop[0], min(WAIT_BLOCK_S, max(0, limit - now_ns()) / 1e9))
        if pending:  # how long the spin would have had to last: until the answer was done (not woken)
            if states[pending[0] * step] == DONE:
                spin.learn(unpack_result(buf, result_at[pending[0]])[1] - spin.started_ns)
            elif now_ns() - spin.started_ns > spin.max_ns:
                spin.learn(now_ns() - spin.started_ns)
        expire()
        return 0

    while not finished():
        if interval_ns is None:  # closed loop: a batch, then wait for all of it
            n = batch if quota is None else min(batch, quota - seq)
            for k in range(n):
                now = now_ns()
                if announce:
                    pack_announce(buf, announce_at, n - k, now)  # q.announce: submitting these now
                if not submit(now):
                    break
                if k and adaptive:
                    collect()  # answers that came back while we were submitting: seen now, not after the batch
            if announce:
                pack_announce(buf, announce_at, 0, NEVER)  # nothing more until this batch is back
            seen = 0
            while pending and not stop[0]:
                if not collect(seen):
                    seen = wait()
        else:  # open loop: requests due on a fixed schedule, whatever came back
            now = now_ns()
            while now >= next_due and not finished():
                submit(next_due)
                next_due += interval_ns
            q.announce(party, next_due, 1)
            collect()
            if not adaptive:
                wait()
            elif next_due - now_ns() > TIMER_SLACK_NS:
                wait(next_due - TIMER_SLACK_NS)
        if len(errors) > 100:
            break
    q.announce(party, NEVER, 0)
    end = now_ns() + timeout_ns
    while pending and now_ns() < end and not stop[0]:
        if not collect():
            wait()
    stats.update({"spin": spin.stats(), "sleeps": me.sleeps if me else 0, "rings_sent": worker.rings if worker else 0})
    q.close()


def _run_socket(cfg, client_id, raw, errors) -> None:
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
            raw.extend(
                (
                    time.monotonic_ns(),
                    submit,
                    submit,
                    reply["claim_ns"],
                    reply["done_ns"],
                    reply["wall_ns"],
                    reply["cpu_ns"],
                )
            )  # RAW
    sock.close()


def _recv_exact(sock, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)
