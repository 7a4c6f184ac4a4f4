"""Orchestrate one smoke run: queue, worker, clients, probes, stalls, cyclictest, faults, cleanup.

Whatever the exit path (normal, error, SIGINT, SIGTERM, a killed worker or client), no process
of the run outlives it and its /dev/shm segment is unlinked.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from array import array
from dataclasses import asdict, dataclass

from hostkit.errors import BadInput
from hostkit.smoke import diagnose as dg
from hostkit.smoke.client import FIELDS, client_main
from hostkit.smoke.metrics import SLOW_INFER_CPU_MS, SLOW_INFER_WALL_MS, credibility, summary
from hostkit.smoke.queue import DONE, ERROR, PROCESSING, READY, WRITING, FREE, SharedInferenceQueue
from hostkit.smoke.worker import worker_main


@dataclass
class SmokeConfig:
    transport: str = "shm"  # shm | socket
    allocator: str = "partition"  # partition (lock-free) | flock (the seed's)
    state_stride: int = 64  # 64: a cache line per slot state; 4: packed as in the seed
    nslots: int = 256
    req_size: int = 16384
    resp_size: int = 32768
    tensor_size: int = 16384
    infer_ms: float = 2.0
    model: str | None = None
    requests: int | None = None
    duration: float | None = None
    clients: int = 2
    client_batch: int = 4
    rate: float | None = None  # open loop, requests/s over all clients
    max_batch: int = 16
    min_batch: int = 8
    min_batch_wait_ms: float = 0.2
    idle_sleep_ms: float = 0.5
    busy_poll: bool = False
    cpu: int | None = None
    client_cpus: list[int] | None = None
    fifo: bool = True
    request_timeout_s: float = 2.0
    poll_sleep_s: float = 0.00005
    inject_stall_ms: float | None = None
    inject_every_s: float | None = None
    with_cyclictest: bool = False
    target_p999_ms: float = 1.0

    def validate(self) -> None:
        if self.transport not in ("shm", "socket"):
            raise BadInput(f"--transport must be shm or socket, got {self.transport!r}")
        if self.allocator not in ("partition", "flock"):
            raise BadInput(f"--allocator must be partition or flock, got {self.allocator!r}")
        if self.requests is None and self.duration is None:
            self.requests = 20000
        if self.requests is not None and self.requests < 1:
            raise BadInput(f"--requests must be >= 1, got {self.requests}")
        if self.duration is not None and not 0 < self.duration <= 86400:
            raise BadInput(f"--duration must be in (0, 86400] seconds, got {self.duration}")
        if not 1 <= self.clients <= 64:
            raise BadInput(f"--clients must be 1..64, got {self.clients}")
        if self.clients * self.client_batch > self.nslots:
            raise BadInput(f"--clients x --client-batch ({self.clients * self.client_batch}) exceeds "
                           f"--slots {self.nslots}")
        if self.infer_ms < 0 or self.infer_ms > 10000:
            raise BadInput(f"--infer-ms must be 0..10000, got {self.infer_ms}")
        if self.rate is not None and self.rate <= 0:
            raise BadInput(f"--rate must be > 0, got {self.rate}")
        if self.target_p999_ms <= 0:
            raise BadInput(f"--target-p999-ms must be > 0, got {self.target_p999_ms}")
        if not 1 <= self.min_batch <= self.max_batch <= self.nslots:
            raise BadInput("batching needs 1 <= min batch <= max batch <= slots")
        online = sorted(os.sched_getaffinity(0))
        if self.cpu is not None and self.cpu not in online:
            raise BadInput(f"--cpu {self.cpu} is not a CPU this process may run on ({online})")
        if self.model and not os.path.isfile(self.model):
            raise BadInput(f"--model {self.model}: no such file")


def parse_stall(text: str) -> tuple[float, float]:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*@\s*(\d+(?:\.\d+)?)\s*", text or "")
    if not m or float(m.group(1)) <= 0 or float(m.group(2)) <= 0:
        raise BadInput(f"--inject-stall expects MS@EVERY_S (e.g. 20@0.5), got {text!r}")
    ms, every = float(m.group(1)), float(m.group(2))
    if ms / 1000 >= every:
        raise BadInput(f"--inject-stall {text}: the stall must be shorter than its period")
    return ms, every


def choose_cpus(cfg: SmokeConfig) -> tuple[int, list[int]]:
    """Worker: the given CPU, else an isolated CPU, else the last online one; clients: housekeeping."""
    allowed = sorted(os.sched_getaffinity(0))
    try:
        from hostkit.agent.cpulist import parse_cpulist

        isolated = sorted(parse_cpulist(open("/sys/devices/system/cpu/isolated").read()))
    except (OSError, ValueError):
        isolated = []
    cpu = cfg.cpu if cfg.cpu is not None else (isolated[0] if isolated else allowed[-1])
    clients = cfg.client_cpus or [c for c in allowed if c != cpu and c not in isolated] or allowed
    return cpu, clients


class _Stalls(threading.Thread):
    """SIGSTOP/SIGCONT the worker: a stand-in for a hypervisor co-stop of known size."""

    def __init__(self, pid: int, ms: float, every: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.ms, self.every = pid, ms, every
        self.stop = threading.Event()
        self.count = 0

    def run(self) -> None:
        while not self.stop.wait(self.every):
            try:
                os.kill(self.pid, signal.SIGSTOP)
                time.sleep(self.ms / 1000)
                os.kill(self.pid, signal.SIGCONT)
                self.count += 1
            except ProcessLookupError:
                return


def _cyclictest(cpu: int, seconds: float) -> subprocess.Popen | None:
    exe = "/usr/bin/cyclictest"
    if not os.path.exists(exe):
        return None
    argv = [exe, "-q", "-m", "-t1", "-a", str(cpu), "-p", "80", "-i", "1000", "-h", "20000",
            "-D", f"{max(1, int(round(seconds)))}s"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def parse_cyclictest(text: str) -> dict:
    out: dict = {}
    hist: list[tuple[int, int]] = []
    for line in text.splitlines():
        if line.startswith("# Min Latencies:"):
            out["min_us"] = int(line.split()[-1])
        elif line.startswith("# Avg Latencies:"):
            out["avg_us"] = int(line.split()[-1])
        elif line.startswith("# Max Latencies:"):
            out["max_us"] = int(line.split()[-1])
        elif line.startswith("# Total:"):
            out["samples"] = int(line.split()[-1])
        elif line and line[0].isdigit():
            us, count = line.split()[:2]
            if int(count):
                hist.append((int(us), int(count)))
    total = sum(c for _, c in hist)
    for name, p in (("p50_us", 0.5), ("p99_us", 0.99), ("p999_us", 0.999)):
        acc = 0
        for us, c in hist:
            acc += c
            if total and acc >= p * total:
                out[name] = us
                break
    return out


def run_smoke(cfg: SmokeConfig, progress=None, facts: dict | None = None, on_started=None) -> dict:
    """Run one smoke test. ``on_started({"worker": pid, "clients": [pid...], "segment": path})`` is
    called once everything runs (fault tests use it to kill or stop processes mid-run)."""
    cfg.validate()
    cpu, client_cpus = choose_cpus(cfg)
    ctx = mp.get_context("spawn")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")  # one BLAS thread in the spawned worker
    queue = lockfile = None
    procs: list = []
    faults: list[str] = []
    old_term = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        wcfg = {**asdict(cfg), "cpu": cpu}
        if cfg.transport == "shm":
            queue = SharedInferenceQueue.create(nslots=cfg.nslots, req_size=cfg.req_size, resp_size=cfg.resp_size,
                                                tensor_size=cfg.tensor_size, state_stride=cfg.state_stride)
            wcfg["queue"] = queue.name
            fd, lockfile = tempfile.mkstemp(prefix="hostkit-smoke-", suffix=".lock")
            os.close(fd)
            wcfg["lockfile"] = lockfile
        parent_w, child_w = ctx.Pipe()
        worker = ctx.Process(target=worker_main, args=(wcfg, child_w), name="hostkit-smoke-worker", daemon=True)
        worker.start()
        procs.append(worker)
        if not parent_w.poll(60):
            raise RuntimeError("the worker did not become ready within 60 s")
        ready = parent_w.recv()
        wcfg["port"] = ready.get("port")
        ccfg = {**wcfg, "client_cpus": client_cpus}

        rt_log0 = dg.kernel_log_rt_throttling_count()
        rt_runtime = _read_int("/proc/sys/kernel/sched_rt_runtime_us")
        rt_period = _read_int("/proc/sys/kernel/sched_rt_period_us")
        steal0 = dg.cpu_steal_ticks(cpu)
        proc0 = dg.read_proc(worker.pid)
        cyc = _cyclictest(cpu, cfg.duration or max(1.0, (cfg.requests or 1) * max(cfg.infer_ms, 0.05) / 1000 * 1.2)) \
            if cfg.with_cyclictest else None

        clients = []
        for k in range(cfg.clients):
            a, b = ctx.Pipe()
            p = ctx.Process(target=client_main, args=(ccfg, k, b), name=f"hostkit-smoke-client-{k}", daemon=True)
            p.start()
            procs.append(p)
            clients.append((p, a))
        for p, conn in clients:
            if not conn.poll(60):
                raise RuntimeError("a client did not become ready within 60 s")
            conn.recv()
        for p, conn in clients:
            conn.send("go")
        if on_started:
            on_started({"worker": worker.pid, "clients": [p.pid for p, _ in clients],
                        "segment": queue.shm.path if queue is not None else None})
        stalls = None
        if cfg.inject_stall_ms:
            stalls = _Stalls(worker.pid, cfg.inject_stall_ms, cfg.inject_every_s)
            stalls.start()

        start = time.monotonic()
        runnable_seen: set[str] = set()
        last_completed, last_progress = 0, time.monotonic()
        results: dict[int, dict] = {}
        total = cfg.requests
        while True:
            for k, (p, conn) in enumerate(clients):
                if k not in results and conn.poll():
                    try:
                        results[k] = conn.recv()
                    except (EOFError, OSError):  # the client died before it could report
                        p.join(timeout=1)
                        results[k] = {"client": k, "samples": b"", "errors": [f"client {k} died"], "error_count": 1}
                        faults.append(f"client {k} died (exit code {p.exitcode}); its slots were reclaimed")
                        if queue is not None:
                            _reclaim(queue, p.pid)
            if len(results) == len(clients):
                break
            now = time.monotonic()
            if queue is not None:
                done_n = queue.completed()
                if done_n != last_completed:
                    last_completed, last_progress = done_n, now
                elif now - last_progress > cfg.request_timeout_s * 2 and \
                        queue.find(READY, limit=1) + queue.find(PROCESSING, limit=1) and not queue.stop_requested():
                    faults.append(f"worker not answering: no inference completed for {now - last_progress:.1f} s")
                    queue.request_stop()
                if progress:
                    progress(done_n, total, now - start, cfg.duration)
            elif progress:
                progress(None, total, now - start, cfg.duration)
            if worker.exitcode is not None and not any("worker died" in f for f in faults):
                faults.append(f"worker died (exit code {worker.exitcode})")
                if queue is not None:
                    for i in queue.find(PROCESSING) + queue.find(READY):
                        queue.set_state(i, ERROR)
                    queue.request_stop()
            for k, (p, conn) in enumerate(clients):
                if p.exitcode not in (None, 0) and k not in results:
                    results[k] = {"client": k, "samples": b"", "errors": [f"client {k} died"], "error_count": 1}
                    faults.append(f"client {k} died (exit code {p.exitcode}); its slots were reclaimed")
                    if queue is not None:
                        _reclaim(queue, p.pid)
            if int(now - start) % 1 == 0 and len(runnable_seen) < 20:
                runnable_seen.update(dg.runnable_on_cpu(cpu, exclude={p.pid for p in procs} | {os.getpid()}))
            if cfg.duration and now - start > cfg.duration + cfg.request_timeout_s * 3 + 30:
                faults.append("the run did not finish in time")
                break
            time.sleep(0.02)
        elapsed = time.monotonic() - start
        for k, (p, conn) in enumerate(clients):
            p.join(timeout=5)
            if p.exitcode not in (None, 0) and not any(f.startswith(f"client {k} ") for f in faults):
                faults.append(f"client {k} failed (exit code {p.exitcode})")
        if stalls:
            stalls.stop.set()
            stalls.join()
        proc1 = dg.read_proc(worker.pid)
        steal1 = dg.cpu_steal_ticks(cpu)
        if queue is not None:
            queue.request_stop()
        else:
            parent_w.send("stop")
        try:
            worker_stats = parent_w.recv() if parent_w.poll(10) else {}
        except (EOFError, OSError):
            worker_stats = {}
        cyc_out = None
        if cyc is not None:
            try:
                out, _ = cyc.communicate(timeout=max(5, (cfg.duration or 5) + 10))
                cyc_out = parse_cyclictest(out)
            except subprocess.TimeoutExpired:
                cyc.kill()
                cyc_out = {"error": "cyclictest did not finish"}
    finally:
        signal.signal(signal.SIGTERM, old_term)
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=5)
        if queue is not None:
            queue.close()
            queue.unlink()
        if lockfile:
            try:
                os.unlink(lockfile)
            except OSError:
                pass

    cols: dict[str, list[float]] = {f: [] for f in FIELDS}
    errors: list[str] = []
    error_count = 0
    for r in results.values():
        a = array("d")
        a.frombytes(r["samples"])
        for j, f in enumerate(FIELDS):
            cols[f].extend(a[j::len(FIELDS)])
        errors += r["errors"]
        error_count += r["error_count"]
    desched = [max(0.0, w - c) for w, c in zip(cols["infer_wall_ms"], cols["infer_cpu_ms"])]
    slow = [{"wall_ms": round(w, 3), "cpu_ms": round(c, 3)} for w, c in zip(cols["infer_wall_ms"], cols["infer_cpu_ms"])
            if c > SLOW_INFER_CPU_MS or w > SLOW_INFER_WALL_MS]
    n = len(desched)
    ordered = sorted(desched)
    result = {
        "samples": n,
        "p999_credibility": credibility(n),
        "duration_s": round(elapsed, 3),
        "throughput_rps": round(n / elapsed, 1) if elapsed > 0 else None,
        "transport": cfg.transport,
        "allocator": cfg.allocator if cfg.transport == "shm" else None,
        "state_stride": cfg.state_stride if cfg.transport == "shm" else None,
        "mode": f"open loop at {cfg.rate:g} req/s" if cfg.rate else f"closed loop, {cfg.clients} x {cfg.client_batch}",
        "cpu": cpu,
        "client_cpus": client_cpus,
        "pinned": ready.get("pinned"),
        "nice": ready.get("nice"),
        "sched_fifo": {"available": ready.get("fifo_available"), "used": bool(worker_stats.get("fifo_batches")),
                       "batches": worker_stats.get("fifo_batches", 0)},
        "model": ready.get("model"),
        "deschedule_ms": summary(desched),
        "infer_wall_ms": summary(cols["infer_wall_ms"]),
        "queue_wait_ms": summary(cols["queue_wait_ms"]),
        "rpc_ms": summary(cols["rpc_ms"]),
        "service_rpc_ms": summary(cols["service_rpc_ms"]),
        "client_ms": summary(cols["client_ms"]),
        "slow_infer": {"count": len(slow), "events": slow[:20],
                       "thresholds": {"cpu_ms": SLOW_INFER_CPU_MS, "wall_ms": SLOW_INFER_WALL_MS}},
        "errors": {"count": error_count, "examples": errors[:10]},
        "faults": faults,
        "worker_numa_node": ready.get("cpu_node"),
        "shm_numa_nodes": ready.get("shm_nodes"),
        "worker_batches": worker_stats.get("batches"),
        "cyclictest": cyc_out,
        "target_p999_ms": cfg.target_p999_ms,
        # The deschedule distribution at every 0.1% (and its maximum): enough to redraw the CDF
        # from the JSON alone (hostkit migrate report overlays two of them).
        "_deschedule_raw": desched,  # for plots; the CLI drops it before printing JSON
        "deschedule_cdf_ms": [round(ordered[min(n - 1, (k * n) // 1000)], 5) for k in range(1000)] + [round(ordered[-1], 5)]
        if n else [],
        "fifo_duty": round(sum(cols["infer_wall_ms"]) / (elapsed * 1000), 3)
        if elapsed > 0 and worker_stats.get("fifo_batches") else 0.0,
    }
    if cfg.inject_stall_ms:
        threshold = cfg.inject_stall_ms * 0.75
        result["injected_stalls"] = {"ms": cfg.inject_stall_ms, "every_s": cfg.inject_every_s,
                                     "count": stalls.count if stalls else 0,
                                     "detect_threshold_ms": threshold,
                                     "detected": sum(1 for d in desched if d >= threshold)}
    probes = {
        "sched_rt_runtime_us": rt_runtime, "sched_rt_period_us": rt_period,
        "steal_ms_on_worker_cpu": None if steal0 is None or steal1 is None else (steal1 - steal0) * 1000 / dg.USER_HZ,
        "run_delay_ms": None if proc0["run_delay_ns"] is None or proc1["run_delay_ns"] is None
        else (proc1["run_delay_ns"] - proc0["run_delay_ns"]) / 1e6,
        "nonvoluntary_switches": None if proc0["nonvoluntary"] is None or proc1["nonvoluntary"] is None
        else proc1["nonvoluntary"] - proc0["nonvoluntary"],
        "runnable_on_worker_cpu": sorted(runnable_seen),
    }
    if result["sched_fifo"]["used"] and rt_runtime is not None and rt_period and 0 <= rt_runtime < rt_period:
        rt_log1 = dg.kernel_log_rt_throttling_count()
        probes["rt_throttling_logged"] = None if rt_log0 is None or rt_log1 is None else rt_log1 > rt_log0
    result["probes"] = probes
    result["diagnosis"] = dg.diagnose(result, probes, facts)
    p999 = result["deschedule_ms"]["p999"]
    passed = p999 is not None and p999 <= cfg.target_p999_ms and not faults and error_count == 0
    result["slo"] = {"target_p999_ms": cfg.target_p999_ms, "p999_ms": p999, "passed": passed,
                     "basis": "p999" if n >= 10000 else f"p999 of {n} samples (not credible; max {result['deschedule_ms']['max']})"}
    return result


def _reclaim(queue: SharedInferenceQueue, pid: int) -> int:
    """Give a dead client's slots back: WRITING and DONE ones now (READY ones once the worker is done)."""
    n = 0
    for i in range(queue.nslots):
        if queue.meta(i)[6] == pid and queue.state(i) in (WRITING, DONE, ERROR):
            queue.set_state(i, FREE)
            n += 1
    return n


def _read_int(path: str) -> int | None:
    try:
        return int(open(path).read().strip())
    except (OSError, ValueError):
        return None
