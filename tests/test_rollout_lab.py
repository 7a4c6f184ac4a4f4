"""hostkit rollout on the sshd lab: real Ansible over real SSH to four sysroot hosts, real hook
scripts that record their calls, trees hashed before and after.

The four-host rollouts run with ``isolation: false`` (through ``hostkit_overrides``): no host
needs a reboot, which keeps them short; ``--reboot`` is still given, so the rollbacks go through
``RollbackRequest(reboot=True)``. One test rolls a host out with isolation on: the lab's simulated
reboot rewrites ``proc/cmdline`` and ``sys/devices/system/cpu/isolated`` as the booted kernel
would, and every gate passes. Smoke runs are 2 s: their
verdict is INCONCLUSIVE (too few samples), which does not stop a rollout; a host made to miss
gets an unreachable target (0.001 ms), which a 2 s run already proves MISSED.
"""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys
import time

import pytest
import yaml

from hostkit.paths import runs_dir
from tests.conftest import lab_port
from tests.labutil import cli, cli_json, trees

pytestmark = pytest.mark.lab

HOSTS = ["n1", "n2", "n3", "n4"]
# --batch 2 --canary 1 over n1..n4
BATCHES = [["n1"], ["n2", "n3"], ["n4"]]
SMOKE = ["--smoke-duration", "2"]
HOOK = """#!/bin/sh
# hook.sh pre|post HOST: records the call; fails while fail-<kind>-<host> exists, once for fail-once-<kind>-<host>
d=$(dirname "$0")
echo "$1 $2 batch=$HOSTKIT_BATCH hook=$HOSTKIT_HOOK" >> "$d/calls.log"
if [ -e "$d/fail-$1-$2" ]; then echo "cannot drain $2: node has unevictable pods" >&2; exit 3; fi
if [ -e "$d/fail-once-$1-$2" ]; then rm "$d/fail-once-$1-$2"; echo "transient: API server timeout" >&2; exit 1; fi
if [ -e "$d/slow-once-$1-$2" ]; then rm "$d/slow-once-$1-$2"; sleep 60; fi
exit 0
"""


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([(h, "epyc-9634-nps1") for h in HOSTS], lab_port(8))


@pytest.fixture
def fleet(lab, tmp_path):
    """The lab inventory with recording hooks and per-host smoke targets (``targets``); after the
    test every host is rolled back (``rollback --all``) and checked byte-exact against its tree."""
    before = trees(lab)
    hook = tmp_path / "hook.sh"
    hook.write_text(HOOK)
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)

    def inventory(targets: dict[str, float] | None = None, isolation: bool = False):
        inv = yaml.safe_load(lab.inventory.read_text())
        inv["all"]["vars"]["hostkit_pre_batch"] = f"{hook} pre {{{{ inventory_hostname }}}}"
        inv["all"]["vars"]["hostkit_post_batch"] = f"{hook} post {{{{ inventory_hostname }}}}"
        for h, v in inv["all"]["children"]["lab"]["hosts"].items():
            v["hostkit_overrides"] = {"isolation": isolation,
                                      "smoke": {"target_p999_ms": (targets or {}).get(h, 1000.0)}}
        path = tmp_path / "inventory.yml"
        path.write_text(yaml.safe_dump(inv, sort_keys=False))
        return path

    inventory.before = before
    inventory.dir = tmp_path
    inventory.calls = lambda: [" ".join(line.split()[:2]) for line in
                               (tmp_path / "calls.log").read_text().splitlines()] \
        if (tmp_path / "calls.log").exists() else []
    yield inventory
    changed = [h for h, t in trees(lab).items() if t != before[h]]
    if changed:
        proc = cli("rollback", "-i", lab.inventory, "--limit", ",".join(changed), "--all")
        assert proc.returncode == 0, proc.stdout[-2000:]
    assert trees(lab) == before


def runs_on(inv, hosts) -> dict[str, list[str]]:
    """Per host, the runs in its journal not rolled back."""
    rc, doc, proc = cli_json("history", "-i", inv, "--limit", ",".join(hosts))
    assert rc == 0, proc.stderr[-2000:]
    return {h: [r["run_id"] for r in doc[h]["runs"] if not r["rolled_back"]] for h in hosts}


def state_file(doc) -> dict:
    return json.loads((runs_dir() / doc["rollout_id"] / "rollout.json").read_text())


def test_a_host_rolled_out_into_isolation_reboots_and_passes_every_gate(lab, fleet):
    inv = fleet(isolation=True)
    rc, doc, proc = cli_json("rollout", "-i", inv, "--limit", "n1", "--batch", "1", "--reboot", *SMOKE)
    assert rc == 0, proc.stderr[-3000:]
    assert doc["status"] == "completed" and doc["hosts"]["n1"]["status"] == "done", doc["hosts"]
    (root,) = [h.sysroot for h in lab.hosts() if h.name == "n1"]
    assert "isolcpus=managed_irq," in open(f"{root}/proc/cmdline").read()  # the simulated boot


