"""Naming the cause of a deschedule tail: the production incident's layered reasoning, as data.

Causes, each with its evidence: RT throttling (FIFO in use and sched_rt_runtime_us below the
period; the kernel's "RT throttling activated" line when readable), hypervisor stall (steal
time on the worker CPU; deceptive topology), CFS contention (run_delay of the worker in
/proc/<pid>/schedstat, non-voluntary context switches, other runnable tasks on its CPU),
cross-NUMA shared memory (pages on another node than the worker's CPU), an injected stall
(calibration), or none.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

USER_HZ = os.sysconf("SC_CLK_TCK")
SCHED_IDLE = str(os.SCHED_IDLE)  # the policy field of /proc/<pid>/stat


def read_proc(pid: int) -> dict:
    """From the kernel: CPU time (``cpu_ns``) and time runnable but waiting (``run_delay_ns``) of
    /proc/<pid>/schedstat, and the context switches of /proc/<pid>/status."""
    out = {"cpu_ns": None, "run_delay_ns": None, "nonvoluntary": None, "voluntary": None}
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            fields = f.read().split()
        out["cpu_ns"], out["run_delay_ns"] = int(fields[0]), int(fields[1])
    except (OSError, IndexError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("nonvoluntary_ctxt_switches"):
                    out["nonvoluntary"] = int(line.split()[1])
                elif line.startswith("voluntary_ctxt_switches"):
                    out["voluntary"] = int(line.split()[1])
    except OSError:
        pass
    return out


def cpu_steal_ticks(cpu: int) -> int | None:
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith(f"cpu{cpu} "):
                    return int(line.split()[8])
    except (OSError, IndexError, ValueError):
        pass
    return None


def runnable_on_cpu(cpu: int, exclude: set[int]) -> list[str]:
    """Other tasks that are runnable (state R) with ``cpu`` as their last CPU; SCHED_IDLE tasks (the
    gap probe's spinners) are left out: they run only when nothing else wants the CPU."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.find("(") + 1 : stat.rfind(")")]
        fields = stat.rsplit(")", 1)[1].split()
        if len(fields) > 38 and fields[0] == "R" and fields[36] == str(cpu) and fields[38] != SCHED_IDLE:
            found.append(f"{entry}:{comm}")
    return found


def kernel_log_rt_throttling_count() -> int | None:
    """How many 'sched: RT throttling activated' lines the kernel log holds (None: unreadable).

    The kernel prints the line once per boot, so the orchestrator compares the count before and
    after a run: only a new line confirms throttling during this run.
    """
    try:
        proc = subprocess.run(["dmesg"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.count("RT throttling activated")


@dataclass(frozen=True)
class _Run:
    """What every cause's detector reads: the run's figures, the probes, the host's facts, and the
    tail they are asked to explain."""

    result: dict
    probes: dict
    facts: dict | None
    tail: float  # p999 deschedule, ms
    worst: float  # max deschedule, ms
    notable: bool  # a tail worth explaining: half the SLO target, and at least 0.5 ms
    wall_s: float

    @classmethod
    def of(cls, result: dict, probes: dict, facts: dict | None) -> _Run:
        d = result["deschedule_ms"]
        tail = d["p999"] if d["p999"] is not None else 0.0
        worst = d["max"] or 0.0
        notable = max(tail, worst if d["n"] and d["n"] < 10000 else tail) >= max(
            0.5, result.get("target_p999_ms", 1.0) / 2
        )
        return cls(result, probes, facts, tail, worst, notable, max(result["duration_s"], 1e-9))


def _injected(r: _Run) -> list[dict]:
    inj = r.result.get("injected_stalls")
    if not inj:
        return []
    return [
        {
            "cause": "injected_stall",
            "confidence": "certain",
            "evidence": f"{inj['count']} stall(s) of {inj['ms']} ms injected with SIGSTOP/SIGCONT; "
            f"{inj['detected']} inference(s) saw >= {inj['detect_threshold_ms']} ms descheduled",
        }
    ]


def _rt_budget(r: _Run) -> list[dict]:
    """RT throttling from the budget and the worker's SCHED_FIFO duty (or the kernel's log)."""
    result, probes, worst = r.result, r.probes, r.worst
    runtime, period = probes.get("sched_rt_runtime_us"), probes.get("sched_rt_period_us")
    if not (result["sched_fifo"]["used"] and runtime is not None and period and 0 <= runtime < period):
        return []
    stall_ms = (period - runtime) / 1000
    budget = runtime / period
    duty = result.get("fifo_duty") or 0.0  # share of the run the worker spent in SCHED_FIFO
    log = probes.get("rt_throttling_logged")
    # --fifo budget kept every RT period's SCHED_FIFO time under the budget: the duty says nothing
    # about throttling then; only a deschedule as long as half a park (or the kernel's log) does
    limit = result["sched_fifo"].get("limit_ms_per_period")
    if limit is not None and not log and worst >= stall_ms * 0.5:
        return [
            {
                "cause": "rt_throttling",
                "confidence": "possible",
                "evidence": f"the worker kept its SCHED_FIFO time under {limit:g} ms per period (--fifo "
                f"budget), yet it was descheduled {worst:.1f} ms, as long as the throttle's park "
                f"of up to {stall_ms:g} ms: the budget (sched_rt_runtime_us={runtime}) is shared "
                f"with every other RT task on CPU {result['cpu']}, and with RT time charged "
                "there just before the run",
            }
        ]
    if log or (limit is None and worst >= min(stall_ms * 0.5, 5.0) and duty >= 0.8 * budget):
        confidence = "confirmed" if log else ("likely" if duty >= budget * 0.95 else "possible")
        return [
            {
                "cause": "rt_throttling",
                "confidence": confidence,
                "evidence": f"SCHED_FIFO worker busy {duty:.0%} of the run against a budget of "
                f"sched_rt_runtime_us={runtime} of {period} ({budget:.0%}): the budget parks it "
                f"{stall_ms:g} ms per period it overruns (longer where the kernel charges "
                f"time it did not run, e.g. a stopped vCPU); max deschedule {worst:.1f} ms"
                + ("; kernel log: 'sched: RT throttling activated'" if log else ""),
            }
        ]
    return []


def _hypervisor(r: _Run) -> list[dict]:
    """Steal time on the worker's CPU; a VMware guest without a steal clock; a deceptive topology."""
    if not r.notable:
        return []
    out = []
    steal_ms = r.probes.get("steal_ms_on_worker_cpu")
    if steal_ms and steal_ms >= 1.0:
        share = steal_ms / (r.wall_s * 1000) * 100
        out.append(
            {
                "cause": "hypervisor_stall",
                "confidence": "likely" if share > 0.5 else "possible",
                "evidence": f"{steal_ms:.1f} ms of steal time on worker CPU {r.result['cpu']} during the "
                f"run ({share:.2f}% of it)",
            }
        )
    virt = (r.facts or {}).get("virtualization") or {}
    if virt.get("hypervisor") == "vmware" and virt.get("steal_reported") is False:
        out.append(
            {
                "cause": "hypervisor_stall",
                "confidence": "possible",
                "evidence": "no steal clock: this VMware guest has no steal time on any CPU since boot "
                "(stealclock.enable unset in its .vmx), so hypervisor stalls cannot show as "
                "steal here; hostkit gaps measures the vCPU stops directly",
            }
        )
    if r.facts and r.facts.get("virtualization", {}).get("deceptive_topology"):
        out.append(
            {
                "cause": "hypervisor_stall",
                "confidence": "possible",
                "evidence": "deceptive topology: " + "; ".join(r.facts["virtualization"]["reasons"]),
            }
        )
    return out


def _cfs(r: _Run) -> list[dict]:
    """Other tasks on the worker's CPU: schedstat's run delay, runnable tasks seen there."""
    run_delay = r.probes.get("run_delay_ms")
    nvcsw = r.probes.get("nonvoluntary_switches")
    others = r.probes.get("runnable_on_worker_cpu") or []
    if not (r.notable and ((run_delay and run_delay > max(1.0, r.tail)) or others)):
        return []
    return [
        {
            "cause": "cfs_contention",
            "confidence": "likely" if others else "possible",
            "evidence": f"worker waited {run_delay or 0:.1f} ms runnable (schedstat run_delay), "
            f"{nvcsw or 0} non-voluntary context switches"
            + (f"; other runnable tasks on CPU {r.result['cpu']}: {', '.join(others[:5])}" if others else ""),
        }
    ]


def _traced(r: _Run) -> list[dict]:
    """The sched_switch trace of the worker's CPU: what took the CPU in each long deschedule."""
    traced = r.result.get("sched_trace") or {}
    if not traced.get("count"):
        return []
    runtime, period = r.probes.get("sched_rt_runtime_us"), r.probes.get("sched_rt_period_us")
    # judged by time: two 700 ms parks outweigh ten 2 ms preemptions by the busy neighbours of a loaded host
    if traced["rt_throttled_ms"] * 2 >= traced["total_ms"]:
        return [
            {
                "cause": "rt_throttling",
                "confidence": "confirmed",
                "evidence": f"traced: {traced['rt_throttled']} of {traced['count']} deschedules over "
                f"{traced['threshold_ms']:g} ms ({traced['rt_throttled_ms']:.1f} of "
                f"{traced['total_ms']:.1f} ms) took the CPU from the runnable SCHED_FIFO "
                "worker for CFS tasks or idle (RT tasks ran under half of each): the RT budget "
                + (
                    f"(sched_rt_runtime_us={runtime} of {period}; "
                    if runtime is not None and period
                    else "(sched_rt_runtime_us; "
                )
                + "on kernels >= 6.12 the fair server's reservation) was spent",
            }
        ]
    who = ", ".join(f"{k} {v:.1f} ms" for k, v in list(traced["by_task"].items())[:3])
    return [
        {
            "cause": "cfs_contention",
            "confidence": "confirmed",
            "evidence": f"traced: {traced['count']} deschedules over {traced['threshold_ms']:g} ms "
            f"({traced['total_ms']:.1f} ms); ran instead: {who}; longest "
            f"{max(e['ms'] for e in traced['events']):.1f} ms",
        }
    ]


def _costop(r: _Run) -> list[dict]:
    costop = hypervisor_costop(r.result.get("gaps") or {})
    return [costop] if costop else []


def _cross_numa(r: _Run) -> list[dict]:
    nodes = r.result.get("shm_numa_nodes") or {}
    worker_node = r.result.get("worker_numa_node")
    if worker_node is None or not nodes:
        return []
    remote = sum(c for n, c in nodes.items() if int(n) != worker_node)
    if not remote:
        return []
    return [
        {
            "cause": "cross_numa_memory",
            "confidence": "likely",
            "evidence": f"{remote} of {sum(nodes.values())} shared-memory pages on another node "
            f"than the worker's (node {worker_node}): {nodes}",
        }
    ]


# Each cause's detector, in the order their findings are listed before ranking.
DETECTORS = (_injected, _rt_budget, _hypervisor, _cfs, _traced, _costop)


def diagnose(result: dict, probes: dict, facts: dict | None) -> list[dict]:
    """``result``: the run's figures; ``probes``: before/after readings taken by the orchestrator."""
    r = _Run.of(result, probes, facts)
    causes = [c for detect in DETECTORS for c in detect(r)]
    throttled_at_most(causes, result.get("gaps") or {})  # the gap probe bounds RT throttling's part
    causes += _cross_numa(r)
    if not causes and r.notable:
        causes.append(
            {
                "cause": "unexplained",
                "confidence": "n/a",
                "evidence": f"p999 deschedule {r.tail:.3f} ms, max {r.worst:.3f} ms, and no probe points at a "
                "cause: look at the hypervisor's own statistics",
            }
        )
    if not causes:
        causes.append(
            {
                "cause": "none",
                "confidence": "n/a",
                "evidence": f"p999 deschedule {r.tail:.3f} ms, max {r.worst:.3f} ms: no tail cause found",
            }
        )
    return rank(causes)


def throttled_at_most(causes: list[dict], gaps: dict) -> None:
    """Bound RT throttling's part of the tail when the gap probe split the tail's extra time: a
    throttled worker waits descheduled, its CPU time does not grow, so throttling explains at most
    the descheduled part (``deschedule_ms`` of ``excess_ms``). A guest whose vCPU the hypervisor
    stops charges the worker that stopped time as CPU time, pushes its FIFO duty over the RT budget
    and is throttled too (seen on a TCG guest sharing one host CPU: duty 94%, 69% of the tail
    invisible): the hypervisor, the larger share, is then named first at equal confidence."""
    h = (gaps.get("tail_attribution") or {}).get("hypervisor")
    if not h or not h["excess_ms"]:
        return
    share = round(min(1.0, h["deschedule_ms"] / h["excess_ms"]), 4)
    for c in causes:
        if c["cause"] == "rt_throttling" and "share_of_tail" not in c:
            c["share_of_tail"] = share
            c["evidence"] += (
                f"; at most {share:.0%} of the tail: the slowest inferences' descheduled "
                f"{h['deschedule_ms']:.1f} of {h['excess_ms']:.1f} ms beyond the median computation"
            )


def hypervisor_costop(gaps: dict) -> dict | None:
    """The hypervisor stopped the worker's vCPU during the slowest inferences (the gap probe's
    ``tail_attribution.hypervisor``, hostkit.smoke.gaps.tail_attribution): named when at least half
    the tail's time beyond the median computation was charged to the worker as CPU time its
    computation did not need, and the spinners were stopped invisibly for at least VCPU_STOPPED of
    the time the kernel charged them (slower computation alone stops no spinner). Not gated on the
    deschedule tail: a guest without steal time sees none of it as deschedule."""
    t = gaps.get("tail_attribution") or {}
    h = t.get("hypervisor")
    if not h or h["invisible_share"] < HYPERVISOR_SHARE or h["vcpu_stopped"] < VCPU_STOPPED:
        return None
    c = gaps["costops"]
    return {
        "cause": "hypervisor_costop",
        "confidence": "likely",
        "share_of_tail": h["invisible_share"],
        "evidence": f"{h['invisible_share']:.0%} of the tail: the slowest {t['events']} inferences (wall >= "
        f"{t['wall_ms_at_least']} ms; p999 {t['p999_wall_ms']} ms) took {h['excess_ms']:.1f} ms beyond "
        f"the median computation ({h['compute_ms']} ms of CPU), {h['invisible_ms']:.1f} ms of it "
        f"charged to the worker as CPU time its computation did not need and "
        f"{h['deschedule_ms']:.1f} ms descheduled; the gap probe's spinners were stopped invisibly "
        f"for {h['vcpu_stopped']:.0%} of the CPU time the guest kernel charged them: the hypervisor "
        f"stops this VM's vCPUs; "
        + (
            f"co-stops of up to {c['max_cpus']} vCPUs at once: {c['count']}, {c['total_ms']:.1f} ms "
            f"({100 * c['share_of_run']:.1f}% of the run)"
            if c["count"]
            else "no co-stop seen (the spinners seldom run beside a busy workload)"
        ),
    }


# hypervisor_costop is named when the hypervisor explains at least half the tail's extra time and
# stopped the spinners for at least a tenth of their charged time: a vCPU with a host CPU of its own
# loses a few percent at most (QEMU's own threads, host housekeeping; 0.2-1.6% measured on a
# spread 2-vCPU guest), one sharing a host CPU with a busy sibling about half (57% measured).
HYPERVISOR_SHARE = 0.5
VCPU_STOPPED = 0.1


# How sure the evidence is, strongest first; then, at equal confidence, the larger measured share of
# the tail's extra time (``share_of_tail``; a cause without one counts as 0); then the cause that
# acts on the worker directly before the ones that share its CPU or memory: a throttled FIFO worker
# stops for whole periods whatever else runs, a stopped VM stops everything in it, CFS neighbours
# and remote memory only lengthen what is already there.
CONFIDENCE_ORDER = ("certain", "confirmed", "likely", "possible", "n/a")
CAUSE_ORDER = (
    "injected_stall",
    "rt_throttling",
    "hypervisor_costop",
    "hypervisor_stall",
    "cfs_contention",
    "irq",
    "cross_numa_memory",
    "unexplained",
    "none",
)


def rank(causes: list[dict]) -> list[dict]:
    """The causes, primary first (``"primary": true`` on it alone): by confidence, then share of the
    tail, then CAUSE_ORDER; each cause once, with its strongest evidence."""

    def key(c: dict) -> tuple[int, float, int]:
        return (
            CONFIDENCE_ORDER.index(c["confidence"]),
            -c.get("share_of_tail", 0.0),
            CAUSE_ORDER.index(c["cause"]) if c["cause"] in CAUSE_ORDER else len(CAUSE_ORDER),
        )

    ranked, seen = [], set()
    for c in sorted(causes, key=key):  # a cause named twice (run-level and traced) keeps its strongest
        if c["cause"] not in seen:
            seen.add(c["cause"])
            ranked.append(c)
    return [{**c, "primary": i == 0} for i, c in enumerate(ranked)]
