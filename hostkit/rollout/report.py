"""The fleet report of a rollout, beside its state file: ``report.md`` (per host: batch, outcome,
p999 before and after with their verdicts, the gate that failed and why; the fleet's percentiles
from the merged histograms of the "after" runs), and through :mod:`hostkit.smoke.prometheus` and
:mod:`hostkit.smoke.plots` the fleet's Prometheus textfile ``fleet.prom`` and, when matplotlib is
installed, ``fleet.png``."""

from __future__ import annotations

import json
from pathlib import Path

from hostkit.errors import BadInput
from hostkit.rollout import state as rollout_state


def _ms(x) -> str:
    return "-" if x is None else f"{x:g}"


def smoke_docs(rollout_id: str, phase: str) -> dict[str, dict]:
    d = rollout_state.run_dir(rollout_id) / "smoke"
    return {
        p.name[len(phase) + 1 : -len(".json")]: json.loads(p.read_text()) for p in sorted(d.glob(f"{phase}-*.json"))
    }


def fleet_files(state: dict) -> tuple[dict, list[str], list[str]]:
    """The fleet summary of the hosts' "after" runs (hosts rolled back excluded: their "after" is
    not the fleet's state), the hosts without one, and the files written."""
    from hostkit.smoke import plots
    from hostkit.smoke.fleet import fleet_summary
    from hostkit.smoke.output_files import write_atomic
    from hostkit.smoke.prometheus import prometheus_fleet

    d = rollout_state.run_dir(state["rollout_id"])
    docs = {
        h: doc
        for h, doc in smoke_docs(state["rollout_id"], "after").items()
        if state["hosts"].get(h, {}).get("status") == "done"
    }
    missing = sorted(h for h in state["hosts"] if h not in docs)
    summary = fleet_summary(docs)
    written = []
    write_atomic(str(d / "fleet.prom"), prometheus_fleet(summary, missing))
    written.append("fleet.prom")
    if docs:
        try:
            plots.require_matplotlib("fleet.png")
        except BadInput:  # no matplotlib: the Markdown says so
            pass
        else:
            targets = {doc["slo"]["target_p999_ms"] for doc in docs.values()}
            plots.plot_fleet(docs, summary, str(d / "fleet.png"), targets.pop() if len(targets) == 1 else None)
            written.append("fleet.png")
    return summary, missing, written


def markdown(state: dict, summary: dict | None = None, written: list[str] | None = None) -> str:
    req = state["request"]
    lines = [
        f"# hostkit rollout {state['rollout_id']}",
        "",
        f"* status: **{state['status']}**",
        f"* inventory: `{req['inventory']}`" + (f", limit `{req['limit']}`" if req.get("limit") else ""),
        f"* batches: {len(state['batches'])} (--batch {req['batch']}, --canary {req['canary']}, "
        f"--max-failures {req['max_failures']}"
        + (f", --max-unavailable {req['max_unavailable']}" if req.get("max_unavailable") else "")
        + f"{', --reboot' if req['reboot'] else ''})",
        f"* started {state['created']}, last step {state['updated']}",
    ]
    f = state.get("failure")
    if f:
        lines.append(
            f"* stopped at batch {f['batch'] + 1}: **{f['host']}** failed the **{f['gate']}** gate: {f['why']}"
        )
    if state.get("abort"):
        lines.append(
            f"* aborted {state['abort']['at']}: "
            + ("; ".join(state["abort"]["errors"]) or "every apply run of the rollout rolled back")
        )
    lines += ["", "## Batches", "", "| # | hosts | status | apply runs |", "|---|---|---|---|"]
    for b in state["batches"]:
        lines.append(
            f"| {b['index'] + 1}{' (canary)' if b['canary'] else ''} | {', '.join(b['hosts'])} | "
            f"{b['status']} | {', '.join(b.get('apply_runs') or []) or '-'} |"
        )
    lines += [
        "",
        "## Hosts",
        "",
        "| host | batch | status | p999 before (ms) | before | p999 after (ms) | after | target (ms) | audit |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for h, r in state["hosts"].items():
        be, af = r.get("before") or {}, r.get("after") or {}
        lines.append(
            f"| {h} | {r['batch'] + 1} | {r['status']} | {_ms(be.get('p999_ms'))} | "
            f"{be.get('verdict', '-')} | "
            f"{_ms(af.get('p999_ms'))} | {af.get('verdict', '-')} | "
            f"{_ms(af.get('target_p999_ms') or be.get('target_p999_ms'))} | "
            f"{(r.get('audit') or {}).get('status', '-')} |"
        )
    missed = [(h, r) for h, r in state["hosts"].items() if r.get("gate")]
    lines += ["", "## Hosts that missed", ""]
    lines += [
        f"* **{h}** ({r['gate']['gate']}): {r['gate']['why']}"
        + (
            f"; rolled back: runs {', '.join(r['rollback']['runs']) or 'none journaled'}"
            if r.get("rollback") and r["rollback"]["ok"]
            else ""
        )
        for h, r in missed
    ] or ["none"]
    inconclusive = [h for h, r in state["hosts"].items() if (r.get("after") or {}).get("verdict") == "INCONCLUSIVE"]
    if inconclusive:
        lines += [
            "",
            f"INCONCLUSIVE after the apply (too few samples for a credible p999; not a gate): "
            f"{', '.join(inconclusive)}.",
        ]
    if summary is not None:
        lines += ["", '## Fleet (merged histograms of the hosts\' "after" runs)', ""]
        if summary["hosts"]:
            b = summary["at_most_s"]["deschedule"]

            def ms(s):
                return "-" if s is None else f"{s * 1000:.3f}"

            lines.append(
                f"{len(summary['hosts'])} host(s): deschedule p50 <= {ms(b['p50'])} ms, p99 <= {ms(b['p99'])} "
                f"ms, p99.9 <= {ms(b['p999'])} ms (upper bounds of the merged buckets), max "
                f"{ms(summary['max_s']['deschedule'])} ms; verdicts "
                + ", ".join(f"{k} {v}" for k, v in sorted(summary["verdicts"].items()))
            )
        else:
            lines.append('no host finished with an "after" run')
        no_png = "fleet.png" not in (written or []) and summary["hosts"]
        lines += [
            "",
            "Files: " + ", ".join(written or []) + (" (no fleet.png: matplotlib is not installed)" if no_png else ""),
        ]
    return "\n".join(lines) + "\n"


def write_report(state: dict) -> Path:
    summary, _, written = fleet_files(state)
    path = rollout_state.run_dir(state["rollout_id"]) / "report.md"
    from hostkit.smoke.output_files import write_atomic

    write_atomic(str(path), markdown(state, summary, written).encode())
    return path
