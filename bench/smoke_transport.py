#!/usr/bin/env python3
"""Benchmark: the path `hostkit smoke` runs, end to end, against its floor and the socket transport.

One run prints, all measured in it (null model, --infer-ms 0, unless said otherwise):

* the floor: a bare two-process shared-memory ping-pong: two Python processes pinned to two CPUs,
  each spinning on one 32-bit word of a /dev/shm mapping (a 4 KiB segment of its own, not the
  queue's) and answering by storing the next value, one round trip timed per iteration with
  perf_counter_ns (as the clients time theirs): what CPython can do with nothing else on the path;
* rpc (submit -> answer seen by the client) through run_smoke, exactly as `hostkit smoke` runs
  it, with 1 and 4 clients, --transport shm and socket;
* the worker's CPU time as a share of wall time with --rate 100 (mostly idle);
* 16-client throughput, this code against the code before the wake-ups (`--baseline REV`,
  exported from git and run the same way), alternating, median of --repeat runs each;
* the idle modes side by side, and slot allocation / state layout.

Targets (docs/dev/benchmarks.md): shm rpc p50 with 1 client <= 10x the floor (judged at the default
--client-batch 4, where each request also waits behind the client's other three, and at
--client-batch 1, one request in flight as in the floor); shm >= 10x faster than socket at p50
with 1 and with 4 clients; worker CPU <= 5% of wall at --rate 100; 16-client throughput not below
the baseline's.

    .venv/bin/python bench/smoke_transport.py [--n 20000] [--repeat 3] [--baseline 8be0868]
"""

from __future__ import annotations

import argparse
import json
import mmap
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hostkit.smoke.metrics import percentile  # noqa: E402
from hostkit.smoke.options import SmokeOptions  # noqa: E402
from hostkit.smoke.session import run_smoke  # noqa: E402

CPUS = sorted(os.sched_getaffinity(0))
BASELINE = "8be0868"  # the last commit before the eventfd wake-ups and adaptive batching


def _pong(path: str, n: int, cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})
    fd = os.open(path, os.O_RDWR)
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
    p = mp.get_context("spawn").Process(target=_pong, args=(path, n, CPUS[-1]))
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
    times = sorted(times[100:])  # not rounded as summary() rounds: the floor is a fraction of a microsecond
    return {"p50": percentile(times, 50), "p99": percentile(times, 99)}


def smoke(**kw) -> dict:
    r = run_smoke(SmokeOptions(**{"infer_ms": 0.0, "target_p999_ms": 1000.0, **kw}))
    if r["errors"]["count"] or r["faults"]:
        print(f"    (run {kw}: errors {r['errors']['examples'][:2]}, faults {r['faults']})")
    return r


# The baseline's run, in its own interpreter with its own tree first on the path (spawned
# children inherit PYTHONPATH, so they run the baseline's worker and clients too).
_BASELINE_SCRIPT = """
import json, sys
from hostkit.smoke.runner import SmokeConfig, run_smoke
if __name__ == "__main__":
    r = run_smoke(SmokeConfig(**json.loads(sys.argv[1])))
    print(json.dumps({"throughput_rps": r["throughput_rps"], "rpc_ms": r["rpc_ms"], "errors": r["errors"]["count"]}))
"""


def export(rev: str, dest: str) -> str:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "hostkit"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def baseline_smoke(tree: str, **kw) -> dict:
    env = {**os.environ, "PYTHONPATH": tree}
    proc = subprocess.run(
        [sys.executable, "-c", _BASELINE_SCRIPT, json.dumps({"target_p999_ms": 1000, **kw})],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        timeout=600,
    )
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout)


