"""The host's own drift run (the agent's ``drift``, which the drift_timer role's systemd unit runs)
below the lab: the shipped zipapp run with python3 against a fixture host's sysroot and a baseline
file, its verdict, exit code and textfile checked with ``promtool check metrics``; and the bad
input of ``hostkit drift --timer`` refused before any host is contacted. The timer itself, under a
real systemd, is tests/vm/test_tuned.py's."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from hostkit.ansible import agent_zipapp
from hostkit.drift import latency, state, store, timer
from hostkit.errors import BadInput
from hostkit.facts import gather
from hostkit.lab.fixtures import materialize

RT = "proc/sys/kernel/sched_rt_runtime_us"


@pytest.fixture
def host(tmp_path):
    """A fixture host's sysroot, its baseline file (the plan sets the RT budget it has: -1) and the agent."""
    root = tmp_path / "root"
    materialize("epyc-9634-nps1", root)
    (root / RT).write_text("-1\n")
    facts = gather(str(root))
    doc = store.new(
        "n1",
        "accepted",
        facts,
        state.effective_state(facts),
        {"sysctl": {"kernel.sched_rt_runtime_us": -1}},
        None,
        "test",
        time.time(),
    )
    base = tmp_path / "baseline.json"
    base.write_text(json.dumps(doc))
    return root, base, agent_zipapp.build(tmp_path / "agent")


