"""One smoke session: start the queue, worker and clients; supervise them; aggregate the results.

``run_smoke(opts)`` is three steps, each written once:

* **start** (``Session.start``): the queue segment, the pinned worker, the clients, the probes
  read before the run, the stall injector and cyclictest;
* **supervise** (``Session.supervise``): progress, deadlines, and every way a process can fail —
  a client that dies, a worker that dies or stops answering — handled in one place each; then the
  orderly stop and the probes read after the run;
* **aggregate** (``aggregate``): the samples merged into latency summaries, the SLO verdict, and
  the diagnosis's input.

Whatever the exit path (normal, error, SIGINT, SIGTERM, a killed worker or client), no process
of the session outlives it and its /dev/shm segment is unlinked (``Session.close``).
"""

from __future__ import annotations

import bisect
import multiprocessing as mp
import os
import signal
import subprocess
import tempfile
import threading
import time
from array import array
from dataclasses import asdict, dataclass, field

from hostkit.smoke import diagnose
from hostkit.smoke.client import FIELDS, client_main
from hostkit.smoke.metrics import SLOW_INFER_CPU_MS, SLOW_INFER_WALL_MS, credibility, histogram, judge_slo, summary
from hostkit.smoke.options import SmokeOptions
from hostkit.smoke.queue import DONE, ERROR, FREE, PROCESSING, READY, WRITING, SharedInferenceQueue
from hostkit.smoke.sched_trace import SchedTrace, TraceUnavailable, long_deschedules
from hostkit.smoke.wake import InheritedFd, new_eventfd
from hostkit.smoke.worker import read_int, worker_main

READY_TIMEOUT_S = 60
SUPERVISE_EVERY_S = 0.02
RUNNABLE_SAMPLES = 20  # /proc scans for other runnable tasks on the worker CPU, one a second at most


def choose_cpus(opts: SmokeOptions) -> tuple[int, list[int]]:
    """Worker: the given CPU, else an isolated CPU, else the last online one; clients: housekeeping."""
    allowed = sorted(os.sched_getaffinity(0))
    try:
        from hostkit.core.cpulist import parse_cpulist

        with open("/sys/devices/system/cpu/isolated") as f:
            isolated = sorted(parse_cpulist(f.read()))
    except (OSError, ValueError):
        isolated = []
    cpu = opts.cpu if opts.cpu is not None else (isolated[0] if isolated else allowed[-1])
    clients = list(opts.client_cpus or []) or [c for c in allowed if c != cpu and c not in isolated] or allowed
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
    argv = [
        exe,
        "-q",
        "-m",
        "-t1",
        "-a",
        str(cpu),
        "-p",
        "80",
        "-i",
        "1000",
        "-h",
        "20000",
        "-D",
        f"{max(1, int(round(seconds)))}s",
    ]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


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


def _first_message(conn, who: str):
    if not conn.poll(READY_TIMEOUT_S):
        raise RuntimeError(f"{who} did not become ready within {READY_TIMEOUT_S} s")
    try:
        return conn.recv()
    except (EOFError, OSError):
        raise RuntimeError(f"{who} exited before it became ready") from None


@dataclass
class Supervised:
    """What supervision hands to aggregation."""

    results: dict[int, dict] = field(default_factory=dict)  # client id -> its samples and errors
    faults: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    worker_stats: dict = field(default_factory=dict)
    stalls: int = 0
    cyclictest: dict | None = None
    probes_before: dict = field(default_factory=dict)
    probes_after: dict = field(default_factory=dict)
    runnable_seen: set[str] = field(default_factory=set)


