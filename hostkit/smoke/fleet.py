"""A fleet's smoke results taken together: the hosts' histograms merged bucket by bucket, what the
merged histograms bound (p50, p99, p99.9 at most), the largest samples, the hosts per verdict."""

from __future__ import annotations

from collections import Counter

from hostkit.smoke.gate import verdict
from hostkit.smoke.metrics import histogram_percentile, merge_histograms

HISTOGRAMS = {  # result["histograms"] key -> what it measures
    "deschedule": "Deschedule per inference (wall - thread CPU time: runnable but not running)",
    "rpc": "Request round trip per inference as the client sees it (submit -> response seen)",
}


def fleet_summary(docs: dict[str, dict]) -> dict:
    """A fleet's merged histograms and what they tell: per metric, the nearest-rank p50/p99/p99.9
    *at most* (the upper bound of the merged bucket holding it, never above the fleet's largest
    sample) and the largest sample; the hosts per SLO verdict."""
    hosts = sorted(docs)
    out: dict = {
        "hosts": hosts,
        "verdicts": dict(Counter(verdict(docs[h]["slo"]) for h in hosts)),
        "histograms": {},
        "at_most_s": {},
        "max_s": {},
    }
    if not hosts:
        return out
    for key in HISTOGRAMS:
        merged = merge_histograms([docs[h]["histograms"][key] for h in hosts])
        maxima = [docs[h][f"{key}_ms"]["max"] for h in hosts if docs[h][f"{key}_ms"]["max"] is not None]
        top = max(maxima) / 1000.0 if maxima else None
        out["histograms"][key] = merged
        out["max_s"][key] = top
        out["at_most_s"][key] = {
            q: (None if (b := histogram_percentile(merged, p)) is None else min(b, top))
            for q, p in (("p50", 50), ("p99", 99), ("p999", 99.9))
        }
    return out
