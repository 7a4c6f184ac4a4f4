"""hostkit rollout on the sshd lab, for what only real hosts show: a controller killed mid-apply
(SIGKILL: no handler runs) leaves a host-side lock and a cut-off run in the hosts' journals; the
resume releases that run's lock, rolls the run back, and applies every host exactly once; the abort
then puts every tree back byte for byte. Real Ansible over real SSH to three sysroot hosts, real
hook scripts, trees hashed before and after. The loop's decisions (batches, waves, hook order,
gates, rollbacks, resume and abort) are tests/unit/test_rollout_loop.py's, against a fake api.

``--canary 1 --batch 2 --max-unavailable 1``: batches n1 | n2,n3, the second in two waves. Isolation
is on, so every host's plan changes its kernel arguments and the lab's simulated reboot
(``--reboot``) rewrites ``proc/cmdline`` and ``sys/devices/system/cpu/isolated`` as the booted
kernel would, journaled. Smoke runs are 2 s: INCONCLUSIVE (too few samples), which does not stop a
rollout.
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

HOSTS = ["n1", "n2", "n3"]
ROLLOUT = ["--batch", "2", "--canary", "1", "--max-unavailable", "1", "--reboot", "--smoke-duration", "2"]
BATCHES = [["n1"], ["n2", "n3"]]
WAVES = [["n1"], ["n2"], ["n3"]]  # one host out at a time
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
            v["hostkit_overrides"] = {
                "isolation": isolation,
                "smoke": {"target_p999_ms": (targets or {}).get(h, 1000.0)},
            }
        path = tmp_path / "inventory.yml"
        path.write_text(yaml.safe_dump(inv, sort_keys=False))
        return path

    inventory.before = before
    inventory.dir = tmp_path
    inventory.calls = lambda: (
        [" ".join(line.split()[:2]) for line in (tmp_path / "calls.log").read_text().splitlines()]
        if (tmp_path / "calls.log").exists()
        else []
    )
    yield inventory
    changed = [h for h, t in trees(lab).items() if t != before[h]]
    if changed:
        proc = cli("rollback", "-i", lab.inventory, "--limit", ",".join(changed), "--all")
        assert proc.returncode == 0, proc.stdout[-2000:]
    assert trees(lab) == before


def history(inv) -> dict[str, list[dict]]:
    rc, doc, proc = cli_json("history", "-i", inv)
    assert rc == 0, proc.stderr[-2000:]
    return {h: doc["hosts"][h]["runs"] for h in HOSTS}


def in_force(hist: dict[str, list[dict]]) -> dict[str, list[str]]:
    """Per host, the runs in its journal not rolled back."""
    return {h: [r["run_id"] for r in runs if not r["rolled_back"]] for h, runs in hist.items()}


def state_file(rid: str) -> dict:
    return json.loads((runs_dir() / rid / "rollout.json").read_text())


def epoch(stamp: str) -> float:
    """A journal time (``2026-11-30T09:20:03.123456Z``) in seconds since the epoch."""
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC).timestamp()


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
    proc = subprocess.Popen(
        [sys.executable, "-m", "hostkit.cli", "rollout", "-i", str(inv), *args, "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
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
    assert s["status"] == "running" and [b["status"] for b in s["batches"]] == ["done", "running"]
    assert {h: r["step"] for h, r in s["hosts"].items()} == {"n1": "done", "n2": "apply", "n3": "pending"}
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
    cut_off = next(r for r in hist["n2"] if r["run_id"] == cut)
    assert cut_off["rolled_back"] and epoch(cut_off["rolled_back"]) < epoch(hist["n2"][-1]["started"]), cut_off
    assert not (sysroot(lab, "n2") / "var/lib/hostkit/lock").exists()
    assert fleet.calls() == [
        "pre n1",
        "post n1",
        "pre n2",  # killed in n2's apply
        "pre n2",
        "post n2",
        "pre n3",
        "post n3",
    ]
    # the hosts' journals: waves strictly ordered, one host changing at a time
    span = {h: (epoch(hist[h][-1]["started"]), epoch(hist[h][-1]["last_change"])) for h in HOSTS}
    for earlier, later in zip(WAVES, WAVES[1:]):
        assert max(span[h][1] for h in earlier) < min(span[h][0] for h in later), span
    # the simulated reboot: each host booted its new kernel arguments
    for h in HOSTS:
        assert "isolcpus=managed_irq," in (sysroot(lab, h) / "proc/cmdline").read_text(), h
    # the state and the fleet report
    assert {
        h: (r["status"], r["audit"]["status"], r["after"]["verdict"]) for h, r in state_file(rid)["hosts"].items()
    } == dict.fromkeys(HOSTS, ("done", "pass", "INCONCLUSIVE"))
    d = runs_dir() / rid
    assert "status: **completed**" in (d / "report.md").read_text()
    assert (d / "fleet.png").read_bytes()[:4] == b"\x89PNG"

    # a finished rollout: resuming it is bad input, nothing changed
    tuned = trees(lab)
    proc = cli("rollout", "--resume", rid)
    assert proc.returncode == 2 and proc.stderr.endswith("has finished: nothing to resume\n"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and trees(lab) == tuned

    rc, aborted, proc = cli_json("rollout", "--abort", rid)
    assert rc == 0, proc.stderr[-3000:]
    assert [e["hosts"] for e in aborted["events"] if e["step"] == "rollback"][-3:] == [["n3"], ["n2"], ["n1"]]
    assert trees(lab) == fleet.before
    assert not any((sysroot(lab, h) / "var/lib/hostkit/lock").exists() for h in HOSTS)
