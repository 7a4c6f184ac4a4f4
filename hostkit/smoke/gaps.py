"""The vCPU-gap probe: stalls a guest kernel cannot account for (runs ON a host; stdlib only).

One spinner process per probed CPU reads the monotonic clock in a tight loop and records every
gap above a threshold, with how much of it the kernel charged to the spinner as CPU time:

* **charged** (the kernel believed the spinner ran through the gap): nothing in the guest took the
  CPU, so the time went below it: a hypervisor that stopped the vCPU (no steal accounting: a QEMU
  TCG guest, many VMware guests) or firmware (SMI). These are *invisible* gaps.
* **not charged**: the kernel descheduled the spinner (another task, an interrupt with IRQ time
  accounting): the guest kernel can explain it; not a hypervisor stall.

Invisible gaps that overlap on two or more vCPUs at once are **co-stops**: the hypervisor stopped
the VM, or a group of its vCPUs, together (co-scheduling of a wide VM, an overcommitted host).
:func:`attribute` ties a workload's slow events (e.g. the smoke test's inferences) to them.

Spinners run under SCHED_IDLE by default, so they use only time no other task wants (the CPU cost
is measured and reported); ``policy="normal"`` competes like any task (more gaps explained by the
kernel, since they then share the CPU with the workload).
"""

from __future__ import annotations

import argparse
import bisect
import multiprocessing
import os
import time
from dataclasses import dataclass

from hostkit.core.cpulist import format_cpulist, parse_cpulist
from hostkit.errors import BadInput

CHARGED_FRACTION = 0.5  # a gap the kernel charged at least this much of is invisible to it
MAX_EVENTS = 200  # co-stop events kept in the report (all are counted)
POLICIES = ("idle", "normal")


@dataclass(frozen=True)
class GapOptions:
    duration_s: float = 5.0
    threshold_us: float = 100.0
    cpus: tuple[int, ...] | None = None  # None: every CPU this process may run on, minus ``exclude``
    exclude: tuple[int, ...] = ()
    policy: str = "idle"

    def __post_init__(self) -> None:
        if not 0 < self.duration_s <= 3600:
            raise BadInput(f"gap probe: duration {self.duration_s:g} s must be in (0, 3600]")
        if not 1 <= self.threshold_us <= 1_000_000:
            raise BadInput(f"gap probe: threshold {self.threshold_us:g} us must be in [1, 1000000]")
        if self.policy not in POLICIES:
            raise BadInput(f"gap probe: policy {self.policy!r} is not one of {', '.join(POLICIES)}")

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> GapOptions:
        return cls(
            duration_s=ns.duration,
            threshold_us=ns.threshold_us,
            policy=ns.policy,
            cpus=tuple(sorted(parse_cpulist(ns.cpus))) if ns.cpus else None,
        )

    def to_agent_args(self) -> list[str]:
        argv = ["--duration", repr(self.duration_s), "--threshold-us", repr(self.threshold_us), "--policy", self.policy]
        return argv + (["--cpus", format_cpulist(frozenset(self.cpus))] if self.cpus is not None else [])

    def probed_cpus(self, allowed: frozenset[int] | None = None) -> list[int]:
        """The CPUs to probe, checked against ``allowed`` (default: this process's affinity); one
        spinner per CPU."""
        allowed = sorted(allowed if allowed is not None else os.sched_getaffinity(0))
        cpus = sorted(set(self.cpus)) if self.cpus is not None else [c for c in allowed if c not in self.exclude]
        outside = [c for c in cpus if c not in allowed]
        if outside:
            raise BadInput(
                f"gap probe: CPU(s) {outside} are not CPUs this process may run on ({allowed}); "
                "one spinner per CPU, at most as many spinners as CPUs"
            )
        if not cpus:
            raise BadInput("gap probe: no CPU left to probe")
        return cpus


