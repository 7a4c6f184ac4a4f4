"""A smoke report as text for people: the summary ``hostkit smoke`` prints and its table rows."""

from __future__ import annotations

from hostkit.smoke.gaps import text_summary as gaps_summary
from hostkit.smoke.gate import verdict

METRICS = ("deschedule_ms", "infer_wall_ms", "queue_wait_ms", "rpc_ms", "client_ms")


def fmt(x) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 100 else f"{x:.1f}"


def table_rows(r: dict) -> list[list[str]]:
    return [
        [m, str(r[m]["n"]), fmt(r[m]["p50"]), fmt(r[m]["p99"]), fmt(r[m]["p999"]), fmt(r[m]["max"])] for m in METRICS
    ]


def fifo_state(fifo: dict) -> str:
    """What the worker's SCHED_FIFO was in a run (the report's ``sched_fifo``), in a few words."""
    if fifo["used"]:
        return "used"
    if fifo.get("policy") == "off":
        return "off (--fifo off)"
    return "available, not used" if fifo["available"] else "not permitted"


def text_summary(r: dict) -> str:
    slo = r["slo"]
    fifo = r["sched_fifo"]
    lines = [
        f"transport {r['transport']}"
        + (f" ({r['allocator']} allocation, state stride {r['state_stride']})" if r["transport"] == "shm" else "")
        + f", {r['mode']}, worker on CPU {r['cpu']} (pinned: {r['pinned']}, nice {r['nice']}), "
        f"clients on {r['client_cpus']}",
        f"SCHED_FIFO: {fifo_state(fifo)}"
        + (
            f" (--fifo {fifo['policy']}: at most {fifo['limit_ms_per_period']:g} ms per RT period, "
            f"{fifo['held_batches']} batches in SCHED_OTHER to keep to it)"
            if fifo.get("limit_ms_per_period") is not None
            else ""
        )
        + f"; model {r['model']}",
        f"{r['samples']} samples in {r['duration_s']} s ({r['throughput_rps']} req/s); p999 {r['p999_credibility']}",
        f"slow_infer events (cpu > 100 ms or wall > 200 ms): {r['slow_infer']['count']}",
    ]
    if r.get("shm_numa_nodes"):
        lines.append(f"shared memory pages per node {r['shm_numa_nodes']}, worker CPU on node {r['worker_numa_node']}")
    if r.get("injected_stalls"):
        s = r["injected_stalls"]
        lines.append(
            f"injected stalls: {s['count']} x {s['ms']} ms every {s['every_s']} s; detected "
            f"{s['detected']} inference(s) descheduled >= {s['detect_threshold_ms']} ms"
        )
    if r.get("cyclictest"):
        c = r["cyclictest"]
        lines.append("cyclictest on the worker CPU: " + ", ".join(f"{k}={v}" for k, v in c.items()))
    for f in r["faults"]:
        lines.append(f"FAULT: {f}")
    if r["errors"]["count"]:
        lines.append(f"ERRORS: {r['errors']['count']}: {r['errors']['examples'][:3]}")
    if r.get("gaps"):
        g = r["gaps"]
        lines += [f"gap probe failed: {g['error']}"] if "error" in g else gaps_summary(g).splitlines()
        if g.get("tail_attribution"):
            t = g["tail_attribution"]
            lines.append(
                f"  slowest inferences (wall >= {t['wall_ms_at_least']} ms): {t['explained']} of "
                f"{t['events']} had at least half their time beyond the median ({t['median_wall_ms']} ms) "
                f"in co-stops ({t['share']:.0%})"
            )
            if t.get("hypervisor"):
                h = t["hypervisor"]
                lines.append(
                    f"  their {h['excess_ms']:.1f} ms beyond the median computation ({h['compute_ms']} ms "
                    f"CPU): {h['invisible_share']:.0%} charged as CPU time, {h['deschedule_ms']:.1f} ms "
                    f"descheduled; spinners stopped invisibly {h['vcpu_stopped']:.0%} of their CPU time"
                )
    if r.get("sched_trace"):
        t = r["sched_trace"]
        if "error" in t:
            lines.append(f"sched trace: {t['error']}")
        else:
            lines.append(
                f"sched trace of the worker CPU: {t['switches']} switches, {t['count']} deschedules over "
                f"{t['threshold_ms']:g} ms ({t['total_ms']:.1f} ms, {t['rt_throttled']} RT-throttled for "
                f"{t['rt_throttled_ms']:.1f} ms); ran "
                "instead: " + (", ".join(f"{k} {v:.1f} ms" for k, v in list(t["by_task"].items())[:4]) or "-")
            )
            if not t.get("idle_exits_traced", True):
                lines.append(
                    f"  this kernel traced no switch out of the idle task on CPU {r['cpu']}: "
                    f"{t['timed_by_inference']} deschedules timed by the worker's inference samples "
                    f"instead, {t['untimed']} left untimed (between inferences, or a second one in "
                    "an inference)"
                )
    for d in r["diagnosis"]:
        lines.append(
            f"diagnosis: {d['cause']} ({d['confidence']}{', primary' if d.get('primary') else ''}): {d['evidence']}"
        )
    lines.append(f"SLO p999 deschedule <= {slo['target_p999_ms']} ms: {verdict(slo)} ({slo['basis']})")
    return "\n".join(lines)
