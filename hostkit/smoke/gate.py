"""The smoke gate: one rule for what a smoke report (or a run that gave none) says about a host.

The words of a verdict (``PASSED``, ``MISSED``, ``INCONCLUSIVE``), and the gate every caller applies:
``hostkit apply --verify-smoke`` (:mod:`hostkit.api`), the rollout's smoke gate
(:mod:`hostkit.rollout.driver`) and the collection's ``hostkit.tuning.smoke`` module
(:mod:`hostkit.actions`) all call :func:`gate_record` and fail on :data:`GATE_FAILS`.
"""

from __future__ import annotations

VERDICTS = ("PASSED", "MISSED", "INCONCLUSIVE")


def verdict(slo: dict) -> str:
    """PASSED, MISSED or INCONCLUSIVE (results written before INCONCLUSIVE existed: from ``passed``)."""
    return slo.get("verdict") or ("PASSED" if slo["passed"] else "MISSED")


# The verdicts that fail a smoke gate: a miss on evidence, or a run that gave none. INCONCLUSIVE
# (too few samples for a credible p999) never does.
GATE_FAILS = ("MISSED", "FAILED")


def gate_record(doc: dict | None, error: str | None = None) -> dict:
    """The one smoke-gate rule (the rollout's, the collection's ``hostkit.tuning.smoke``): a smoke
    report (``doc``), or the ``error`` of a run that gave none, as ``{"verdict", "why", "p999_ms",
    "target_p999_ms", "samples", "diagnosis"}``; the gate fails on a verdict in :data:`GATE_FAILS`."""
    if doc is None:
        return {
            "verdict": "FAILED",
            "why": f"smoke run failed: {error}",
            "p999_ms": None,
            "target_p999_ms": None,
            "samples": 0,
            "diagnosis": [],
        }
    slo = doc["slo"]
    said = verdict(slo)
    causes = [x["cause"] for x in doc.get("diagnosis") or []]
    return {
        "verdict": said,
        "p999_ms": slo["p999_ms"],
        "target_p999_ms": slo["target_p999_ms"],
        "samples": doc["samples"],
        "diagnosis": causes,
        "why": f"{said}: p999 {slo['p999_ms']} ms vs target {slo['target_p999_ms']} ms "
        f"({doc['samples']} samples"
        + (f"; {slo['basis']}" if slo.get("basis") else "")
        + ")"
        + (f"; diagnosis: {', '.join(causes)}" if causes else ""),
    }
