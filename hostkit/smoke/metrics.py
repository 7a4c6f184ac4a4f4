"""Latency summaries: nearest-rank percentiles, and whether a p999 is credible."""

from __future__ import annotations

import bisect
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


# At CREDIBLE_P999 samples the p999 (nearest rank) is the sample with CREDIBLE_P999 // 1000 above it:
# a run with more samples than that above the target misses at a credible size whatever comes next.
CREDIBLE_ABOVE = CREDIBLE_P999 // 1000


def slo_verdict(deschedule_ms: list[float], target_p999_ms: float, faults: list[str], errors: int) -> dict:
    """The SLO gate on p999 deschedule: PASSED, MISSED or INCONCLUSIVE (``passed`` only for PASSED).

    PASSED needs a credible p999 (>= CREDIBLE_P999 samples) within the target and a run without
    faults or errors. Below that sample count the run is MISSED when it faulted or when more than
    CREDIBLE_ABOVE samples already exceed the target (any credible run containing them misses),
    and INCONCLUSIVE otherwise, saying how many samples are missing.
    """
    ordered = sorted(deschedule_ms)
    n = len(ordered)
    p999 = percentile(ordered, 99.9)
    worst = ordered[-1] if n else None
    above = n - bisect.bisect_right(ordered, target_p999_ms)
    missing = max(0, CREDIBLE_P999 - n)
    if faults or errors:
        verdict = "MISSED"
        basis = f"the run had {len(faults)} fault(s) and {errors} error(s)"
    elif not missing:
        verdict = "PASSED" if p999 <= target_p999_ms else "MISSED"
        basis = f"p999 of {n:,} samples" + ("" if n >= STABLE_P999 else
                                             f" (credible; {STABLE_P999:,} for a stable one)")
    elif above > CREDIBLE_ABOVE:
        verdict = "MISSED"
        basis = (f"{above:,} of {n:,} samples exceed the target, more than the {CREDIBLE_ABOVE} a p999 over "
                 f"{CREDIBLE_P999:,} samples allows")
    else:
        verdict = "INCONCLUSIVE"
        basis = (f"{n:,} samples, {missing:,} short of the {CREDIBLE_P999:,} a credible p999 needs "
                 f"(max {_ms(worst)}, {above} sample(s) above the target)")
    return {"target_p999_ms": target_p999_ms, "p999_ms": None if p999 is None else round(p999, 4),
            "max_ms": None if worst is None else round(worst, 4), "samples": n, "samples_needed": CREDIBLE_P999,
            "samples_missing": missing, "verdict": verdict, "passed": verdict == "PASSED", "basis": basis}


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f} ms"
