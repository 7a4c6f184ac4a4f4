"""Migration evidence: smoke results before (VM) and after (bare metal), side by side.

Inputs are `hostkit smoke --json` documents: one host's result, or a fleet document
``{"hosts": {name: result}}`` / ``{name: result}``. Hosts are matched by name; a single
result on each side is compared as one host.
"""

from __future__ import annotations

from hostkit.core.sysroot import excerpt
from hostkit.errors import BadInput
from hostkit.jsonfile import COUNT, NUMBER, OPT_NUMBER, check_shape, read_json
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
    ("vCPU co-stops (% of the run)", lambda r: _gaps(r, "costops", "share_of_run", 2)),
    ("slowest 1% during a co-stop (%)", lambda r: _gaps(r, "tail_attribution", "share", 1)),
]
# The probed gaps' shares the report shows, where a result has them (``gaps.<part>.<share>``).
GAP_SHARES = (("costops", "share_of_run"), ("tail_attribution", "share"))


def _gaps(r: dict, part: str, share: str, digits: int):
    value = ((r.get("gaps") or {}).get(part) or {}).get(share)
    return "-" if value is None else round(100 * value, digits)


# What the report reads of a result, and the type of each: a document of another shape is bad input,
# named with the first field that is wrong, before anything is written.
SHAPE = {
    "deschedule_ms": {"p50": OPT_NUMBER, "p99": OPT_NUMBER, "p999": OPT_NUMBER, "max": OPT_NUMBER},
    "queue_wait_ms": {"p99": OPT_NUMBER},
    "rpc_ms": {"p50": OPT_NUMBER, "p99": OPT_NUMBER},
    "throughput_rps": OPT_NUMBER,
    "samples": COUNT,
    "slow_infer": {"count": COUNT},
    "sched_fifo": {"used": bool, "available": bool},
    "transport": str,
    "slo": {"p999_ms": OPT_NUMBER, "target_p999_ms": NUMBER, "passed": bool, "verdict?": (str, type(None))},
    "diagnosis": [{"cause": str, "confidence": str, "evidence": str}],
    # Read where present: the probed gaps (with --probe-gaps), the CDF the plot draws.
    "gaps?": (dict, type(None)),
    "deschedule_cdf_ms?": lambda v: None if v is None else _cdf_problem(v),
}


def _cdf_problem(cdf) -> str | None:
    if not isinstance(cdf, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in cdf):
        return "must be null or a list of numbers"
    return None


def check_result(r, where: str) -> dict:
    """A smoke result document of the shape the report reads (``where`` names it in an error)."""
    check_shape(r, SHAPE, where)
    for part, share in GAP_SHARES:
        found = (r.get("gaps") or {}).get(part)
        check_shape(found, (dict, type(None)), f"{where}.gaps.{part}")
        check_shape((found or {}).get(share), OPT_NUMBER, f"{where}.gaps.{part}.{share}")
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
