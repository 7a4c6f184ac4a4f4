"""Smoke results for people (table), machines (JSON), Prometheus (textfile) and plots (PNG)."""

from __future__ import annotations

import math

METRICS = ("deschedule_ms", "infer_wall_ms", "queue_wait_ms", "rpc_ms", "client_ms")


def fmt(x) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 100 else f"{x:.1f}"


def verdict(slo: dict) -> str:
    """PASSED, MISSED or INCONCLUSIVE (results written before INCONCLUSIVE existed: from ``passed``)."""
    return slo.get("verdict") or ("PASSED" if slo["passed"] else "MISSED")


def table_rows(r: dict) -> list[list[str]]:
    return [[m, str(r[m]["n"]), fmt(r[m]["p50"]), fmt(r[m]["p99"]), fmt(r[m]["p999"]), fmt(r[m]["max"])]
            for m in METRICS]


def text_summary(r: dict) -> str:
    slo = r["slo"]
    fifo = r["sched_fifo"]
    lines = [
        f"transport {r['transport']}" + (f" ({r['allocator']} allocation, state stride {r['state_stride']})"
                                         if r["transport"] == "shm" else "")
        + f", {r['mode']}, worker on CPU {r['cpu']} (pinned: {r['pinned']}, nice {r['nice']}), "
          f"clients on {r['client_cpus']}",
        f"SCHED_FIFO: {'used' if fifo['used'] else ('available, not used' if fifo['available'] else 'not permitted')}; "
        f"model {r['model']}",
        f"{r['samples']} samples in {r['duration_s']} s ({r['throughput_rps']} req/s); p999 {r['p999_credibility']}",
        f"slow_infer events (cpu > 100 ms or wall > 200 ms): {r['slow_infer']['count']}",
    ]
    if r.get("shm_numa_nodes"):
        lines.append(f"shared memory pages per node {r['shm_numa_nodes']}, worker CPU on node {r['worker_numa_node']}")
    if r.get("injected_stalls"):
        s = r["injected_stalls"]
        lines.append(f"injected stalls: {s['count']} x {s['ms']} ms every {s['every_s']} s; detected "
                     f"{s['detected']} inference(s) descheduled >= {s['detect_threshold_ms']} ms")
    if r.get("cyclictest"):
        c = r["cyclictest"]
        lines.append("cyclictest on the worker CPU: " + ", ".join(f"{k}={v}" for k, v in c.items()))
    for f in r["faults"]:
        lines.append(f"FAULT: {f}")
    if r["errors"]["count"]:
        lines.append(f"ERRORS: {r['errors']['count']}: {r['errors']['examples'][:3]}")
    for d in r["diagnosis"]:
        lines.append(f"diagnosis: {d['cause']} ({d['confidence']}): {d['evidence']}")
    lines.append(f"SLO p999 deschedule <= {slo['target_p999_ms']} ms: {verdict(slo)} ({slo['basis']})")
    return "\n".join(lines)


def prometheus(r: dict, host: str = "localhost") -> str:
    out = ["# HELP hostkit_smoke_latency_ms Smoke-test latency quantiles in milliseconds.",
           "# TYPE hostkit_smoke_latency_ms gauge"]
    for m in METRICS:
        for q in ("p50", "p99", "p999", "max"):
            v = r[m][q]
            if v is not None:
                out.append(f'hostkit_smoke_latency_ms{{host="{host}",metric="{m[:-3]}",quantile="{q}"}} {v}')
    out += ["# HELP hostkit_smoke_samples Inferences measured.", "# TYPE hostkit_smoke_samples gauge",
            f'hostkit_smoke_samples{{host="{host}"}} {r["samples"]}',
            "# HELP hostkit_smoke_slo_passed 1 when p999 deschedule met the target.",
            "# TYPE hostkit_smoke_slo_passed gauge",
            f'hostkit_smoke_slo_passed{{host="{host}"}} {int(r["slo"]["passed"])}',
            "# HELP hostkit_smoke_sched_fifo 1 when the worker ran SCHED_FIFO.",
            "# TYPE hostkit_smoke_sched_fifo gauge",
            f'hostkit_smoke_sched_fifo{{host="{host}"}} {int(r["sched_fifo"]["used"])}']
    return "\n".join(out) + "\n"


def plot(results: list[tuple[str, dict, list[float]]], path: str, target_ms: float | None = None) -> None:
    """Histogram and CDF (log scale) of deschedule times, p99/p999 marked; one curve per result."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_h, ax_c) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, r, values in results:
        v = sorted(max(x, 1e-4) for x in values)
        if not v:
            continue
        lo, hi = math.log10(v[0]), math.log10(max(v[-1], v[0] * 1.01))
        bins = [10 ** (lo + (hi - lo) * i / 60) for i in range(61)]
        ax_h.hist(v, bins=bins, alpha=0.6, label=label)
        n = len(v)
        ax_c.plot(v, [(i + 1) / n for i in range(n)], label=label)
        for q, style in (("p99", "--"), ("p999", ":")):
            x = r["deschedule_ms"][q]
            if x:
                ax_c.axvline(x, linestyle=style, linewidth=1, color=ax_c.lines[-1].get_color())
                ax_c.annotate(f"{label} {q} {x:.3g} ms", (x, 0.05 if q == "p99" else 0.15), fontsize=7, rotation=90)
    if target_ms:
        ax_c.axvline(target_ms, color="red", linewidth=1)
        ax_c.annotate(f"target {target_ms} ms", (target_ms, 0.5), color="red", fontsize=8, rotation=90)
    for ax in (ax_h, ax_c):
        ax.set_xscale("log")
        ax.set_xlabel("deschedule per inference (ms, wall - thread CPU)")
    ax_h.set_yscale("log")
    ax_h.set_ylabel("inferences")
    ax_c.set_ylabel("cumulative share")
    ax_h.set_title("histogram")
    ax_c.set_title("CDF")
    ax_c.legend(loc="lower right", fontsize=8)
    ax_h.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