class Session:
    def __init__(self, opts: SmokeOptions) -> None:
        self.opts = opts
        self.cpu, self.client_cpus = choose_cpus(opts)
        self.ctx = mp.get_context("spawn")
        self.queue: SharedInferenceQueue | None = None
        self.lockfile: str | None = None
        self.procs: list = []
        self.worker = None
        self.worker_conn = None
        self.ready: dict = {}  # what the worker reported when it became ready
        self.clients: list[tuple] = []  # (process, connection)
        self.stalls: _Stalls | None = None
        self.cyc: subprocess.Popen | None = None
        self.eventfds: list[int] = []  # the worker's, then each client's (wake.py)
        self.own_cpus: set[int] | None = None  # this process's CPUs before the run (restored by close)
        self.out = Supervised()

    # ------------------------------------------------------------------ start
    def start(self, on_started=None) -> None:
        opts, ctx = self.opts, self.ctx
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")  # one BLAS thread in the spawned worker
        wcfg = {**asdict(opts), "cpu": self.cpu, "requests": opts.total_requests}
        if opts.transport == "shm":
            self.queue = SharedInferenceQueue.create(
                nslots=opts.slots,
                req_size=opts.req_size,
                resp_size=opts.resp_size,
                tensor_size=opts.tensor_size,
                state_stride=opts.state_stride,
                nclients=opts.clients,
            )
            wcfg["queue"] = self.queue.name
            if opts.idle == "adaptive":
                self.eventfds = [new_eventfd() for _ in range(1 + opts.clients)]
                wcfg["wake_fds"] = {
                    "worker": InheritedFd(self.eventfds[0]),
                    "clients": [InheritedFd(fd) for fd in self.eventfds[1:]],
                }
            fd, self.lockfile = tempfile.mkstemp(prefix="hostkit-smoke-", suffix=".lock")
            os.close(fd)
            wcfg["lockfile"] = self.lockfile
        self.worker_conn, child = ctx.Pipe()
        self.worker = ctx.Process(target=worker_main, args=(wcfg, child), name="hostkit-smoke-worker", daemon=True)
        self.worker.start()
        child.close()  # the worker holds the only other end: its death reads as EOF here
        self.procs.append(self.worker)
        self.ready = _first_message(self.worker_conn, "the worker")
        ccfg = {**wcfg, "port": self.ready.get("port"), "client_cpus": self.client_cpus}

        # The clients, and this process while it supervises, keep to the housekeeping CPUs: a child
        # spawned with the worker's CPU in its mask could sit there behind a spinning nice -20
        # worker until it pins itself.
        self.own_cpus = os.sched_getaffinity(0)
        os.sched_setaffinity(0, self.client_cpus)
        if opts.with_cyclictest:
            seconds = opts.duration or max(1.0, (opts.total_requests or 1) * max(opts.infer_ms, 0.05) / 1000 * 1.2)
            self.cyc = _cyclictest(self.cpu, seconds)
        for k in range(opts.clients):
            a, b = ctx.Pipe()
            p = ctx.Process(target=client_main, args=(ccfg, k, b), name=f"hostkit-smoke-client-{k}", daemon=True)
            p.start()
            b.close()
            self.procs.append(p)
            self.clients.append((p, a))
        for k, (_, conn) in enumerate(self.clients):
            _first_message(conn, f"client {k}")
        self.out.probes_before = self._probes(with_log=True)
        for _, conn in self.clients:
            conn.send("go")
        if on_started:
            on_started(
                {
                    "worker": self.worker.pid,
                    "clients": [p.pid for p, _ in self.clients],
                    "segment": self.queue.shm.path if self.queue is not None else None,
                }
            )
        if opts.inject_stall_ms:
            self.stalls = _Stalls(self.worker.pid, opts.inject_stall_ms, opts.inject_every_s)
            self.stalls.start()

    def _probes(self, with_log: bool = False) -> dict:
        out = {
            "steal_ticks": diagnose.cpu_steal_ticks(self.cpu),
            "proc": diagnose.read_proc(self.worker.pid),
            "t": time.monotonic(),
        }
        if with_log:
            out["rt_log"] = diagnose.kernel_log_rt_throttling_count()
            out["sched_rt_runtime_us"] = read_int("/proc/sys/kernel/sched_rt_runtime_us")
            out["sched_rt_period_us"] = read_int("/proc/sys/kernel/sched_rt_period_us")
        return out

    # ------------------------------------------------------------------ supervise
    def _fault(self, text: str) -> None:
        if text not in self.out.faults:
            self.out.faults.append(text)

    def _client_lost(self, k: int, p) -> None:
        """A client that died before reporting: an empty result, a fault, its slots back to FREE."""
        self.out.results[k] = {"client": k, "samples": b"", "errors": [f"client {k} died"], "error_count": 1}
        self._fault(f"client {k} died (exit code {p.exitcode}); its slots were reclaimed")
        if self.queue is not None:
            _reclaim(self.queue, p.pid)

    def _collect_clients(self) -> None:
        for k, (p, conn) in enumerate(self.clients):
            if k in self.out.results:
                continue
            if conn.poll():
                try:
                    self.out.results[k] = conn.recv()
                    continue
                except (EOFError, OSError):  # the client died before it could report
                    p.join(timeout=1)
            elif p.exitcode in (None, 0):
                continue
            self._client_lost(k, p)

    def _check_worker(self, now: float, progress_at: float) -> None:
        q = self.queue
        if self.worker.exitcode is not None:
            if not any(f.startswith("worker died") for f in self.out.faults):
                self._fault(f"worker died (exit code {self.worker.exitcode})")
                if q is not None:
                    for i in q.find(PROCESSING) + q.find(READY):
                        q.set_state(i, ERROR)
                    self._request_stop()
            return
        waiting = q is not None and (q.find(READY, limit=1) or q.find(PROCESSING, limit=1))
        if waiting and now - progress_at > self.opts.request_timeout_s * 2 and not q.stop_requested():
            self._fault(f"worker not answering: no inference completed for {now - progress_at:.1f} s")
            self._request_stop()

    def supervise(self, progress=None) -> Supervised:
        opts, q, out = self.opts, self.queue, self.out
        total = opts.total_requests
        start = last_sample = time.monotonic()
        completed, progress_at = 0, start
        give_up = opts.duration + opts.request_timeout_s * 3 + 30 if opts.duration else None
        exclude = {p.pid for p in self.procs} | {os.getpid()}
        while True:
            self._collect_clients()
            if len(out.results) == len(self.clients):
                break
            now = time.monotonic()
            if q is not None and q.completed() != completed:
                completed, progress_at = q.completed(), now
            self._check_worker(now, progress_at)
            if progress:
                progress(completed if q is not None else None, total, now - start, opts.duration)
            if now - last_sample >= 1.0 and len(out.runnable_seen) < RUNNABLE_SAMPLES:
                last_sample = now
                out.runnable_seen.update(diagnose.runnable_on_cpu(self.cpu, exclude=exclude))
            if give_up is not None and now - start > give_up:
                self._fault("the run did not finish in time")
                break
            time.sleep(SUPERVISE_EVERY_S)
        out.elapsed_s = time.monotonic() - start
        for k, (p, _conn) in enumerate(self.clients):
            p.join(timeout=5)
            if p.exitcode not in (None, 0) and not any(f.startswith(f"client {k} ") for f in out.faults):
                self._fault(f"client {k} failed (exit code {p.exitcode})")
        self._stop()
        return out

    def _request_stop(self) -> None:
        """The stop flag, and a ring for everyone who may be blocked waiting (wake.py)."""
        self.queue.request_stop()
        for fd in self.eventfds:
            try:
                os.eventfd_write(fd, 1)
            except OSError:
                pass

    def _stop(self) -> None:
        out = self.out
        if self.stalls:
            self.stalls.stop.set()
            self.stalls.join()
            out.stalls = self.stalls.count
        out.probes_after = self._probes()
        if self.queue is not None:
            self._request_stop()
        else:
            self.worker_conn.send("stop")
        try:
            out.worker_stats = self.worker_conn.recv() if self.worker_conn.poll(10) else {}
        except (EOFError, OSError):
            out.worker_stats = {}
        if self.cyc is not None:
            try:
                text, _ = self.cyc.communicate(timeout=max(5, (self.opts.duration or 5) + 10))
                out.cyclictest = parse_cyclictest(text)
            except subprocess.TimeoutExpired:
                self.cyc.kill()
                out.cyclictest = {"error": "cyclictest did not finish"}

    # ------------------------------------------------------------------ cleanup
    def close(self) -> None:
        if self.own_cpus is not None:
            os.sched_setaffinity(0, self.own_cpus)
            self.own_cpus = None
        if self.cyc is not None and self.cyc.poll() is None:
            self.cyc.kill()
        for p in self.procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=5)
        if self.queue is not None:
            self.queue.close()
            self.queue.unlink()
        if self.lockfile:
            try:
                os.unlink(self.lockfile)
            except OSError:
                pass
        for fd in self.eventfds:
            os.close(fd)
        self.eventfds = []


