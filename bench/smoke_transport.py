#!/usr/bin/env python3
"""Benchmark: round trips of the hostkit SHM queue against a bare shared-memory ping-pong floor
and TCP loopback + pickle of 48 KiB, all in one run; then throughput with batching.

Targets: SHM queue p50 <= 10x the floor; SHM >= 10x faster than TCP + pickle at p50.

    .venv/bin/python bench/smoke_transport.py [--n 20000]
"""

from __future__ import annotations

import argparse
import mmap
import multiprocessing as mp
import os
import pickle
import socket
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hostkit.smoke.metrics import summary  # noqa: E402
from hostkit.smoke.options import SmokeOptions  # noqa: E402
from hostkit.smoke.session import run_smoke  # noqa: E402

CPUS = sorted(os.sched_getaffinity(0))


def _pong(buf_fd_path: str, n: int, cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})
    fd = os.open(buf_fd_path, os.O_RDWR)
    m = mmap.mmap(fd, 4096)
    flag = memoryview(m).cast("I")
    for i in range(1, n + 1):
        while flag[0] != 2 * i - 1:
            pass
        flag[0] = 2 * i


def shm_pingpong(n: int) -> dict:
    """The floor: two processes, one 32-bit flag in shared memory, both spinning."""
    path = f"/dev/shm/hostkit-bench-{os.getpid()}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, 4096)
    m = mmap.mmap(fd, 4096)
    flag = memoryview(m).cast("I")
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=_pong, args=(path, n, CPUS[-1]))
    p.start()
    os.sched_setaffinity(0, {CPUS[0]})
    times = []
    try:
        for i in range(1, n + 1):
            t = time.perf_counter_ns()
            flag[0] = 2 * i - 1
            while flag[0] != 2 * i:
                pass
            times.append((time.perf_counter_ns() - t) / 1e6)
    finally:
        p.join()
        os.sched_setaffinity(0, set(CPUS))
        flag.release()
        m.close()
        os.close(fd)
        os.unlink(path)
    return summary(times[100:])


def _echo_server(port_conn, cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port_conn.send(srv.getsockname()[1])
    c, _ = srv.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reply = pickle.dumps(bytes(32768), protocol=pickle.HIGHEST_PROTOCOL)
    while True:
        head = c.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            return
        body = c.recv(struct.unpack("<I", head)[0], socket.MSG_WAITALL)
        pickle.loads(body)
        c.sendall(struct.pack("<I", len(reply)) + reply)


def tcp_pickle(n: int) -> dict:
    """The seeds' socket actor path: 16 KiB request + 32 KiB response, pickled, over TCP loopback."""
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe()
    p = ctx.Process(target=_echo_server, args=(b, CPUS[-1]), daemon=True)
    p.start()
    port = a.recv()
    os.sched_setaffinity(0, {CPUS[0]})
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req = bytes(16384)
    times = []
    try:
        for _ in range(n):
            t = time.perf_counter_ns()
            msg = pickle.dumps(req, protocol=pickle.HIGHEST_PROTOCOL)
            s.sendall(struct.pack("<I", len(msg)) + msg)
            head = s.recv(4, socket.MSG_WAITALL)
            pickle.loads(s.recv(struct.unpack("<I", head)[0], socket.MSG_WAITALL))
            times.append((time.perf_counter_ns() - t) / 1e6)
    finally:
        s.close()
        p.join(timeout=5)
        os.sched_setaffinity(0, set(CPUS))
    return summary(times[100:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    args = ap.parse_args()
    floor = shm_pingpong(args.n)
    queue = run_smoke(SmokeOptions(requests=args.n, infer_ms=0, clients=1, client_batch=1, min_batch=1,
                                  min_batch_wait_ms=0, idle="spin", fifo=False,
                                  target_p999_ms=1000))["rpc_ms"]
    tcp = tcp_pickle(args.n)
    batched = run_smoke(SmokeOptions(requests=args.n * 2, infer_ms=0, clients=2, client_batch=8, min_batch=8,
                                    idle="spin", fifo=False, target_p999_ms=1000))
    single = run_smoke(SmokeOptions(requests=args.n, infer_ms=0, clients=1, client_batch=1, min_batch=1,
                                   min_batch_wait_ms=0, idle="spin", fifo=False,
                                   target_p999_ms=1000))
    print(f"round trip, {args.n} each (ms)            p50        p99")
    for name, s in (("bare SHM ping-pong (floor)", floor), ("hostkit SHM queue (null model)", queue),
                    ("TCP loopback + pickle 48 KiB", tcp)):
        print(f"  {name:<32} {s['p50']:9.4f}  {s['p99']:9.4f}")
    r1 = queue["p50"] / floor["p50"]
    r2 = tcp["p50"] / queue["p50"]
    print(f"SHM queue p50 / floor p50: {r1:.1f}x  (target <= 10x: {'met' if r1 <= 10 else 'MISSED'})")
    print(f"TCP+pickle p50 / SHM queue p50: {r2:.1f}x  (target >= 10x: {'met' if r2 >= 10 else 'MISSED'})")
    print(f"throughput, null model: batch 1 {single['throughput_rps']:.0f} req/s; "
          f"2 clients x batch 8 (worker min batch 8) {batched['throughput_rps']:.0f} req/s "
          f"({batched['throughput_rps'] / single['throughput_rps']:.1f}x)")
    print("allocation and state layout (2 clients x batch 4, null model, busy polling):")
    for allocator in ("partition", "flock"):
        for stride in (64, 4):
            r = run_smoke(SmokeOptions(requests=args.n, infer_ms=0, clients=2, client_batch=4, min_batch=1,
                                      min_batch_wait_ms=0, idle="spin", fifo=False,
                                      allocator=allocator, state_stride=stride, target_p999_ms=1000))
            print(f"  {allocator:<9} stride {stride:>2}: rpc p50 {r['rpc_ms']['p50'] * 1000:7.1f} us, "
                  f"p99 {r['rpc_ms']['p99'] * 1000:7.1f} us, {r['throughput_rps']:8.0f} req/s, "
                  f"errors {r['errors']['count']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
