"""hostkit rollout on the sshd lab: real Ansible over real SSH to six sysroot hosts, real hook
scripts that record their calls, trees hashed before and after.

One lab of six hosts (n1..n6) serves the module; each test leaves every tree as it found it.
The rollouts run ``--canary 1 --batch 3 --max-unavailable 2`` (batches n1 | n2,n3,n4 | n5,n6; the
middle batch goes out in two waves, n2,n3 then n4). The hosts' own journals (each apply run's
first and last change, microseconds, one clock: the lab's hosts share this machine) prove the
order. The rollout that is killed mid-apply and resumed runs with isolation on: every host's plan
changes its kernel arguments and the lab's simulated reboot (``--reboot``) rewrites
``proc/cmdline`` and ``sys/devices/system/cpu/isolated`` as the booted kernel would, journaled.
The others run with ``isolation: false`` (no reboot: shorter). Smoke runs are 2 s: their verdict
is INCONCLUSIVE (too few samples), which does not stop a rollout; a host made to miss gets an
unreachable target (0.001 ms), which a 2 s run already proves MISSED.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest
import yaml

from hostkit.paths import runs_dir
from tests.conftest import lab_port
from tests.labutil import cli, cli_json, sysroot, trees

pytestmark = pytest.mark.lab

HOSTS = ["n1", "n2", "n3", "n4", "n5", "n6"]
ROLLOUT = ["--batch", "3", "--canary", "1", "--max-unavailable", "2", "--reboot", "--smoke-duration", "2"]
BATCHES = [["n1"], ["n2", "n3", "n4"], ["n5", "n6"]]
WAVES = [["n1"], ["n2", "n3"], ["n4"], ["n5", "n6"]]  # at most 2 hosts out at once
HOOK = """#!/bin/sh
# hook.sh pre|post HOST: records the call; fails while fail-<kind>-<host> exists
d=$(dirname "$0")
echo "$1 $2 batch=$HOSTKIT_BATCH hook=$HOSTKIT_HOOK" >> "$d/calls.log"
if [ -e "$d/fail-$1-$2" ]; then echo "cannot drain $2: node has unevictable pods" >&2; exit 3; fi
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


def history(inv) -> dict[str, list[dict]]:
    rc, doc, proc = cli_json("history", "-i", inv)
    assert rc == 0, proc.stderr[-2000:]
    return {h: doc[h]["runs"] for h in HOSTS}


def in_force(hist: dict[str, list[dict]]) -> dict[str, list[str]]:
    """Per host, the runs in its journal not rolled back."""
    return {h: [r["run_id"] for r in runs if not r["rolled_back"]] for h, runs in hist.items()}


def state_file(rid: str) -> dict:
    return json.loads((runs_dir() / rid / "rollout.json").read_text())


