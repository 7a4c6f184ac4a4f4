"""The host's own drift run, for its systemd timer (role ``drift_timer``): the host agent's
``drift`` sub-command judges the host against the copy of its baseline the role left beside the
journal, with no controller, and writes the verdict for node_exporter's textfile collector.

The same rules as the controller's ``hostkit drift`` (:mod:`hostkit.drift.fleet`): the baseline's
checks (:func:`hostkit.drift.store.check`, the host's own hostname), the effective state
(:mod:`hostkit.drift.state`), the latency test (:mod:`hostkit.drift.latency`), the verdict
(:mod:`hostkit.drift.verdict`) and the metrics (:mod:`hostkit.drift.prometheus`). One difference,
said in the report: the BIOS is read from the BMC, which the host does not reach, so its layer is
left to the controller's run. Standard library only: this module ships with the agent.
"""

from __future__ import annotations

import time
from pathlib import Path

from hostkit.drift import latency, state, store
from hostkit.drift.prometheus import prometheus
from hostkit.drift.verdict import counted_differences, verdict
from hostkit.errors import HostkitError
from hostkit.jsonfile import read_json
from hostkit.smoke.options import SmokeOptions
from hostkit.smoke.output_files import write_atomic

# The layers a host reads of itself: all but the BMC's.
NOT_ON_HOST = ("bios",)


def judge(baseline: str, sysroot: str, options: SmokeOptions | None, prom: str | None) -> dict:
    """The host against ``baseline`` (a baseline file): a drift verdict of
    :func:`hostkit.drift.verdict.verdict`, with ``host`` and ``not_read``; ``options``: the smoke
    run (None: the latency is NOT MEASURED). ``prom``: the textfile, written with the verdict, or
    with ``hostkit_drift_failed 1`` when the host could not be judged (a baseline missing, damaged
    or of another host raises :class:`~hostkit.errors.BadInput` before the host is measured)."""
    host = "this host"
    try:
        doc = read_json(
            Path(baseline), missing=f"no baseline {baseline}: install the timer again (hostkit drift --timer)"
        )
        if isinstance(doc, dict) and isinstance(doc.get("host"), str):
            host = doc["host"]
        out = _judge(doc, host, Path(baseline), sysroot, options)
    except HostkitError as exc:
        if prom:  # the alert sees a host it could not judge, never the last verdict as a fresh one
            write_atomic(prom, prometheus({host: {"status": "failed", "error": str(exc)}}))
        raise
    if prom:
        write_atomic(prom, prometheus({host: out}))
    return out


def _judge(doc, host: str, path: Path, sysroot: str, options: SmokeOptions | None) -> dict:
    from hostkit.facts import gather

    now = time.time()
    facts = gather(sysroot)
    base = store.check(doc, host, path, facts.get("hostname") or host, now)
    before = {layer: v for layer, v in base["state"].items() if layer not in NOT_ON_HOST}
    diffs = state.differences(before, state.effective_state(facts), base["plan"])
    lat = None
    if options is not None and base["latency"]:
        from hostkit.smoke.session import run_smoke

        lat = latency.against(base["latency"], latency.signature(run_smoke(options, facts=facts)))
    out = {
        **verdict(base["name"], diffs, counted_differences(diffs), lat),
        "host": host,
        "not_read": {
            layer: "read from the BMC by the controller's hostkit drift"
            for layer in NOT_ON_HOST
            if layer in base["state"]
        },
    }
    return out