def test_rollout_in_ordered_batches_tunes_every_host(lab, fleet):
    inv = fleet()
    rc, doc, proc = cli_json("rollout", "-i", inv, "--batch", "2", "--canary", "1", "--reboot", *SMOKE)
    assert rc == 0, proc.stderr[-3000:]
    assert [b["hosts"] for b in doc["batches"]] == BATCHES
    assert fleet.calls() == ["pre n1", "post n1", "pre n2", "pre n3", "post n2", "post n3", "pre n4", "post n4"]
    # batches strictly ordered: each starts after the previous one is done
    marks = [(e["batch"], e["status"], e["t"]) for e in doc["events"] if e["step"] == "batch"]
    assert [(b, s) for b, s, _ in marks] == [(0, "started"), (0, "done"), (1, "started"), (1, "done"),
                                             (2, "started"), (2, "done")]
    assert [t for _, _, t in marks] == sorted(t for _, _, t in marks)
    # every host tuned, once, by its batch's apply run
    applied = {h: doc["batches"][r["batch"]]["apply_run"] for h, r in doc["hosts"].items()}
    assert runs_on(inv, HOSTS) == {h: [applied[h]] for h in HOSTS}
    assert len(set(applied.values())) == 3
    # ... and the hosts' own journals show it: every change of a batch before the next batch's first
    rc, hist, _ = cli_json("history", "-i", inv)
    span = {h: (hist[h]["runs"][0]["started"], hist[h]["runs"][0]["last_change"]) for h in HOSTS}
    for earlier, later in zip(BATCHES, BATCHES[1:]):
        assert max(span[h][1] for h in earlier) < min(span[h][0] for h in later), span
    assert all(trees(lab)[h] != fleet.before[h] for h in HOSTS)
    # the state on disk is complete
    s = state_file(doc)
    assert s["status"] == "completed" and s["failure"] is None
    assert {h: (r["status"], r["step"], r["gate"], r["apply"]["status"], r["audit"]["status"],
                r["before"]["verdict"], r["after"]["verdict"]) for h, r in s["hosts"].items()} == \
        {h: ("done", "done", None, "changed", "pass", "INCONCLUSIVE", "INCONCLUSIVE") for h in HOSTS}
    assert {h: len(r["hooks"]) for h, r in s["hosts"].items()} == {h: 2 for h in HOSTS}
    # the fleet report
    d = runs_dir() / doc["rollout_id"]
    report = (d / "report.md").read_text()
    assert "status: **completed**" in report and "## Hosts that missed\n\nnone" in report
    for h in HOSTS:
        assert f"| {h} | {doc['hosts'][h]['batch'] + 1} | done |" in report
    assert (d / "fleet.png").read_bytes()[:4] == b"\x89PNG"
    assert "hostkit_smoke_fleet_deschedule_seconds_bucket" in (d / "fleet.prom").read_text()


def test_a_host_missing_its_slo_stops_the_rollout_and_its_batch_is_rolled_back(lab, fleet):
    inv = fleet({"n3": 0.001})
    rc, doc, proc = cli_json("rollout", "-i", inv, "--batch", "2", "--canary", "1", "--reboot", *SMOKE)
    assert rc == 1, proc.stderr[-3000:]
    f = doc["failure"]
    assert (f["batch"], f["host"], f["gate"]) == (1, "n3", "smoke")
    assert f["why"].startswith("MISSED: p999 ") and "vs target 0.001 ms" in f["why"]
    assert "diagnosis: " in f["why"] or doc["hosts"]["n3"]["after"]["diagnosis"] == []
    after = trees(lab)
    assert after["n1"] != fleet.before["n1"]  # the canary stays tuned
    assert {h: after[h] == fleet.before[h] for h in ("n2", "n3", "n4")} == {"n2": True, "n3": True, "n4": True}
    assert {h: doc["hosts"][h]["status"] for h in HOSTS} == \
        {"n1": "done", "n2": "rolled_back", "n3": "rolled_back", "n4": "pending"}
    assert runs_on(inv, HOSTS) == {"n1": [doc["batches"][0]["apply_run"]], "n2": [], "n3": [], "n4": []}
    # the rolled-back hosts went back into service; n4 was never touched
    assert fleet.calls() == ["pre n1", "post n1", "pre n2", "pre n3", "post n2", "post n3"]
    report = (runs_dir() / doc["rollout_id"] / "report.md").read_text()
    assert "**n3** failed the **smoke** gate: MISSED" in report
    assert "* **n3** (smoke): MISSED" in report