def _reclaim(queue: SharedInferenceQueue, pid: int) -> int:
    """Give a dead client's slots back: WRITING and DONE ones now (READY ones once the worker is done)."""
    n = 0
    for i in range(queue.nslots):
        if queue.owner_pid(i) == pid and queue.state(i) in (WRITING, DONE, ERROR):
            queue.set_state(i, FREE)
            n += 1
    return n


@dataclass
class SmokeRun:
    """One smoke test: its report (the JSON document) and every deschedule sample, in ms (for plots)."""

    report: dict
    deschedule_ms: list[float]


def run_smoke(opts: SmokeOptions, progress=None, facts: dict | None = None, on_started=None) -> dict:
    """Run one smoke test; its report (:func:`measure`)."""
    return measure(opts, progress, facts, on_started).report


def measure(opts: SmokeOptions, progress=None, facts: dict | None = None, on_started=None) -> SmokeRun:
    """Run one smoke test. ``progress(done, total, elapsed_s, duration_s)`` is called as it runs;
    ``on_started({"worker": pid, "clients": [pid...], "segment": path})`` once everything runs
    (fault tests use it to kill or stop processes mid-run)."""
    opts.check_host()
    session = Session(opts)
    old_term = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    probe, tracer, traced = None, None, None
    try:
        if opts.probe_gaps:  # spinners start beside the worker and clients, and stop with the run
            probe = _GapProbe(opts, os.sched_getaffinity(0))
            probe.wait_started()
        session.start(on_started)
        if opts.trace_sched:
            tracer, traced = _start_trace(session.cpu)
        supervised = session.supervise(progress)
        if tracer is not None:
            traced = tracer.stop()  # the trace's text: read against the samples in aggregate
            tracer = None
    finally:
        signal.signal(signal.SIGTERM, old_term)
        if tracer is not None:
            tracer.close()
        session.close()
        gaps = probe.result() if probe is not None else None  # stops the probe
    return aggregate(opts, session, supervised, facts, gaps, traced)


