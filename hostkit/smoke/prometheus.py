"""Smoke results in Prometheus' text exposition format, for node_exporter's textfile collector:
one host's run (``hostkit smoke --prom``) and a fleet's (``hostkit smoke -i --prom``, the rollout).
Standard library only (the drift timer writes its verdict with it on the host); the tests read
every file back with prometheus_client's parser and ``promtool check metrics``."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from hostkit.smoke.fleet import HISTOGRAMS
from hostkit.smoke.gate import VERDICTS, verdict


def _seconds(ms):
    return None if ms is None else ms / 1000.0


@dataclass
class Family:
    """One metric family: its samples as (sample name, labels, value)."""

    name: str
    doc: str
    type: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def go_float(value) -> str:
    """A sample value as Prometheus writes it (Go's formatting: +Inf, NaN, 1.7e+09 for large values)."""
    d = float(value)
    if math.isinf(d):
        return "+Inf" if d > 0 else "-Inf"
    if math.isnan(d):
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:  # Go switches to an exponent sooner than Python
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return s


def _label_value(v: str) -> str:
    return v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _histogram_family(name: str, doc: str, labelnames: list[str], series: list[tuple[list[str], dict]]) -> Family:
    fam = Family(name, doc, "histogram")
    for labels, h in series:
        lab = dict(zip(labelnames, labels))
        cumulative = 0
        for le, c in zip(list(h["le_s"]) + [math.inf], h["counts"]):
            cumulative += c
            fam.samples.append((f"{name}_bucket", {**lab, "le": go_float(le)}, cumulative))
        fam.samples += [(f"{name}_count", lab, cumulative), (f"{name}_sum", lab, h["sum_s"])]
    return fam


def gauge_family(name: str, doc: str, labelnames: list[str], series: list[tuple[list[str], float | None]]) -> Family:
    fam = Family(name, doc, "gauge")
    fam.samples += [(name, dict(zip(labelnames, labels)), value) for labels, value in series if value is not None]
    return fam


def exposition(families: list[Family]) -> bytes:
    """The text exposition format node_exporter's textfile collector reads (version 0.0.4), written
    with the standard library: it runs on hosts too (the drift timer's run, hostkit.drift.on_host)."""
    out = []
    for f in families:
        doc = f.doc.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {f.name} {doc}\n")
        out.append(f"# TYPE {f.name} {f.type}\n")
        for sample, labels, value in f.samples:
            text = ",".join(f'{k}="{_label_value(str(v))}"' for k, v in sorted(labels.items()))
            out.append(f"{sample}{{{text}}} {go_float(value)}\n" if text else f"{sample} {go_float(value)}\n")
    return "".join(out).encode("utf-8")


def host_families(r: dict, host: str, now: float | None = None) -> list:
    """One host's smoke run as metric families, every series labelled ``host``."""
    lab = [host]
    fams = [
        _histogram_family(
            f"hostkit_smoke_{key}_seconds",
            f"{doc}, seconds (the last smoke run).",
            ["host"],
            [(lab, r["histograms"][key])],
        )
        for key, doc in HISTOGRAMS.items()
    ]
    slo = r["slo"]
    word = verdict(slo)
    fams += [
        gauge_family(
            "hostkit_smoke_deschedule_max_seconds",
            "Largest deschedule of the last smoke run, seconds.",
            ["host"],
            [(lab, _seconds(r["deschedule_ms"]["max"]))],
        ),
        gauge_family(
            "hostkit_smoke_rpc_max_seconds",
            "Largest request round trip of the last smoke run, seconds.",
            ["host"],
            [(lab, _seconds(r["rpc_ms"]["max"]))],
        ),
        gauge_family(
            "hostkit_smoke_slo_target_p999_seconds",
            "The SLO: p99.9 deschedule target, seconds.",
            ["host"],
            [(lab, _seconds(slo["target_p999_ms"]))],
        ),
        gauge_family(
            "hostkit_smoke_slo_p999_seconds",
            "p99.9 deschedule the SLO was judged on (nearest rank over every sample), seconds.",
            ["host"],
            [(lab, _seconds(slo["p999_ms"]))],
        ),
        gauge_family(
            "hostkit_smoke_slo_verdict",
            "SLO verdict of the last smoke run: 1 for the verdict it had, 0 for the others.",
            ["host", "verdict"],
            [([host, v], float(v == word)) for v in VERDICTS],
        ),
        gauge_family(
            "hostkit_smoke_sched_fifo",
            "1 when the smoke worker ran SCHED_FIFO.",
            ["host"],
            [(lab, float(bool(r["sched_fifo"]["used"])))],
        ),
        gauge_family(
            "hostkit_smoke_timestamp_seconds",
            "Unix time the smoke result was written, seconds.",
            ["host"],
            [(lab, time.time() if now is None else now)],
        ),
    ]
    return fams


def prometheus(r: dict, host: str = "localhost", now: float | None = None) -> bytes:
    """One host's textfile (``hostkit smoke --prom``)."""
    return exposition(host_families(r, host, now))


def fleet_families(summary: dict, failed: list[str], now: float | None = None) -> list:
    """The fleet file: merged histograms (``hostkit_smoke_fleet_*``, no host label, so they never
    add up again with the hosts' series), the p99.9 bound, the largest deschedule, hosts per state."""
    fams = [
        _histogram_family(
            f"hostkit_smoke_fleet_{key}_seconds",
            f"{doc}, seconds: every measured host's last smoke run, buckets added.",
            [],
            [([], summary["histograms"][key])],
        )
        for key, doc in HISTOGRAMS.items()
        if key in summary["histograms"]
    ]
    bounds = summary["at_most_s"].get("deschedule", {})
    fams += [
        gauge_family(
            "hostkit_smoke_fleet_deschedule_p99_seconds",
            "Fleet p99 deschedule is at most this: upper bound of its bucket in the merged histogram, seconds.",
            [],
            [([], bounds.get("p99"))],
        ),
        gauge_family(
            "hostkit_smoke_fleet_deschedule_p999_seconds",
            "Fleet p99.9 deschedule is at most this: upper bound of its bucket in the merged histogram, seconds.",
            [],
            [([], bounds.get("p999"))],
        ),
        gauge_family(
            "hostkit_smoke_fleet_deschedule_max_seconds",
            "Largest deschedule on any host, seconds.",
            [],
            [([], summary["max_s"].get("deschedule"))],
        ),
        gauge_family(
            "hostkit_smoke_fleet_hosts",
            "Hosts of the fleet run: measured, or failed (no result).",
            ["state"],
            [(["measured"], float(len(summary["hosts"]))), (["failed"], float(len(failed)))],
        ),
        gauge_family(
            "hostkit_smoke_fleet_slo_hosts",
            "Measured hosts per SLO verdict.",
            ["verdict"],
            [([v], float(summary["verdicts"].get(v, 0))) for v in VERDICTS],
        ),
        gauge_family(
            "hostkit_smoke_fleet_timestamp_seconds",
            "Unix time the fleet result was written, seconds.",
            [],
            [([], time.time() if now is None else now)],
        ),
    ]
    return fams


def prometheus_fleet(summary: dict, failed: list[str], now: float | None = None) -> bytes:
    """The fleet's textfile (``hostkit smoke -i --prom``)."""
    return exposition(fleet_families(summary, failed, now))