def test_a_failing_pre_batch_hook_stops_the_rollout_before_any_change(lab, fleet):
    inv = fleet()
    (fleet.dir / "fail-pre-n1").touch()
    rc, doc, proc = cli_json("rollout", "-i", inv, "--batch", "2", "--canary", "1", "--reboot", *SMOKE)
    assert rc == 1, proc.stderr[-3000:]
    assert (doc["failure"]["host"], doc["failure"]["gate"]) == ("n1", "pre_hook")
    assert doc["failure"]["why"].endswith("exit 3: cannot drain n1: node has unevictable pods")
    assert trees(lab) == fleet.before
    assert all(r["apply"] is None and r["before"] is None for r in doc["hosts"].values())
    assert fleet.calls() == ["pre n1", "post n1"]  # the drained node is put back, nothing else runs


def test_resume_does_not_redo_finished_hosts_and_abort_restores_every_host(lab, fleet):
    inv = fleet()
    (fleet.dir / "fail-once-pre-n3").touch()  # batch 2 stops once, before anything changes on it
    rc, doc, proc = cli_json("rollout", "-i", inv, "--batch", "2", "--canary", "1", "--reboot", *SMOKE)
    assert rc == 1, proc.stderr[-3000:]
    assert (doc["failure"]["batch"], doc["failure"]["host"], doc["failure"]["gate"]) == (1, "n3", "pre_hook")
    first = doc["batches"][0]["apply_run"]
    assert runs_on(inv, HOSTS) == {"n1": [first], "n2": [], "n3": [], "n4": []}
    assert {h: trees(lab)[h] == fleet.before[h] for h in HOSTS} == {"n1": False, "n2": True, "n3": True, "n4": True}

    rc, resumed, proc = cli_json("rollout", "--resume", doc["rollout_id"])
    assert rc == 0, proc.stderr[-3000:]
    assert resumed["status"] == "completed" and resumed["rollout_id"] == doc["rollout_id"]
    assert fleet.calls() == ["pre n1", "post n1", "pre n2", "pre n3", "post n2", "post n3",  # the stop
                             "pre n2", "pre n3", "post n2", "post n3", "pre n4", "post n4"]  # the resume
    runs = runs_on(inv, HOSTS)
    assert runs == {"n1": [first], "n2": [resumed["batches"][1]["apply_run"]],
                    "n3": [resumed["batches"][1]["apply_run"]], "n4": [resumed["batches"][2]["apply_run"]]}
    proc = cli("rollout", "--resume", doc["rollout_id"])
    assert proc.returncode == 2 and proc.stderr.endswith("has finished: nothing to resume\n"), proc.stderr

    rc, aborted, proc = cli_json("rollout", "--abort", doc["rollout_id"])
    assert rc == 0, proc.stderr[-3000:]
    assert aborted["status"] == "aborted" and aborted["abort"]["errors"] == []
    rolled = [e for e in aborted["events"] if e["step"] == "rollback"]
    assert [e["hosts"] for e in rolled] == [["n4"], ["n2", "n3"], ["n1"]]  # newest batch first
    assert trees(lab) == fleet.before
    assert state_file(aborted)["status"] == "aborted"


def test_a_controller_killed_between_batches_resumes_without_redoing_finished_hosts(lab, fleet):
    inv = fleet()
    (fleet.dir / "slow-once-pre-n2").touch()  # batch 2's first hook holds the controller there
    proc = subprocess.Popen([sys.executable, "-m", "hostkit.cli", "rollout", "-i", str(inv), "--batch", "2",
                             "--canary", "1", "--reboot", *SMOKE, "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 900
    while "pre n2" not in fleet.calls():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "timeout"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)  # no handler runs: the state file is what the last step left
    proc.wait(timeout=30)
    rid = next(p.parent.name for p in runs_dir().glob("*/rollout.json"))
    s = json.loads((runs_dir() / rid / "rollout.json").read_text())
    assert s["status"] == "running" and [b["status"] for b in s["batches"]] == ["done", "running", "pending"]
    assert {h: r["step"] for h, r in s["hosts"].items()} == \
        {"n1": "done", "n2": "pre_hook", "n3": "pending", "n4": "pending"}
    first = s["batches"][0]["apply_run"]
    assert runs_on(inv, HOSTS) == {"n1": [first], "n2": [], "n3": [], "n4": []}

    rc, resumed, p = cli_json("rollout", "--resume", rid)
    assert rc == 0, p.stderr[-3000:]
    assert runs_on(inv, HOSTS) == {"n1": [first], "n2": [resumed["batches"][1]["apply_run"]],
                                   "n3": [resumed["batches"][1]["apply_run"]],
                                   "n4": [resumed["batches"][2]["apply_run"]]}
    assert fleet.calls() == ["pre n1", "post n1", "pre n2",  # killed in n2's hook
                             "pre n2", "pre n3", "post n2", "post n3", "pre n4", "post n4"]
