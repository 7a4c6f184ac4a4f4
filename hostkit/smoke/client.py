"""Clients of the smoke test: K processes pinned to housekeeping CPUs, closed or open loop.

Closed loop: submit a batch, wait for all of it, repeat. Open loop at ``rate`` requests/s:
requests are due on a fixed schedule and latency is measured from when each was *due*
(coordinated omission: a stalled system does not get to delay its own measurements).
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
import time
from array import array

from hostkit.smoke.queue import DONE, ERROR, READY, FlockAllocator, PartitionAllocator, SharedInferenceQueue

FIELDS = ("rpc_ms", "service_rpc_ms", "queue_wait_ms", "infer_wall_ms", "infer_cpu_ms", "client_ms")


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
    conn.send({"ready": True})
    conn.recv()  # "go": every client starts together, none measures another's start-up
    try:
        if cfg["transport"] == "shm":
            _run_shm(cfg, client_id, samples, errors)
        else:
            _run_socket(cfg, client_id, samples, errors)
    except Exception as exc:
        errors.append(f"client {client_id} failed: {exc!r}")
        raise
    finally:
        conn.send({"client": client_id, "samples": samples.tobytes(), "errors": errors[:50],
                   "error_count": len(errors)})


def _quota(cfg: dict, client_id: int) -> int | None:
    if cfg.get("requests") is None:
        return None
    n, k = cfg["requests"], cfg["clients"]
    return n // k + (1 if client_id < n % k else 0)


def _run_shm(cfg, client_id, samples, errors) -> None:
    q = SharedInferenceQueue.attach(cfg["queue"])
    alloc = (PartitionAllocator(q, client_id, cfg["clients"]) if cfg["allocator"] == "partition"
             else FlockAllocator(q, cfg["lockfile"]))
    tensor_count = q.tensor_size // 4
    pid = os.getpid()
    quota = _quota(cfg, client_id)
    deadline = time.monotonic() + cfg["duration"] if cfg.get("duration") else None
    timeout_ns = int(cfg["request_timeout_s"] * 1e9)
    batch = cfg["client_batch"]
    poll_sleep = 0.0 if cfg["idle"] == "spin" else cfg["poll_sleep_us"] / 1e6
    interval_ns = int(1e9 * cfg["clients"] / cfg["rate"]) if cfg.get("rate") else None
    next_due = time.monotonic_ns()
    done = seq = 0
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
        now = time.monotonic_ns()
        q.submit_meta(i, seq, now, pid, tensor_count * 4)
        q.set_state(i, READY)
        pending[i] = (now, due)
        seq += 1
        return True

    def poll() -> None:
        nonlocal done
        now = time.monotonic_ns()
        for i in list(pending):
            st = q.state(i)
            submit_ns, due = pending[i]
            if st == DONE:
                seen = time.monotonic_ns()
                claim, done_ns, wall, cpu = q.result(i)
                samples.extend(((seen - due) / 1e6, (seen - submit_ns) / 1e6, (claim - submit_ns) / 1e6,
                                wall / 1e6, cpu / 1e6, (seen - done_ns) / 1e6))
                alloc.release(i)
                del pending[i]
                done += 1
            elif st == ERROR:
                errors.append(f"slot {i}: the worker reported an error")
                alloc.release(i)
                del pending[i]
            elif now - submit_ns > timeout_ns:
                errors.append(f"slot {i}: no answer within {cfg['request_timeout_s']} s (worker not answering)")
                del pending[i]  # left to the orchestrator to reclaim

    while not finished():
        if interval_ns is None:
            for _ in range(batch):
                if quota is not None and seq >= quota:
                    break
                if not submit(time.monotonic_ns()):
                    break
            while pending and not q.stop_requested():
                poll()
                if pending and poll_sleep > 0:  # 0: spin (sleep(0) costs the 50 us timer slack)
                    time.sleep(poll_sleep)
        else:
            now = time.monotonic_ns()
            while now >= next_due and not finished():
                submit(next_due)
                next_due += interval_ns
            poll()
            time.sleep(poll_sleep)
        if len(errors) > 100:
            break
    end = time.monotonic() + cfg["request_timeout_s"]
    while pending and time.monotonic() < end and not q.stop_requested():
        poll()
        time.sleep(poll_sleep)
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
                            reply["wall_ns"] / 1e6, reply["cpu_ns"] / 1e6, (seen - reply["done_ns"]) / 1e6))
    sock.close()


def _recv_exact(sock, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)