def _start_trace(cpu: int):
    """(tracer, None) recording the worker's CPU, or (None, {"error": why}) where tracefs is not usable."""
    try:
        tracer = SchedTrace(cpu)
        tracer.start()
        return tracer, None
    except TraceUnavailable as exc:
        return None, {"error": f"no per-event attribution: {exc}"}


class _GapProbe:
    """The vCPU-gap probe (hostkit.smoke.gaps) beside the run, in a thread of the orchestrator: its
    spinners are SCHED_IDLE processes on every CPU, the worker's included (they run only when the
    worker does not). The run starts once they spin (:meth:`wait_started`): the probe covers it all."""

    def __init__(self, opts: SmokeOptions, cpus) -> None:
        from hostkit.smoke.gaps import GapOptions, run_probe

        self.doc: dict | None = None
        self.error: str | None = None
        self.stop = threading.Event()
        self.started = threading.Event()
        self.start_ns: int | None = None
        # Every CPU the run may use (this process keeps to the clients' CPUs while it supervises);
        # the run's length at most, or an hour for a run of --requests.
        gap_opts = GapOptions(
            duration_s=min(3600.0, (opts.duration or 3600.0) + 60), threshold_us=opts.gap_threshold_us
        )
        allowed = frozenset(cpus)

        def on_started(_pids, start_ns: int) -> None:
            self.start_ns = start_ns
            self.started.set()

        def run() -> None:
            try:
                self.doc = run_probe(gap_opts, allowed=allowed, stop=self.stop, on_started=on_started)
            except Exception as exc:  # reported in the result, never a crash of the smoke run
                self.error = f"{type(exc).__name__}: {exc}"
            finally:
                self.started.set()

        self.thread = threading.Thread(target=run, name="hostkit-gap-probe", daemon=True)
        self.thread.start()

    def wait_started(self) -> None:
        """Until the spinners spin (their common start has passed), or the probe has failed."""
        from hostkit.smoke.gaps import SPAWN_TIMEOUT_S

        self.started.wait(SPAWN_TIMEOUT_S + 10)
        if self.start_ns is not None:
            time.sleep(max(0.0, (self.start_ns - time.monotonic_ns()) / 1e9))

    def result(self) -> dict:
        self.stop.set()
        self.thread.join(timeout=180)
        if self.doc is None:
            return {"error": self.error or "the gap probe did not finish"}
        return self.doc