def epoch(stamp: str) -> float:
    """A journal time (``2026-11-30T09:20:03.123456Z``) in seconds since the epoch."""
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (ansible-runner starts ansible-playbook in a session of its own)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open(f"/proc/{d}/stat").read().rpartition(")")[2].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def kill_mid_apply(lab, inv, args: list[str], host: str) -> str:
    """Start a rollout and kill its controller (hostkit, ansible-playbook and their children, with
    SIGKILL: no handler runs) once ``host``'s journal holds a change of the batch's apply run, i.e.
    in the middle of the apply. The rollout id."""
    proc = subprocess.Popen([sys.executable, "-m", "hostkit.cli", "rollout", "-i", str(inv), *args, "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    journal = sysroot(lab, host) / "var/lib/hostkit/journal"
    deadline = time.monotonic() + 900
    while True:
        assert proc.poll() is None, f"the rollout ended before the apply on {host}: {proc.stderr.read()[-2000:]}"
        assert time.monotonic() < deadline, f"no apply on {host} within 900 s"
        states = list(runs_dir().glob("*/rollout.json"))
        s = json.loads(states[0].read_text()) if states else None
        if s and s["hosts"][host]["step"] == "apply":
            run = s["hosts"][host]["runs"][-1]
            f = journal / f"{run}.json"
            if f.exists() and f.read_text().count('"seq"') >= 1:
                break
        time.sleep(0.05)
    tree = process_tree(proc.pid)
    for p in tree:
        try:
            os.kill(p, signal.SIGSTOP)  # freeze the whole tree first: none acts on another's death
        except ProcessLookupError:
            pass
    for p in tree:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)
    return s["rollout_id"]


def test_a_rollout_killed_mid_apply_resumes_each_host_applied_once_in_order_then_aborts(lab, fleet):
    inv = fleet(isolation=True)
    rid = kill_mid_apply(lab, inv, ROLLOUT, "n2")
    s = state_file(rid)
    assert s["status"] == "running" and [b["status"] for b in s["batches"]] == ["done", "running", "pending"]
    assert {h: r["step"] for h, r in s["hosts"].items()} == \
        {"n1": "done", "n2": "apply", "n3": "apply", "n4": "pending", "n5": "pending", "n6": "pending"}
    cut = s["batches"][1]["apply_runs"][0]
    hist = history(inv)
    assert in_force(hist)["n2"] == [cut]  # the apply was cut off with changes on the host
    assert json.loads((sysroot(lab, "n2") / "var/lib/hostkit/lock").read_text())["run_id"] == cut

    rc, doc, proc = cli_json("rollout", "--resume", rid)
    assert rc == 0, proc.stderr[-3000:]
    assert doc["status"] == "completed" and [b["hosts"] for b in doc["batches"]] == BATCHES
    # every host applied exactly once: one run in force, its wave's; the cut-off run rolled back first
    hist = history(inv)
    runs = {h: doc["hosts"][h]["apply"]["run_id"] for h in HOSTS}
    assert in_force(hist) == {h: [runs[h]] for h in HOSTS}
    assert [[h for h in HOSTS if runs[h] == r] for r in dict.fromkeys(runs[h] for h in HOSTS)] == WAVES
    cut_off = {h: next((r for r in hist[h] if r["run_id"] == cut), None) for h in ("n2", "n3")}
    for h, r in cut_off.items():
        if r is not None:  # n3 may have had no change yet when the controller died
            assert r["rolled_back"] and epoch(r["rolled_back"]) < epoch(hist[h][-1]["started"]), (h, r)
    assert cut_off["n2"] is not None
    assert not (sysroot(lab, "n2") / "var/lib/hostkit/lock").exists()
    # hooks in order, with the host names: the stop, then the resume from the interrupted wave
    assert fleet.calls() == ["pre n1", "post n1", "pre n2", "pre n3",  # killed in n2/n3's apply
                             "pre n2", "pre n3", "post n2", "post n3", "pre n4", "post n4",
                             "pre n5", "pre n6", "post n5", "post n6"]
    # the hosts' journals: waves strictly ordered, never more than 2 hosts changing at once
    span = {h: (epoch(hist[h][-1]["started"]), epoch(hist[h][-1]["last_change"])) for h in HOSTS}
    for earlier, later in zip(WAVES, WAVES[1:]):
        assert max(span[h][1] for h in earlier) < min(span[h][0] for h in later), span
    for h in HOSTS:
        assert sum(1 for a, b in span.values() if a <= span[h][0] <= b) <= 2, span
    # the simulated reboot: each host booted its new kernel arguments
    for h in HOSTS:
        assert "isolcpus=managed_irq," in (sysroot(lab, h) / "proc/cmdline").read_text(), h
    assert [(e["batch"], e["status"]) for e in doc["events"] if e["step"] == "batch"] == \
        [(0, "started"), (0, "done"), (1, "started"), (1, "started"), (1, "done"), (2, "started"), (2, "done")]
    # the state and the fleet report
    assert {h: (r["status"], r["audit"]["status"], r["after"]["verdict"]) for h, r in state_file(rid)["hosts"].items()} \
        == {h: ("done", "pass", "INCONCLUSIVE") for h in HOSTS}
    d = runs_dir() / rid
    report = (d / "report.md").read_text()
    assert "status: **completed**" in report and "--max-unavailable 2" in report
    assert (d / "fleet.png").read_bytes()[:4] == b"\x89PNG"

    # a finished rollout: resuming it is bad input, nothing changed
    tuned = trees(lab)
    proc = cli("rollout", "--resume", rid)
    assert proc.returncode == 2 and proc.stderr.endswith("has finished: nothing to resume\n"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and trees(lab) == tuned

    rc, aborted, proc = cli_json("rollout", "--abort", rid)
    assert rc == 0, proc.stderr[-3000:]
    assert [e["hosts"] for e in aborted["events"] if e["step"] == "rollback"][-4:] == \
        [["n5", "n6"], ["n4"], ["n2", "n3"], ["n1"]]  # newest run first: batch 3, batch 2's two waves, 1
    assert trees(lab) == fleet.before


def test_abort_of_a_rollout_killed_mid_apply_leaves_every_host_as_before(lab, fleet):
    inv = fleet()
    rid = kill_mid_apply(lab, inv, ROLLOUT, "n1")  # in the canary's apply
    assert {h: r["step"] for h, r in state_file(rid)["hosts"].items() if r["step"] != "pending"} == {"n1": "apply"}
    assert trees(lab)["n1"] != fleet.before["n1"]
    rc, doc, proc = cli_json("rollout", "--abort", rid)
    assert rc == 0, proc.stderr[-3000:]
    assert doc["status"] == "aborted" and doc["abort"]["errors"] == []
    assert trees(lab) == fleet.before
    assert not any((sysroot(lab, h) / "var/lib/hostkit/lock").exists() for h in HOSTS)
    assert in_force(history(inv)) == {h: [] for h in HOSTS}
    assert fleet.calls() == ["pre n1"]  # abort runs no hooks


def test_a_host_missing_its_slo_stops_the_rollout_and_its_whole_batch_is_rolled_back(lab, fleet):
    inv = fleet({"n4": 0.001})
    rc, doc, proc = cli_json("rollout", "-i", inv, *ROLLOUT)
    assert rc == 1, proc.stderr[-3000:]
    f = doc["failure"]
    assert (f["batch"], f["host"], f["gate"]) == (1, "n4", "smoke")
    assert f["why"].startswith("MISSED: p999 ") and "vs target 0.001 ms" in f["why"]
    after = trees(lab)
    assert after["n1"] != fleet.before["n1"]  # the canary stays tuned
    assert {h: after[h] == fleet.before[h] for h in HOSTS[1:]} == {h: True for h in HOSTS[1:]}
    assert {h: doc["hosts"][h]["status"] for h in HOSTS} == \
        {"n1": "done", "n2": "rolled_back", "n3": "rolled_back", "n4": "rolled_back", "n5": "pending",
         "n6": "pending"}
    assert in_force(history(inv)) == {"n1": [doc["hosts"]["n1"]["apply"]["run_id"]], **{h: [] for h in HOSTS[1:]}}
    # n4 back in service, then the wave that had passed taken out again (2 at a time) and rolled
    # back; n5 and n6 never touched
    assert fleet.calls() == ["pre n1", "post n1", "pre n2", "pre n3", "post n2", "post n3", "pre n4", "post n4",
                             "pre n2", "pre n3", "post n2", "post n3"]
    report = (runs_dir() / doc["rollout_id"] / "report.md").read_text()
    assert "**n4** failed the **smoke** gate: MISSED" in report


def test_a_failing_pre_batch_hook_stops_the_rollout_before_any_change(lab, fleet):
    inv = fleet()
    (fleet.dir / "fail-pre-n2").touch()
    rc, doc, proc = cli_json("rollout", "-i", inv, "--batch", "3", "--max-unavailable", "2", "--smoke-duration",
                             "2")
    assert rc == 1, proc.stderr[-3000:]
    assert (doc["failure"]["host"], doc["failure"]["gate"]) == ("n2", "pre_hook")
    assert doc["failure"]["why"].endswith("exit 3: cannot drain n2: node has unevictable pods")
    assert trees(lab) == fleet.before
    assert all(r["apply"] is None and r["before"] is None for r in doc["hosts"].values())
    assert fleet.calls() == ["pre n1", "pre n2", "post n1", "post n2"]  # drained nodes put back, nothing else