def us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1000:8.2f} us"


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000, help="requests per run")
    ap.add_argument("--repeat", type=int, default=3, help="16-client throughput runs per side")
    ap.add_argument("--baseline", default=BASELINE, help="git revision of the code to compare throughput with")
    ap.add_argument("--rate-seconds", type=float, default=5.0, help="length of the --rate 100 run")
    args = ap.parse_args()
    n = args.n
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({len(CPUS)} CPUs)")

    floor = shm_pingpong(n)
    print(f"\nrpc, null model, {n} requests per run        p50          p99")
    print(f"  bare SHM ping-pong (floor)         {us(floor['p50'])}  {us(floor['p99'])}")
    rpc = {}
    for clients in (1, 4):
        for transport in ("shm", "socket"):
            r = smoke(requests=n, clients=clients, transport=transport)
            rpc[transport, clients] = r["rpc_ms"]
            print(
                f"  hostkit smoke --transport {transport:<6} --clients {clients}  {us(r['rpc_ms']['p50'])}  "
                f"{us(r['rpc_ms']['p99'])}   {r['throughput_rps']:>8.0f} req/s"
            )
    one = smoke(requests=n, clients=1, client_batch=1)
    print(
        f"  hostkit smoke --clients 1 --client-batch 1   {us(one['rpc_ms']['p50'])}  {us(one['rpc_ms']['p99'])}"
        f"   {one['throughput_rps']:>8.0f} req/s"
    )

    print("\ntargets")
    for label, r in (("--client-batch 4 (default)", rpc["shm", 1]), ("--client-batch 1", one["rpc_ms"])):
        ratio = r["p50"] / floor["p50"]
        print(
            f"  shm rpc p50, 1 client, {label} / floor p50: {ratio:.1f}x (target <= 10x: {verdict(ratio <= 10)}; "
            f"moonshot <= 5x: {verdict(ratio <= 5)})"
        )
    for clients in (1, 4):
        ratio = rpc["socket", clients]["p50"] / rpc["shm", clients]["p50"]
        print(f"  socket / shm rpc p50, {clients} client(s): {ratio:.1f}x (target >= 10x: {verdict(ratio >= 10)})")
    idle = smoke(duration=args.rate_seconds, clients=2, rate=100)
    share = idle["cpu_time"]["worker_share"]
    print(
        f"  worker CPU with --rate 100 for {args.rate_seconds:g} s: {idle['cpu_time']['worker_s']:.3f} s of "
        f"{idle['cpu_time']['window_s']:.2f} s = {share:.1%} of wall (target <= 5%: {verdict(share <= 0.05)}); "
        f"rpc p50 {us(idle['rpc_ms']['p50']).strip()}, worker blocked {idle['wake']['worker']['sleeps']} times"
    )

    with tempfile.TemporaryDirectory(prefix="hostkit-bench-") as tree:
        export(args.baseline, tree)
        new, old = [], []
        for _ in range(args.repeat):  # alternate, so both sides see the same noise
            old.append(baseline_smoke(tree, requests=n, clients=16, infer_ms=0.0)["throughput_rps"])
            new.append(smoke(requests=n, clients=16)["throughput_rps"])
        before_one = baseline_smoke(tree, requests=n, clients=1, infer_ms=0.0)["rpc_ms"]
    print(
        f"  shm rpc p50, 1 client: {us(rpc['shm', 1]['p50']).strip()} vs {us(before_one['p50']).strip()} "
        f"before ({args.baseline})"
    )
    ratio = statistics.median(new) / statistics.median(old)
    print(
        f"  16 clients, null model: {statistics.median(new):.0f} req/s vs {statistics.median(old):.0f} req/s "
        f"before ({args.baseline}), median of {args.repeat}: {ratio:.2f}x (target >= 1: {verdict(ratio >= 1)}); "
        f"runs {[round(x) for x in new]} vs {[round(x) for x in old]}"
    )

    print("\nidle modes, shm, 1 client, null model         rpc p50      rpc p99     worker CPU")
    for mode in ("adaptive", "sleep", "spin"):
        r = smoke(requests=n, clients=1, idle=mode)
        print(
            f"  --idle {mode:<9}                         {us(r['rpc_ms']['p50'])}  {us(r['rpc_ms']['p99'])}"
            f"   {r['cpu_time']['worker_share']:.0%} of wall"
        )

    print("\nallocation and state layout (2 clients x batch 4, null model):")
    for allocator in ("partition", "flock"):
        for stride in (64, 4):
            r = smoke(requests=n, clients=2, allocator=allocator, state_stride=stride)
            print(
                f"  {allocator:<9} stride {stride:>2}: rpc p50 {us(r['rpc_ms']['p50'])}, "
                f"p99 {us(r['rpc_ms']['p99'])}, "
                f"{r['throughput_rps']:8.0f} req/s, errors {r['errors']['count']}"
            )
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