# ---------------------------------------------------------------------------------------- aggregate


def _merge(results: dict[int, dict]) -> tuple[dict[str, list[float]], list[str], int]:
    cols: dict[str, list[float]] = {f: [] for f in FIELDS}
    errors: list[str] = []
    error_count = 0
    for r in results.values():
        a = array("d")
        a.frombytes(r["samples"])
        for j, f in enumerate(FIELDS):
            cols[f].extend(a[j :: len(FIELDS)])
        errors += r["errors"]
        error_count += r["error_count"]
    return cols, errors, error_count


def _gaps_with_attribution(gaps: dict, cols: dict[str, list[float]]) -> dict:
    """The probe's report, with what stopped vCPUs did to the slowest inferences
    (hostkit.smoke.gaps.tail_attribution)."""
    from hostkit.smoke.gaps import public, tail_attribution

    if "_costop_ns" not in gaps:
        return gaps  # the probe failed: its error is the report
    attribution = tail_attribution(gaps, cols["infer_wall_ms"], cols["infer_cpu_ms"], cols["done_s"])
    return {**public(gaps), "tail_attribution": attribution} if attribution.get("events") else public(gaps)


def _probes(before: dict, after: dict, runnable: set[str]) -> dict:
    """Before/after readings as the diagnosis reads them."""

    def delta(a, b, scale=1.0):
        return None if a is None or b is None else (b - a) * scale

    return {
        "sched_rt_runtime_us": before.get("sched_rt_runtime_us"),
        "sched_rt_period_us": before.get("sched_rt_period_us"),
        "steal_ms_on_worker_cpu": delta(before["steal_ticks"], after["steal_ticks"], 1000 / diagnose.USER_HZ),
        "run_delay_ms": delta(before["proc"]["run_delay_ns"], after["proc"]["run_delay_ns"], 1e-6),
        "nonvoluntary_switches": delta(before["proc"]["nonvoluntary"], after["proc"]["nonvoluntary"]),
        "runnable_on_worker_cpu": sorted(runnable),
    }


def _cpu_time(s: Supervised) -> dict:
    """CPU time of the worker (the kernel's schedstat, over the clients' run) and of the clients
    (their own process CPU time from "go" to their last answer), and each as a share of wall time."""
    before, after = s.probes_before, s.probes_after
    window = (after.get("t") or 0) - (before.get("t") or 0)
    w0, w1 = before.get("proc", {}).get("cpu_ns"), after.get("proc", {}).get("cpu_ns")
    worker_s = None if w0 is None or w1 is None else (w1 - w0) / 1e9
    clients_s = sum(r.get("stats", {}).get("cpu_s", 0.0) for r in s.results.values())
    return {
        "window_s": round(window, 3),
        "worker_s": None if worker_s is None else round(worker_s, 4),
        "worker_share": None if worker_s is None or window <= 0 else round(worker_s / window, 4),
        "clients_s": round(clients_s, 4),
        "clients_share": round(clients_s / s.elapsed_s, 4) if s.elapsed_s > 0 else None,
    }


