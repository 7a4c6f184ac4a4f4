"""Latency summaries: nearest-rank percentiles, whether a p999 is credible, and histograms with
fixed bucket boundaries (the same on every host, so a fleet's histograms add up)."""

from __future__ import annotations

import bisect
import math

CREDIBLE_P999 = 10_000  # below this, p999 is one of the ten largest samples or fewer: report max with n
STABLE_P999 = 100_000
SLOW_INFER_CPU_MS = 100.0  # the original inference actor's slow_infer thresholds
SLOW_INFER_WALL_MS = 200.0


def percentile(sorted_values: list[float], p: float) -> float | None:
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, math.ceil(p / 100.0 * len(sorted_values)) - 1))
    return sorted_values[k]


def summary(values: list[float]) -> dict:
    v = sorted(values)
    n = len(v)
    out = {
        "n": n,
        "p50": percentile(v, 50),
        "p99": percentile(v, 99),
        "p999": percentile(v, 99.9),
        "max": v[-1] if v else None,
        "mean": (sum(v) / n) if n else None,
    }
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


def judge_slo(deschedule_ms: list[float], target_p999_ms: float, faults: list[str], errors: int) -> dict:
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
        basis = f"p999 of {n:,} samples" + (
            "" if n >= STABLE_P999 else f" (credible; {STABLE_P999:,} for a stable one)"
        )
    elif above > CREDIBLE_ABOVE:
        verdict = "MISSED"
        basis = (
            f"{above:,} of {n:,} samples exceed the target, more than the {CREDIBLE_ABOVE} a p999 over "
            f"{CREDIBLE_P999:,} samples allows"
        )
    else:
        verdict = "INCONCLUSIVE"
        basis = (
            f"{n:,} samples, {missing:,} short of the {CREDIBLE_P999:,} a credible p999 needs "
            f"(max {_ms(worst)}, {above} sample(s) above the target)"
        )
    return {
        "target_p999_ms": target_p999_ms,
        "p999_ms": None if p999 is None else round(p999, 4),
        "max_ms": None if worst is None else round(worst, 4),
        "samples": n,
        "samples_needed": CREDIBLE_P999,
        "samples_missing": missing,
        "verdict": verdict,
        "passed": verdict == "PASSED",
        "basis": basis,
    }


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f} ms"


# Histogram bucket upper bounds in seconds, the same on every host and in every hostkit version
# that writes them: 1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8 per decade from 1 us to 10 s (a bound is
# at most 1.34 times the one below it), then +Inf. Fixed bounds are what lets Prometheus (and
# ``merge_histograms``) add the histograms of several hosts bucket by bucket.
_MANTISSAS = ("1", "1.25", "1.5", "2", "2.5", "3", "4", "5", "6", "8")
BUCKETS_S: tuple[float, ...] = tuple(float(f"{m}e{e}") for e in range(-6, 1) for m in _MANTISSAS) + (10.0,)


def histogram(values_ms: list[float]) -> dict:
    """Bucket counts of ``values_ms`` over BUCKETS_S (a value counts in the first bucket whose
    bound is >= it, Prometheus's ``le``); ``counts`` has one more entry than ``le_s``: +Inf."""
    ordered = sorted(v / 1000.0 for v in values_ms)
    cumulative = [bisect.bisect_right(ordered, le) for le in BUCKETS_S] + [len(ordered)]
    counts = [c - (cumulative[i - 1] if i else 0) for i, c in enumerate(cumulative)]
    return {"le_s": list(BUCKETS_S), "counts": counts, "count": len(ordered), "sum_s": round(math.fsum(ordered), 9)}


def merge_histograms(hists: list[dict]) -> dict:
    """The bucket-by-bucket sum of histograms with the same bounds (ValueError otherwise)."""
    if not hists:
        raise ValueError("no histogram to merge")
    le = hists[0]["le_s"]
    for h in hists[1:]:
        if h["le_s"] != le:
            raise ValueError("histograms with different bucket bounds cannot be added")
    return {
        "le_s": list(le),
        "counts": [sum(c) for c in zip(*(h["counts"] for h in hists))],
        "count": sum(h["count"] for h in hists),
        "sum_s": round(math.fsum(h["sum_s"] for h in hists), 9),
    }


def histogram_percentile(hist: dict, p: float) -> float | None:
    """The upper bound (seconds) of the bucket holding the nearest-rank ``p`` percentile: the
    percentile is at most this (math.inf when it lies beyond the last bound; None when empty)."""
    n = hist["count"]
    if not n:
        return None
    rank = max(1, math.ceil(p / 100.0 * n))
    seen = 0
    for le, c in zip(list(hist["le_s"]) + [math.inf], hist["counts"]):
        seen += c
        if seen >= rank:
            return le
    return math.inf
