"""Did the tail move? Two smoke runs' deschedule histograms (the baseline's and now's) compared
honestly: the p999 of each, the ratio with a bootstrap interval, and an exact test on the tail.

- **The tail test.** Take the baseline's p999 bucket bound ``t``. Under "nothing moved", a sample of
  either run lands above ``t`` with the same probability, so of the ``k`` samples above ``t`` in both
  runs, the count from the new run is Binomial(k, n_now / (n_before + n_now)). The one-sided exact
  p-value says how surprising the new run's share is. The same test in the other direction says
  whether the tail improved.
- **The interval.** Each histogram is resampled (multinomial over its buckets, a fixed seed, so the
  same inputs give the same figures) and the ratio of the resampled p999 bucket bounds taken; the
  2.5th and 97.5th percentiles of that ratio bound it. Histogram buckets are at most 1.34 times the
  one below, so a ratio is known to about that resolution.
- **The verdict.** MOVED (worse) when the tail test's p-value is below :data:`ALPHA` *and* the
  interval's lower end is at least :data:`MIN_RATIO`: a change both real and large enough to matter.
  IMPROVED the other way round. SAME when both runs hold enough samples and neither holds.
  INCONCLUSIVE when either run has fewer than :data:`~hostkit.smoke.metrics.CREDIBLE_P999` samples:
  too few for a p999, so never "no drift".
"""

from __future__ import annotations

import math

from hostkit.smoke.metrics import CREDIBLE_P999, histogram_percentile

ALPHA = 0.001  # the tail test's threshold: 10 repeated drift runs on an unchanged host, 1% chance of any alarm
MIN_RATIO = 1.5  # the p999 interval's lower end for MOVED: a bucket and more than a half above
BOOTSTRAP = 400
SEED = 20261206


def _binom_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), exactly (log-space terms: n is at most a few thousand)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    logp, log1p = math.log(p), math.log1p(-p)
    terms = [
        math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * logp + (n - i) * log1p
        for i in range(k, n + 1)
    ]
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def _above(hist: dict, bound: float) -> int:
    return sum(c for le, c in zip(list(hist["le_s"]) + [math.inf], hist["counts"]) if le > bound)


def _interval(before: dict, now: dict) -> tuple[float, float]:
    import numpy as np

    rng = np.random.default_rng(SEED)
    bounds = np.array(list(before["le_s"]) + [before["le_s"][-1] * 1.34])  # +Inf's bucket: one step above

    def p999s(hist: dict) -> np.ndarray:
        counts = np.array(hist["counts"], dtype=float)
        n = int(counts.sum())
        draws = rng.multinomial(n, counts / n, size=BOOTSTRAP)
        rank = max(1, math.ceil(0.999 * n))
        idx = (np.cumsum(draws, axis=1) >= rank).argmax(axis=1)
        return bounds[idx]

    ratios = p999s(now) / p999s(before)
    return float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def compare(before: dict, now: dict) -> dict:
    """The latency part of a drift report from two deschedule histograms (same bucket bounds)."""
    n0, n1 = before["count"], now["count"]
    p0, p1 = histogram_percentile(before, 99.9), histogram_percentile(now, 99.9)
    out: dict = {
        "samples_before": n0,
        "samples_now": n1,
        "samples_needed": CREDIBLE_P999,
        "p999_ms_before": None if p0 is None else round(p0 * 1000, 4),
        "p999_ms_now": None if p1 is None else round(p1 * 1000, 4),
    }
    if before["le_s"] != now["le_s"]:
        return {**out, "verdict": "INCONCLUSIVE", "basis": "the two runs' histograms have different buckets"}
    if min(n0, n1) < CREDIBLE_P999:
        return {
            **out,
            "verdict": "INCONCLUSIVE",
            "basis": f"{min(n0, n1):,} samples in a run, {CREDIBLE_P999:,} needed for a p999: no verdict",
        }
    t = p0
    k0, k1 = _above(before, t), _above(now, t)
    share = n1 / (n0 + n1)
    worse = _binom_tail(k1, k0 + k1, share)
    better = _binom_tail(k0, k0 + k1, 1 - share)
    low, high = _interval(before, now)
    ratio = p1 / p0 if p0 else math.inf
    out.update(
        ratio=round(ratio, 3),
        interval=[round(low, 3), round(high, 3)],
        above_before=k0,
        above_now=k1,
        threshold_ms=round(t * 1000, 4),
        p_worse=float(f"{worse:.3g}"),
        p_better=float(f"{better:.3g}"),
    )
    if worse < ALPHA and low >= MIN_RATIO:
        verdict = "MOVED"
    elif better < ALPHA and high <= 1 / MIN_RATIO:
        verdict = "IMPROVED"
    else:
        verdict = "SAME"
    basis = (
        f"p999 {out['p999_ms_before']} -> {out['p999_ms_now']} ms (ratio {ratio:.2f}, 95% interval "
        f"{low:.2f}-{high:.2f}); above {out['threshold_ms']} ms: {k0:,} of {n0:,} before, {k1:,} of {n1:,} "
        f"now (p = {worse:.2g})"
    )
    return {**out, "verdict": verdict, "basis": basis}


def signature(report: dict) -> dict:
    """The latency signature of one smoke report, as a baseline keeps it: the deschedule histogram,
    its sample count, the report's p999 and how long the run took (measured: a run of N requests
    has no set duration)."""
    hist = report["histograms"]["deschedule"]
    return {
        "histogram": hist,
        "samples": hist["count"],
        "p999_ms": report["slo"]["p999_ms"],
        "duration": report["duration_s"],
    }


def against(base: dict, now: dict) -> dict:
    """:func:`compare` of two signatures (a baseline's, now's), with how long each run took."""
    out = compare(base["histogram"], now["histogram"])
    out.update(duration_s_before=base["duration"], duration_s_now=now["duration"])
    return out
