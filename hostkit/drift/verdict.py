"""A drift verdict from a host's state differences and its latency comparison: which differences
count, and same / state drifted / latency drifted / both, with the cause named when both moved.
The one rule of the controller's ``hostkit drift`` (:mod:`hostkit.drift.fleet`) and of the host's
own scheduled run (:mod:`hostkit.drift.on_host`). Standard library only: the host agent ships it."""

from __future__ import annotations

# Differences that do not make "state drifted" of their own. An IRQ that irqbalance moves is a
# difference the plan does not name: it is reported, and counts only when it undoes a planned
# placement. A package upgraded, or new microcode, is what an upgrade is meant to change: it is
# reported beside the drift it may explain (a rollout's drift gate after an upgrade hook must not
# stop on the upgrade itself, only on what it undid).
NOTED_ONLY = {("irqs", "not planned"), ("packages", "not planned")}
# So is the release of the kernel booted: a kernel upgrade. What counts is what the new kernel was
# booted without (the boot layer's planned arguments) and what it undid.
NOTED_KEYS = {("kernel", "release")}


def counted_differences(diffs: list[dict]) -> list[dict]:
    """The differences (:func:`hostkit.drift.state.differences`) that make drift: not noted only."""
    return [d for d in diffs if (d["layer"], d["plan"]) not in NOTED_ONLY and (d["layer"], d["key"]) not in NOTED_KEYS]


def counted(doc: dict) -> list[dict]:
    """The differences of a drift verdict (:func:`verdict`) that count as drift, ranked."""
    return [d for d in doc["differences"] if d not in doc["noted_only"]]


def verdict(name: str, diffs: list[dict], counted: list[dict], lat: dict | None) -> dict:
    """same / state drifted / latency drifted / both; a coincidence of the two named as the cause."""
    state_drifted = bool(counted)
    lat_drifted = bool(lat and lat["verdict"] == "MOVED")
    what = {(False, False): "same", (True, False): "state drifted", (False, True): "latency drifted"}.get(
        (state_drifted, lat_drifted), "both"
    )
    if what == "same" and lat and lat["verdict"] == "INCONCLUSIVE":
        what = "same state, latency INCONCLUSIVE"
    ranked = sorted(counted, key=lambda d: (d["plan"] != "undoing a planned value", d["layer"] != "irqs", d["layer"]))
    cause = None
    if state_drifted and lat_drifted:
        d = ranked[0]
        cause = f"{d['key']}: {d['before']} -> {d['now']} ({d['plan']}); p999 {lat['p999_ms_before']} -> {lat['p999_ms_now']} ms"
    return {
        "status": "drift" if state_drifted or lat_drifted else "ok",
        "against": name,
        "verdict": what,
        "cause": cause,
        "differences": ranked + [d for d in diffs if d not in counted],
        "noted_only": [d for d in diffs if d not in counted],
        "latency": lat
        if lat is not None
        else {"verdict": "NOT MEASURED", "basis": "no latency in the baseline, or --no-smoke"},
    }
