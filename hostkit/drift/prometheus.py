"""``hostkit drift --prom FILE`` and ``--junit FILE``: each host's drift verdict in Prometheus' text exposition format, for
node_exporter's textfile collector, so that an alert rule can page on it between runs
(docs/examples/hostkit-drift.rules.yml, checked with ``promtool check rules``).

Every series is labelled ``host``; a host judged also ``baseline``. A host whose drift could not be
judged (unreachable, its smoke run failed) has ``hostkit_drift_failed 1`` and nothing else, so a
stale verdict is never mistaken for a fresh one.
"""

from __future__ import annotations

import time

from hostkit.drift.verdict import counted as drift_counted
from hostkit.smoke.prometheus import exposition, gauge_family

PLAN_WORDS = ("planned", "not planned", "undoing a planned value")


def _seconds(ms):
    return None if ms is None else ms / 1000.0


def families(hosts: dict[str, dict], now: float | None = None) -> list:
    """The metric families of one drift run (``hosts``: :func:`hostkit.drift.fleet.judge`'s documents)."""
    now = time.time() if now is None else now
    judged = {h: d for h, d in sorted(hosts.items()) if "verdict" in d}
    failed, state, lat, incon, diffs = [], [], [], [], []
    p999, ratio, p_worse, samples = [], [], [], []
    for host in sorted(hosts):
        failed.append(([host], 0.0 if host in judged else 1.0))
    for host, d in judged.items():
        lab, lv = [host, d["against"]], d["latency"]
        counted = drift_counted(d)
        state.append((lab, 1.0 if counted else 0.0))
        lat.append((lab, 1.0 if lv["verdict"] == "MOVED" else 0.0))
        incon.append((lab, 1.0 if lv["verdict"] in ("INCONCLUSIVE", "NOT MEASURED") else 0.0))
        layers = sorted({x["layer"] for x in d["differences"]})
        for layer in layers:
            for words in PLAN_WORDS:
                n = sum(1 for x in counted if x["layer"] == layer and x["plan"] == words)
                diffs.append(([*lab, layer, words], float(n)))
        for run, key in (("baseline", "before"), ("now", "now")):
            p999.append(([*lab, run], _seconds(lv.get(f"p999_ms_{key}"))))
            samples.append(([*lab, run], lv.get(f"samples_{key}")))
        ratio.append((lab, lv.get("ratio")))
        p_worse.append((lab, lv.get("p_worse")))
    hb, runs = ["host", "baseline"], ["host", "baseline", "run"]
    return [
        gauge_family(
            "hostkit_drift_failed", "1 when the host's drift could not be judged (last run).", ["host"], failed
        ),
        gauge_family(
            "hostkit_drift_state_drifted",
            "1 when the host's effective state moved from its baseline (a difference that counts).",
            hb,
            state,
        ),
        gauge_family(
            "hostkit_drift_latency_drifted",
            "1 when the deschedule p999 MOVED from the baseline's (significant and at least 1.5x).",
            hb,
            lat,
        ),
        gauge_family(
            "hostkit_drift_latency_inconclusive",
            "1 when the latency could not be judged (too few samples, or not measured).",
            hb,
            incon,
        ),
        gauge_family(
            "hostkit_drift_differences",
            "State differences that count, by layer and by what the baseline's plan says of them.",
            [*hb, "layer", "plan"],
            diffs,
        ),
        gauge_family("hostkit_drift_latency_p999_seconds", "Deschedule p999, the baseline's and now.", runs, p999),
        gauge_family("hostkit_drift_latency_samples", "Samples behind each p999.", runs, samples),
        gauge_family("hostkit_drift_latency_p999_ratio", "p999 now over the baseline's.", hb, ratio),
        gauge_family(
            "hostkit_drift_latency_p_worse",
            "The exact tail test's p-value that the tail got worse.",
            hb,
            p_worse,
        ),
        gauge_family(
            "hostkit_drift_timestamp_seconds",
            "When this drift run ended (Unix time).",
            ["host"],
            [([h], now) for h in sorted(hosts)],
        ),
    ]


def prometheus(hosts: dict[str, dict], now: float | None = None) -> bytes:
    return exposition(families(hosts, now))


def junit_xml(hosts: dict[str, dict]) -> str:
    """``hostkit drift --junit FILE``: per host a testcase ``state`` and one ``latency`` (drift a
    failure, a host not judged an error, latency INCONCLUSIVE or not measured a skip)."""
    from hostkit.junit import Case, suite

    cases = []
    for host, d in sorted(hosts.items()):
        cls = f"hostkit.drift.{host}"
        if "verdict" not in d:
            cases.append(Case(cls, "judged", "error", str(d.get("error"))))
            continue
        counted = drift_counted(d)
        if counted:
            lines = "\n".join(f"{x['layer']} {x['key']}: {x['before']} -> {x['now']} ({x['plan']})" for x in counted)
            cases.append(Case(cls, "state", "failure", f"{len(counted)} state difference(s)", lines))
        else:
            cases.append(Case(cls, "state"))
        lv = d["latency"]
        if lv["verdict"] == "MOVED":
            cases.append(Case(cls, "latency", "failure", lv["basis"]))
        elif lv["verdict"] in ("INCONCLUSIVE", "NOT MEASURED"):
            cases.append(Case(cls, "latency", "skipped", f"{lv['verdict']}: {lv['basis']}"))
        else:
            cases.append(Case(cls, "latency"))
    return suite("hostkit-drift", cases)