def add_gap_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options: the same on ``hostkit gaps`` and the host agent."""
    d = GapOptions()
    parser.add_argument(
        "--duration", type=float, default=d.duration_s, metavar="S", help=f"seconds to probe (default {d.duration_s:g})"
    )
    parser.add_argument(
        "--threshold-us",
        type=float,
        default=d.threshold_us,
        metavar="US",
        help=f"record clock gaps longer than this (default {d.threshold_us:g} us)",
    )
    parser.add_argument(
        "--cpus",
        metavar="LIST",
        help="CPUs to probe, a kernel cpulist (default: every CPU this process may run on); one spinner per CPU",
    )
    parser.add_argument(
        "--policy",
        choices=POLICIES,
        default=d.policy,
        help="spinners' scheduling: idle (SCHED_IDLE: only time no other task wants; default) "
        "or normal (compete like any task)",
    )


SPAWN_TIMEOUT_S = 120  # a slow guest (TCG, an overcommitted host) can take long to start Python


def _spin(cpu: int, threshold_ns: int, policy: str, conn) -> None:
    """One spinner: pinned to ``cpu``; says it is ready, receives (start_ns, end_ns), spins, and
    sends back [(start_ns, length_ns, charged_ns)], its CPU time and its involuntary switches."""
    os.sched_setaffinity(0, {cpu})
    if policy == "idle":
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    mono, tcpu = time.monotonic_ns, time.thread_time_ns
    conn.send("ready")
    start_ns, end_ns = conn.recv()
    gaps = []
    now = mono()
    while now < start_ns:  # every spinner starts on the same clock edge
        now = mono()
    cpu0 = tcpu()
    last = mark = now
    cpu_mark = cpu0
    while now < end_ns:
        now = mono()
        gap = now - last
        if gap > threshold_ns:
            c = tcpu()
            # Over [mark, now] the spinner ran except for (part of) the gap: what the kernel charged
            # beyond the time outside the gap is the part of the gap it believed the spinner ran.
            charged = (c - cpu_mark) - (now - mark - gap)
            share = max(0.0, min(1.0, charged / gap))
            within = min(now, end_ns) - last  # a gap that outlasts the run counts up to its end
            gaps.append((last, within, int(within * share)))
            mark, cpu_mark = now, c
        elif now - mark > 1_000_000:  # keep the bracket short, so the estimate stays close
            mark, cpu_mark = now, tcpu()
            if conn.poll():  # "stop": the caller's run is over (about 1 us, once a millisecond)
                break
        last = now
    nivcsw = 0
    with open("/proc/thread-self/status") as fh:
        for line in fh:
            if line.startswith("nonvoluntary_ctxt_switches:"):
                nivcsw = int(line.split()[1])
    conn.send({"cpu": cpu, "gaps": gaps, "cpu_ns": tcpu() - cpu0, "nivcsw": nivcsw, "end_ns": min(now, end_ns)})
    conn.close()


def run_probe(opts: GapOptions, on_started=None, allowed: frozenset[int] | None = None, stop=None) -> dict:
    """Run one spinner per probed CPU for ``duration_s``, all starting together once every one of
    them runs; the report of :func:`summarise`. ``on_started({cpu: pid}, start_ns)`` is called
    when the start is set (tests stop a spinner to make a gap). ``allowed``: the CPUs spinners may
    use, when this process keeps to fewer for a while (the smoke orchestrator). ``stop``: a
    threading.Event; when given, the probe runs until it is set (``duration_s`` at most) — the
    smoke test's probe covers exactly its run."""
    cpus = opts.probed_cpus(allowed)
    ctx = multiprocessing.get_context("spawn")
    procs, conns = [], []
    try:
        for cpu in cpus:
            here, there = ctx.Pipe()
            p = ctx.Process(
                target=_spin,
                args=(cpu, int(opts.threshold_us * 1000), opts.policy, there),
                daemon=True,
                name=f"hostkit-gap-spinner-{cpu}",
            )
            p.start()
            there.close()
            procs.append(p)
            conns.append(here)
        for p, c in zip(procs, conns):
            if not c.poll(SPAWN_TIMEOUT_S) or c.recv() != "ready":
                raise RuntimeError(f"gap spinner {p.name} did not start within {SPAWN_TIMEOUT_S} s")
        start_ns = time.monotonic_ns() + 100_000_000  # every spinner is waiting: a short, common start
        end_ns = start_ns + int(opts.duration_s * 1e9)
        for c in conns:
            c.send((start_ns, end_ns))
        if on_started is not None:
            on_started({cpu: p.pid for cpu, p in zip(cpus, procs)}, start_ns)
        if stop is not None:
            stop.wait(opts.duration_s)
            for c in conns:
                c.send("stop")
        results = []
        for p, c in zip(procs, conns):
            if not c.poll(opts.duration_s + 60):
                raise RuntimeError(f"gap spinner {p.name} sent nothing")
            results.append(c.recv())
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=5)
    return summarise(results, opts, start_ns)