def _wake_stats(opts: SmokeOptions, s: Supervised) -> dict:
    """How the waiting went: spins that found work or not, blocks, wake-up writes (wake.py)."""
    ws = s.worker_stats
    clients = [r.get("stats", {}) for r in s.results.values()]

    def total(key: str, sub: str | None = None) -> int:
        return sum((c.get(key) or {}).get(sub, 0) if sub else c.get(key, 0) for c in clients)

    return {
        "idle": opts.idle,
        "spin_us": opts.spin_us,
        "worker": {
            "spin_hits": ws.get("spin", {}).get("hits"),
            "spin_misses": ws.get("spin", {}).get("misses"),
            "sleeps": ws.get("sleeps"),
            "rings_sent": ws.get("rings_sent"),
            "missed_wakeups": ws.get("missed_wakeups"),
        },
        "clients": {
            "spin_hits": total("spin", "hits"),
            "spin_misses": total("spin", "misses"),
            "sleeps": total("sleeps"),
            "rings_sent": total("rings_sent"),
        },
    }


def _inference_at(done_s: list[float], wall_ms: list[float], desched_ms: list[float]):
    """A function of a time (monotonic s) giving (index, deschedule in ms) of the worker's inference
    running then, or None (it was between inferences): for a traced deschedule whose end the trace
    lacks (sched_trace.long_deschedules). ``desched_ms``: each inference's wall less CPU time."""
    spans = sorted((d, d - w / 1000, x) for d, w, x in zip(done_s, wall_ms, desched_ms))
    ends = [end for end, _, _ in spans]

    def at(t: float) -> tuple[int, float] | None:
        k = bisect.bisect_left(ends, t)  # the first inference to end at or after t (they run one at a time)
        return (k, spans[k][2]) if k < len(spans) and spans[k][1] <= t else None

    return at


def _explain(
    result: dict,
    opts: SmokeOptions,
    session: Session,
    s: Supervised,
    facts: dict | None,
    gaps: dict | None,
    traced: str | dict | None,
    cols: dict,
    desched: list[float],
) -> None:
    """Into ``result``: the injected stalls seen, the probes, the gap probe's and the trace's
    attribution of the tail, and the diagnosis drawn from all of them."""
    if opts.inject_stall_ms:
        threshold = opts.inject_stall_ms * 0.75
        result["injected_stalls"] = {
            "ms": opts.inject_stall_ms,
            "every_s": opts.inject_every_s,
            "count": s.stalls,
            "detect_threshold_ms": threshold,
            "detected": sum(1 for d in desched if d >= threshold),
        }
    probes = _probes(s.probes_before, s.probes_after, s.runnable_seen)
    runtime, period = probes["sched_rt_runtime_us"], probes["sched_rt_period_us"]
    if result["sched_fifo"]["used"] and runtime is not None and period and 0 <= runtime < period:
        log0, log1 = s.probes_before.get("rt_log"), diagnose.kernel_log_rt_throttling_count()
        probes["rt_throttling_logged"] = None if log0 is None or log1 is None else log1 > log0
    if gaps is not None:
        result["gaps"] = _gaps_with_attribution(gaps, cols)
    if isinstance(traced, str):
        result["sched_trace"] = long_deschedules(
            traced,
            session.worker.pid,
            opts.target_p999_ms,
            inference_at=_inference_at(cols["done_s"], cols["infer_wall_ms"], desched),
        )
    elif traced is not None:
        result["sched_trace"] = traced
    result["probes"] = probes
    result["diagnosis"] = diagnose.diagnose(result, probes, facts)


