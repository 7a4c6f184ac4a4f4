"""Migration evidence: smoke results before (VM) and after (bare metal), side by side.

Inputs are `hostkit smoke --json` documents: one host's result, or a fleet document
``{"hosts": {name: result}}`` / ``{name: result}``. Hosts are matched by name; a single
result on each side is compared as one host.
"""

from __future__ import annotations

from hostkit.core.sysroot import excerpt
from hostkit.errors import BadInput
from hostkit.jsonfile import read_json
from hostkit.smoke.gate import verdict as slo_word
from hostkit.smoke.text import fifo_state

ROWS = [
    ("deschedule p50 (ms)", lambda r: r["deschedule_ms"]["p50"]),
    ("deschedule p99 (ms)", lambda r: r["deschedule_ms"]["p99"]),
    ("deschedule p999 (ms)", lambda r: r["deschedule_ms"]["p999"]),
    ("deschedule max (ms)", lambda r: r["deschedule_ms"]["max"]),
    ("queue wait p99 (ms)", lambda r: r["queue_wait_ms"]["p99"]),
    ("rpc p50 (ms)", lambda r: r["rpc_ms"]["p50"]),
    ("rpc p99 (ms)", lambda r: r["rpc_ms"]["p99"]),
    ("throughput (req/s)", lambda r: r["throughput_rps"]),
    ("samples", lambda r: r["samples"]),
    ("slow_infer events", lambda r: r["slow_infer"]["count"]),
    ("SCHED_FIFO", lambda r: fifo_state(r["sched_fifo"])),
    ("transport", lambda r: r["transport"]),
    # With --probe-gaps: what the hypervisor took, invisible to the guest kernel ("-": not probed).
    ("vCPU co-stops (% of the run)", lambda r: _gaps(r, lambda g: round(100 * g["costops"]["share_of_run"], 2))),
    ("slowest 1% during a co-stop (%)", lambda r: _gaps(r, lambda g: round(100 * g["tail_attribution"]["share"], 1))),
]


def _gaps(r: dict, get):
    g = r.get("gaps") or {}
    try:
        return get(g)
    except KeyError:
        return "-"


NUM = (int, float)
OPT_NUM = (int, float, type(None))
# What the report reads of a result, and the type of each: a document of another shape is bad input,
# named with the first field that is wrong, before anything is written.
SHAPE = {
    "deschedule_ms": {"p50": OPT_NUM, "p99": OPT_NUM, "p999": OPT_NUM, "max": OPT_NUM},
    "queue_wait_ms": {"p99": OPT_NUM},
    "rpc_ms": {"p50": OPT_NUM, "p99": OPT_NUM},
    "throughput_rps": OPT_NUM,
    "samples": int,
    "slow_infer": {"count": int},
    "sched_fifo": {"used": bool, "available": bool},
    "transport": str,
    "slo": {"p999_ms": OPT_NUM, "target_p999_ms": NUM},
    "diagnosis": list,
}
DIAGNOSIS = {"cause": str, "confidence": str, "evidence": str}


def _check(value, shape, where: str) -> None:
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            raise BadInput(f"{where} must be an object, got {type(value).__name__}")
        for key, sub in shape.items():
            if key not in value:
                raise BadInput(f"{where}.{key} is missing")
            _check(value[key], sub, f"{where}.{key}")
    elif not isinstance(value, shape) or (shape is int and isinstance(value, bool)):
        raise BadInput(f"{where} has the wrong type: {type(value).__name__} {excerpt(value)}")


def check_result(r, where: str) -> dict:
    """A smoke result document of the shape the report reads (``where`` names it in an error)."""
    _check(r, SHAPE, where)
    for n, d in enumerate(r["diagnosis"]):
        _check(d, DIAGNOSIS, f"{where}.diagnosis[{n}]")
    if (
        not isinstance(r.get("gaps") or {}, dict)
        or not isinstance(r.get("deschedule_cdf_ms") or [], list)
        or not all(isinstance(x, NUM) for x in r.get("deschedule_cdf_ms") or [])
    ):
        raise BadInput(f"{where}: gaps or deschedule_cdf_ms of the wrong shape")
    if r["slo"].get("verdict") is not None and not isinstance(r["slo"]["verdict"], str):
        raise BadInput(f"{where}.slo.verdict has the wrong type")
    return r