def summarise(results: list[dict], opts: GapOptions, start_ns: int) -> dict:
    """Per-CPU gap figures and the co-stops across CPUs (pure: tests feed it recorded gaps)."""
    per_cpu, invisible = {}, []
    for r in sorted(results, key=lambda r: r["cpu"]):
        gaps = r["gaps"]
        inv = [(s, n) for s, n, charged in gaps if charged >= CHARGED_FRACTION * n]
        invisible += [(s, s + n, r["cpu"]) for s, n in inv]
        per_cpu[str(r["cpu"])] = {
            "gaps": len(gaps),
            "total_ms": _ms(sum(n for _, n, _ in gaps)),
            "max_ms": _ms(max((n for _, n, _ in gaps), default=0)),
            "invisible": len(inv),
            "invisible_ms": _ms(sum(n for _, n in inv)),
            "kernel_explained": len(gaps) - len(inv),
            "probe_cpu_s": round(r["cpu_ns"] / 1e9, 3),
            "involuntary_switches": r["nivcsw"],
        }
    # A co-stop is an overlap at least as long as the threshold: two gaps that merely touch for a
    # few microseconds are two separate stops, not the VM stopped.
    costops = [c for c in costop_intervals(invisible) if c[1] - c[0] >= opts.threshold_us * 1000]
    total = sum(e - s for s, e, _ in costops)
    window = max((r.get("end_ns", start_ns + opts.duration_s * 1e9) for r in results), default=start_ns) - start_ns
    return {
        "duration_s": round(window / 1e9, 3),
        "threshold_us": opts.threshold_us,
        "policy": opts.policy,
        "cpus": [int(c) for c in per_cpu],
        "per_cpu": per_cpu,
        "probe_cpu_s": round(sum(r["cpu_ns"] for r in results) / 1e9, 3),
        "costops": {
            "count": len(costops),
            "total_ms": _ms(total),
            "max_ms": _ms(max((e - s for s, e, _ in costops), default=0)),
            "max_cpus": max((len(c) for _, _, c in costops), default=0),
            "share_of_run": round(total / window, 4) if window > 0 else 0.0,
            "events": [
                {"at_ms": _ms(s - start_ns), "ms": _ms(e - s), "cpus": sorted(c)} for s, e, c in costops[:MAX_EVENTS]
            ],
        },
        "_costop_ns": [(s, e) for s, e, _ in costops],  # for attribution on this host; public() drops it
    }


def public(doc: dict) -> dict:
    """The probe's report without the intervals kept for attribution on the host."""
    return {k: v for k, v in doc.items() if not k.startswith("_")}


def costop_intervals(gaps: list[tuple[int, int, int]]) -> list[tuple[int, int, frozenset[int]]]:
    """(start, end, cpu) invisible gaps -> the maximal intervals during which two or more CPUs were
    in one at once, each with every CPU that took part (a sweep over the gaps' edges)."""
    edges = sorted(
        [(s, 1, cpu) for s, _, cpu in gaps] + [(e, -1, cpu) for _, e, cpu in gaps], key=lambda x: (x[0], x[1])
    )  # at equal times, ends before starts: touching is not overlap
    active: dict[int, int] = {}
    out: list[tuple[int, int, frozenset[int]]] = []
    start, members = None, set()
    for t, kind, cpu in edges:
        active[cpu] = active.get(cpu, 0) + kind
        if active[cpu] == 0:
            del active[cpu]
        if start is None and len(active) >= 2:
            start, members = t, set(active)
        elif start is not None:
            if len(active) >= 2:
                members |= set(active)
            else:
                out.append((start, t, frozenset(members)))
                start = None
    return out


def attribute(events: list[tuple[int, int, int]], costops: list[tuple[int, int]]) -> dict:
    """How much of ``events``' extra time co-stops account for. Each event is (start_ns, end_ns,
    excess_ns): e.g. one of the slowest inferences, and how much longer it took than the median.
    An event is *explained* when co-stops overlapping it cover at least half of its excess (frequent
    short co-stops touch every long event; only covering its extra time makes them its cause)."""
    costops = sorted(costops)
    starts = [s for s, _ in costops]
    explained, overlap_total, excess_total = 0, 0, 0
    for s, e, excess in events:
        overlap = 0
        for cs, ce in costops[max(0, bisect.bisect_right(starts, s) - 1) : bisect.bisect_left(starts, e)]:
            overlap += max(0, min(e, ce) - max(s, cs))
        overlap_total += overlap
        excess_total += max(0, excess)
        if excess > 0 and overlap * 2 >= excess:
            explained += 1
    return {
        "events": len(events),
        "explained": explained,
        "share": round(explained / len(events), 4) if events else 0.0,
        "costop_ms": round(overlap_total / 1e6, 3),
        "excess_ms": round(excess_total / 1e6, 3),
    }