def aggregate(
    opts: SmokeOptions,
    session: Session,
    s: Supervised,
    facts: dict | None,
    gaps: dict | None = None,
    traced: str | dict | None = None,
) -> SmokeRun:
    """The run's figures, SLO verdict and diagnosis, from what supervision collected. ``traced``: the
    sched_switch trace's text, or why there is none ({"error": ...})."""
    ready, ws = session.ready, s.worker_stats
    cols, errors, error_count = _merge(s.results)
    desched = [max(0.0, w - c) for w, c in zip(cols["infer_wall_ms"], cols["infer_cpu_ms"])]
    slow = [
        {"wall_ms": round(w, 3), "cpu_ms": round(c, 3)}
        for w, c in zip(cols["infer_wall_ms"], cols["infer_cpu_ms"])
        if c > SLOW_INFER_CPU_MS or w > SLOW_INFER_WALL_MS
    ]
    n, elapsed = len(desched), s.elapsed_s
    ordered = sorted(desched)
    shm = opts.transport == "shm"
    result = {
        "samples": n,
        "p999_credibility": credibility(n),
        "duration_s": round(elapsed, 3),
        "throughput_rps": round(n / elapsed, 1) if elapsed > 0 else None,
        "transport": opts.transport,
        "allocator": opts.allocator if shm else None,
        "state_stride": opts.state_stride if shm else None,
        "mode": f"open loop at {opts.rate:g} req/s"
        if opts.rate
        else f"closed loop, {opts.clients} x {opts.client_batch}",
        "cpu": session.cpu,
        "client_cpus": session.client_cpus,
        "pinned": ready.get("pinned"),
        "nice": ready.get("nice"),
        "sched_fifo": {
            "available": ready.get("fifo_available"),
            "used": bool(ws.get("fifo_batches")),
            "batches": ws.get("fifo_batches", 0),
            "policy": opts.fifo,
            # policy budget, SCHED_FIFO permitted, a finite RT budget: the SCHED_FIFO time the
            # worker allowed itself per RT period, and the batches it ran in SCHED_OTHER to keep to it
            "limit_ms_per_period": (
                round(ready["fifo_limit"]["limit_ns"] / 1e6, 3) if ready.get("fifo_limit") else None
            ),
            "held_batches": ws.get("fifo_held", 0),
        },
        "model": ready.get("model"),
        "deschedule_ms": summary(desched),
        "infer_wall_ms": summary(cols["infer_wall_ms"]),
        "queue_wait_ms": summary(cols["queue_wait_ms"]),
        "rpc_ms": summary(cols["rpc_ms"]),
        "service_rpc_ms": summary(cols["service_rpc_ms"]),
        "client_ms": summary(cols["client_ms"]),
        "slow_infer": {
            "count": len(slow),
            "events": slow[:20],
            "thresholds": {"cpu_ms": SLOW_INFER_CPU_MS, "wall_ms": SLOW_INFER_WALL_MS},
        },
        "errors": {"count": error_count, "examples": errors[:10]},
        "faults": s.faults,
        "worker_numa_node": ready.get("cpu_node"),
        "shm_numa_nodes": ready.get("shm_nodes"),
        "worker_batches": ws.get("batches"),
        "cyclictest": s.cyclictest,
        "target_p999_ms": opts.target_p999_ms,
        # The deschedule distribution at every 0.1% (and its maximum): enough to redraw the CDF
        # from the JSON alone (hostkit migrate report overlays two of them).
        "deschedule_cdf_ms": [round(ordered[min(n - 1, (k * n) // 1000)], 5) for k in range(1000)]
        + [round(ordered[-1], 5)]
        if n
        else [],
        # Bucket counts over fixed bounds (metrics.BUCKETS_S, the same on every host): what
        # Prometheus histograms and a fleet's merged percentiles are made of (hostkit smoke --prom).
        "histograms": {"deschedule": histogram(desched), "rpc": histogram(cols["rpc_ms"])},
        # Share of the worker's serving time (first claim to last answer; the socket worker: the run)
        # it spent in SCHED_FIFO, as the worker timed it.
        "fifo_duty": round(ws["fifo_ms"] / (ws.get("serving_ms") or elapsed * 1000), 3)
        if elapsed > 0 and ws.get("fifo_batches")
        else 0.0,
        "cpu_time": _cpu_time(s),
        "wake": _wake_stats(opts, s),
    }
    _explain(result, opts, session, s, facts, gaps, traced, cols, desched)
    result["slo"] = judge_slo(desched, opts.target_p999_ms, faults=s.faults, errors=error_count)
    return SmokeRun(result, desched)
