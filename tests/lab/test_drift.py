"""hostkit baseline and hostkit drift on a lab host over real SSH (the session lab's EPYC host):
a baseline taken, never overwritten; a sysctl an "upgrade" rewrote reported as undoing a planned
value, with its layer and before -> now, and the drift exit code, in the metrics (promtool clean)
and the JUnit file too; the value put back, the same again. State only (--no-smoke): the latency
part is measured live by tests/unit/test_drift_latency_live.py, alone on this machine, where a
tail that moved is told from a busy machine.

What this does not show (tests/unit/test_drift.py has the statistics on generated samples): a real
package upgrade on a real-kernel guest, a timer on the host and the rollout gate; see the closing
note of the issue.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.labutil import cli
from tests.unit.test_smoke_metrics import promtool_check

HOST = "h-epyc-9634-nps1"


def test_baseline_then_drift_names_an_undone_sysctl_and_clears_when_it_is_back(lab, tmp_path):
    inv = str(lab.inventory)
    proc = cli("baseline", "-i", inv, "--limit", HOST, "--name", "accepted", "--why", "test", "--no-smoke", "--json")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(proc.stdout)["hosts"][HOST]
    assert doc["status"] == "ok" and doc["latency"] is None

    again = cli("baseline", "-i", inv, "--limit", HOST, "--name", "accepted", "--no-smoke")
    assert again.returncode == 2 and "never overwritten" in again.stderr

    host = next(h for h in lab.hosts() if h.name == HOST)
    knob = Path(host.sysroot) / "proc/sys/kernel/sched_rt_runtime_us"
    original = knob.read_text()
    try:
        knob.write_text("500000\n")  # what a package's maintainer script might leave behind
        prom, junit = tmp_path / "drift.prom", tmp_path / "drift.xml"
        proc = cli(
            "drift", "-i", inv, "--limit", HOST, "--no-smoke", "--json", "--prom", str(prom), "--junit", str(junit)
        )
        assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
        doc = json.loads(proc.stdout)["hosts"][HOST]
        assert doc["verdict"] == "state drifted"
        promtool_check(prom.read_bytes())
        assert f'hostkit_drift_state_drifted{{baseline="accepted",host="{HOST}"}} 1.0' in prom.read_text()
        assert 'name="state"><failure' in junit.read_text()
        (d,) = [d for d in doc["differences"] if d["key"] == "kernel.sched_rt_runtime_us"]
        assert (d["layer"], str(d["before"]), str(d["now"]), d["plan"]) == (
            "kernel",
            original.strip(),
            "500000",
            "undoing a planned value",
        ), d
        text = cli("drift", "-i", inv, "--limit", HOST, "--no-smoke")
        assert "STATE DRIFTED" in text.stdout and "undoing a planned value" in text.stdout
    finally:
        knob.write_text(original)
    proc = cli("drift", "-i", inv, "--limit", HOST, "--json")  # the baseline has no latency: none is measured
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(proc.stdout)["hosts"][HOST]
    assert doc["verdict"] == "same" and doc["latency"]["verdict"] == "NOT MEASURED", doc