TAIL_MIN = 20  # the tail: the slowest 1% of inferences, and at least this many


def tail_attribution(doc: dict, walls_ms: list[float], cpus_ms: list[float], dones_s: list[float]) -> dict:
    """What the hypervisor did to the slowest inferences (the slowest 1%, at least TAIL_MIN).

    A guest without steal-time accounting charges a stopped vCPU's time to whatever task it ran:
    the worker's CPU time grows, while its computation (a fixed amount of work per inference) needs
    the same. Each slow inference's time beyond the median CPU time (the computation, as the kernel
    charges a typical one) splits into *invisible* time (CPU time beyond that median: its vCPU was
    stopped, or the computation itself ran slower) and *deschedule* (wall - CPU time: waits the guest
    kernel saw). Which of the two made the invisible time, the spinners tell: ``vcpu_stopped`` is
    the share of their charged CPU time during which they were in fact stopped (their invisible
    gaps), measured on every vCPU over the same run (the worker's own whenever the worker idled).
    Slower computation (caches, SMT, frequency) does not stop a spinner; where steal time is
    accounted (this kind of cloud VM) a stopped vCPU is not charged at all. Also
    :func:`attribute`'s figures: co-stops (>= 2 vCPUs at once) under the same inferences."""
    n = len(walls_ms)
    if not n:
        return {"events": 0}
    ordered = sorted(walls_ms)
    median, cut = ordered[n // 2], ordered[max(0, n - max(TAIL_MIN, n // 100))]
    compute = sorted(cpus_ms)[n // 2]
    tail = [(w, c, int(d * 1e9)) for w, c, d in zip(walls_ms, cpus_ms, dones_s) if w >= cut]
    excess = sum(max(0.0, w - compute) for w, _, _ in tail)
    invisible = sum(min(max(0.0, w - compute), max(0.0, c - compute)) for w, c, _ in tail)
    charged = sum(p["probe_cpu_s"] for p in doc["per_cpu"].values()) * 1000
    stopped = sum(p["invisible_ms"] for p in doc["per_cpu"].values())
    return {
        "wall_ms_at_least": round(cut, 3),
        "median_wall_ms": round(median, 3),
        "p999_wall_ms": round(ordered[min(n - 1, (999 * n) // 1000)], 3),
        **attribute([(e - int(w * 1e6), e, int((w - median) * 1e6)) for w, _, e in tail], doc["_costop_ns"]),
        "hypervisor": {
            "compute_ms": round(compute, 3),
            "excess_ms": round(excess, 3),
            "invisible_ms": round(invisible, 3),
            "deschedule_ms": round(sum(max(0.0, w - c) for w, c, _ in tail), 3),
            "invisible_share": round(invisible / excess, 4) if excess > 0 else 0.0,
            "vcpu_stopped": round(min(1.0, stopped / charged), 4) if charged > 0 else 0.0,
        },
    }


def text_summary(doc: dict) -> str:
    c = doc["costops"]
    lines = [
        f"gap probe: {len(doc['cpus'])} CPU(s) {doc['cpus']}, {doc['duration_s']:g} s, gaps > "
        f"{doc['threshold_us']:g} us, spinners {doc['policy']} (probe CPU {doc['probe_cpu_s']:.2f} s)"
    ]
    for cpu, p in doc["per_cpu"].items():
        lines.append(
            f"  cpu {cpu:>3}: {p['gaps']:>6} gaps, {p['total_ms']:>9.3f} ms, max {p['max_ms']:.3f} ms; "
            f"invisible to the kernel {p['invisible']} ({p['invisible_ms']:.3f} ms), "
            f"kernel-explained {p['kernel_explained']}"
        )
    lines.append(
        f"co-stops (>= 2 vCPUs stopped at once, invisible to the guest kernel): {c['count']}, "
        f"{c['total_ms']:.3f} ms in all ({100 * c['share_of_run']:.2f}% of the run), longest "
        f"{c['max_ms']:.3f} ms, up to {c['max_cpus']} vCPUs"
    )
    return "\n".join(lines)


def _ms(ns: float) -> float:
    return round(ns / 1e6, 3)
