"""Latency summaries: nearest-rank percentiles, and whether a p999 is credible."""

from __future__ import annotations

import math

CREDIBLE_P999 = 10_000  # below this, p999 is one of the ten largest samples or fewer: report max with n
STABLE_P999 = 100_000
SLOW_INFER_CPU_MS = 100.0  # the seeds' slow_infer thresholds
SLOW_INFER_WALL_MS = 200.0


def percentile(sorted_values: list[float], p: float) -> float | None:
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, math.ceil(p / 100.0 * len(sorted_values)) - 1))
    return sorted_values[k]


def summary(values: list[float]) -> dict:
    v = sorted(values)
    n = len(v)
    out = {"n": n, "p50": percentile(v, 50), "p99": percentile(v, 99), "p999": percentile(v, 99.9),
           "max": v[-1] if v else None, "mean": (sum(v) / n) if n else None}
    return {k: (round(x, 4) if isinstance(x, float) else x) for k, x in out.items()}


def credibility(n: int) -> str:
    if n >= STABLE_P999:
        return "stable"
    if n >= CREDIBLE_P999:
        return "credible"
    return f"not credible: {n} samples < {CREDIBLE_P999}; read max with n"


def slo_verdict(deschedule_ms: list[float], target_p999_ms: float, faults: list[str], errors: int) -> dict:
    """The SLO on p999 deschedule: passed when p999 meets the target and the run had no fault or error."""
    n = len(deschedule_ms)
    p999 = percentile(sorted(deschedule_ms), 99.9)
    passed = p999 is not None and p999 <= target_p999_ms and not faults and errors == 0
    worst = max(deschedule_ms) if n else None
    return {"target_p999_ms": target_p999_ms, "p999_ms": None if p999 is None else round(p999, 4), "passed": passed,
            "basis": "p999" if n >= CREDIBLE_P999 else f"p999 of {n} samples (not credible; max {round(worst or 0, 4)})"}