def load_results(path: str) -> dict[str, dict]:
    doc = read_json(path)
    if isinstance(doc, dict) and "deschedule_ms" in doc:
        return {str(doc.get("host") or "host"): check_result(doc, path)}
    hosts = doc.get("hosts", doc) if isinstance(doc, dict) else None
    if (
        not isinstance(hosts, dict)
        or not hosts
        or not all(isinstance(v, dict) and "deschedule_ms" in v for v in hosts.values())
    ):
        raise BadInput(f"{path} is not a hostkit smoke result (hostkit smoke --json)")
    return {str(h): check_result(r, f"{path}: {excerpt(h)}") for h, r in hosts.items()}


def pair(before: dict[str, dict], after: dict[str, dict]) -> list[tuple[str, dict, dict]]:
    if len(before) == 1 and len(after) == 1:
        (nb, rb), (na, ra) = next(iter(before.items())), next(iter(after.items()))
        return [(nb if nb == na else f"{nb} -> {na}", rb, ra)]
    common = [h for h in before if h in after]
    if not common:
        raise BadInput("the two files share no host name")
    return [(h, before[h], after[h]) for h in common]


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if v < 100 else f"{v:.1f}"
    return str(v)


def verdict(r: dict) -> str:
    s = r["slo"]
    return f"{slo_word(s)} (p999 {_fmt(s['p999_ms'])} ms vs target {s['target_p999_ms']} ms)"


def markdown(pairs: list[tuple[str, dict, dict]], before_name: str, after_name: str) -> str:
    out = [
        "# Migration evidence: SHM inference smoke test",
        "",
        f"Before: `{before_name}` · After: `{after_name}`. Deschedule = wall − thread CPU time of each "
        "inference: time the inference thread was runnable but not running.",
        "",
    ]
    for host, b, a in pairs:
        out += [f"## {host}", "", "| | before | after | change |", "|---|---|---|---|"]
        for label, get in ROWS:
            vb, va = get(b), get(a)
            change = ""
            if isinstance(vb, (int, float)) and isinstance(va, (int, float)) and vb and not isinstance(vb, bool):
                change = f"{va / vb:.2g}x"
            out.append(f"| {label} | {_fmt(vb)} | {_fmt(va)} | {change} |")
        out += [
            "",
            f"**Verdict before:** {verdict(b)}  ",
            f"**Verdict after:** {verdict(a)}",
            "",
            "Diagnosis before:",
            "",
        ]
        out += [
            f"- {'**primary** ' if d.get('primary') else ''}{d['cause']} ({d['confidence']}): {d['evidence']}"
            for d in b["diagnosis"]
        ]
        out += ["", "Diagnosis after:", ""]
        out += [
            f"- {'**primary** ' if d.get('primary') else ''}{d['cause']} ({d['confidence']}): {d['evidence']}"
            for d in a["diagnosis"]
        ]
        out.append("")
    return "\n".join(out)


def plot(pairs: list[tuple[str, dict, dict]], path: str):
    """Per host one panel: before and after on one percentile axis (50% .. 99.99%, log latency),
    each one's p99, p99.9 and max labelled, the after side's target drawn. Returns the Figure."""
    from hostkit.smoke.plots import curve_from_result, percentile_figure, save_figure

    panels = []
    for host, b, a in pairs:
        curves = [curve_from_result(f"{side} (n={r['samples']:,})", r) for side, r in (("before", b), ("after", a))]
        panels.append((host, curves, a["slo"]["target_p999_ms"]))
    fig = percentile_figure(panels)
    save_figure(fig, path)
    return fig