def agent_drift(agent, root, base, prom, *extra) -> tuple[int, dict]:
    proc = subprocess.run(
        ["python3", str(agent), "drift", "--sysroot", str(root), "--baseline", str(base), "--prom", str(prom), *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, json.loads(proc.stdout)


def metrics(prom: Path) -> dict[str, float]:
    if shutil.which("promtool"):  # Debian's prometheus package (make setup installs it)
        check = subprocess.run(["promtool", "check", "metrics"], input=prom.read_text(), capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    else:
        pytest.fail("promtool is missing: make setup installs Debian's prometheus package")
    out = {}
    for line in prom.read_text().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name.split("{")[0]] = float(value)
    return out


def test_the_host_judges_itself_same_then_an_undone_planned_value_is_drift(host, tmp_path):
    root, base, agent = host
    prom = tmp_path / "hostkit_drift.prom"
    rc, doc = agent_drift(agent, root, base, prom, "--no-smoke")
    assert rc == 0 and doc["verdict"] == "same" and doc["latency"]["verdict"] == "NOT MEASURED", doc
    got = metrics(prom)
    assert got["hostkit_drift_state_drifted"] == 0 and got["hostkit_drift_failed"] == 0
    assert 'host="n1"' in prom.read_text() and 'baseline="accepted"' in prom.read_text()

    (root / RT).write_text("950000\n")  # what an upgrade's sysctl file put back
    rc, doc = agent_drift(agent, root, base, prom, "--no-smoke")
    assert rc == 1 and doc["verdict"] == "state drifted", doc
    d = doc["differences"][0]
    assert (d["layer"], d["key"], d["before"], d["now"], d["plan"]) == (
        "kernel",
        "kernel.sched_rt_runtime_us",
        -1,
        950000,
        "undoing a planned value",
    )
    got = metrics(prom)
    assert got["hostkit_drift_state_drifted"] == 1 and got["hostkit_drift_differences"] == 1


def test_a_baseline_of_another_host_or_damaged_fails_the_host_in_the_metrics(host, tmp_path):
    root, base, agent = host
    prom = tmp_path / "hostkit_drift.prom"
    doc = json.loads(base.read_text())
    base.write_text(json.dumps({**doc, "hostname": "elsewhere"}))
    rc, out = agent_drift(agent, root, base, prom, "--no-smoke")
    assert rc == 2 and "was taken on 'elsewhere'" in out["error"], out
    assert metrics(prom) == {
        "hostkit_drift_failed": 1.0,
        "hostkit_drift_timestamp_seconds": pytest.approx(time.time(), abs=60),
    }
    base.write_text("{not json")
    rc, out = agent_drift(agent, root, base, prom, "--no-smoke")
    assert rc == 2 and metrics(prom)["hostkit_drift_failed"] == 1
    assert 'host="this host"' in prom.read_text()  # no baseline to name it: said so


def test_the_bios_layer_is_left_to_the_controller_and_said(host, tmp_path):
    root, base, agent = host
    doc = json.loads(base.read_text())
    doc["state"]["bios"] = {"BIOS version": "2.10.2", "NumaNodesPerSocket": "1"}
    base.write_text(json.dumps(doc))
    rc, out = agent_drift(agent, root, base, tmp_path / "d.prom", "--no-smoke")
    assert rc == 0 and out["not_read"] == {"bios": "read from the BMC by the controller's hostkit drift"}, out


@pytest.fixture
def inventory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOSTKIT_STATE_DIR", str(tmp_path / ".hostkit"))
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": {"n1": {"ansible_host": "192.0.2.1"}}}}))
    return str(inv)


@pytest.mark.parametrize(
    ("calendar", "textfile", "said"),
    [
        ("daily\nExecStart=/bin/sh", timer.DEFAULT_TEXTFILE, "a systemd calendar expression"),
        ("", timer.DEFAULT_TEXTFILE, "a systemd calendar expression"),
        ("daily", "metrics.prom", "an absolute path ending in .prom"),
        ("daily", "/var/lib/prometheus/node-exporter/drift.txt", "an absolute path ending in .prom"),
        ("daily", timer.DEFAULT_TEXTFILE, "n1: no baseline in"),
    ],
)
def test_timer_bad_input_is_refused_before_any_host(inventory, calendar, textfile, said):
    """The inventory's host (192.0.2.1, TEST-NET) is never contacted: each is refused first."""
    with pytest.raises(BadInput, match=said):
        timer.settings(inventory, None, None, calendar, textfile, lambda h: [])


def test_timer_settings_name_the_baseline_and_the_smoke_run(inventory, host):
    _root, base, _agent = host
    store.write("n1", json.loads(base.read_text()))
    got = timer.settings(
        inventory, None, None, "Mon..Fri *-*-* 03:00:00", timer.DEFAULT_TEXTFILE, lambda h: ["--no-smoke"]
    )
    assert got["n1"]["state"] == "present" and got["n1"]["against"] == "accepted"
    assert Path(got["n1"]["baseline_file"]) == store.baseline_dir("n1") / "accepted.json"
    assert got["n1"]["agent_args"] == ["--no-smoke"] and got["n1"]["on_calendar"] == "Mon..Fri *-*-* 03:00:00"
    assert timer.settings(inventory, None, None, "off", timer.DEFAULT_TEXTFILE, lambda h: [])["n1"]["state"] == "absent"


@pytest.mark.measures
def test_the_host_s_run_measures_its_tail_against_the_baseline_s(tmp_path):
    """The agent's drift with a real smoke run on this machine (the timer's run on a host), against
    a baseline whose latency is the agent's own smoke run: 2,000 requests in each, too few for a
    p999 verdict, so INCONCLUSIVE with both sample counts, in the report and the metrics."""
    agent = agent_zipapp.build(tmp_path / "agent")
    smoke = subprocess.run(
        ["python3", str(agent), "smoke", "--requests", "2000"], capture_output=True, text=True, timeout=300
    )
    assert smoke.returncode in (0, 1), smoke.stderr[-2000:]
    report = json.loads(smoke.stdout)
    facts = gather("/")
    doc = store.new(
        "me", "accepted", facts, state.effective_state(facts), None, latency.signature(report), "test", time.time()
    )
    base = tmp_path / "baseline.json"
    base.write_text(json.dumps(doc))
    prom = tmp_path / "hostkit_drift.prom"
    rc, out = agent_drift(agent, "/", base, prom, "--requests", "2000")
    lat = out["latency"]
    assert lat["verdict"] == "INCONCLUSIVE" and (lat["samples_before"], lat["samples_now"]) == (2000, 2000), lat
    assert rc == (0 if out["status"] == "ok" else 1), out  # this machine's state may move meanwhile: not asserted
    got = metrics(prom)
    assert got["hostkit_drift_latency_inconclusive"] == 1 and got["hostkit_drift_latency_samples"] == 2000, got
