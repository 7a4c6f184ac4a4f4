"""A latency drift measured live, with the state unchanged: ``hostkit baseline`` then ``hostkit drift
--inject-stall`` through real Ansible runs and real smoke runs on this machine (the inventory's one
host is this machine through ``ansible_connection: local``, its facts read from a fixture sysroot,
so the state cannot move between the two runs).

The smoke's injected stalls (SIGSTOP of the worker, 100 ms every 0.5 s) are a tail that moved by a
known amount: drift must call it MOVED, with the interval, the tail test's p-value and both runs'
sample counts, and find no state difference. Its run is a measurement, so it runs alone with the
other ``measures`` tests (make test's first suite). The statistics themselves, and the ten runs
of an unchanged host that must raise no alarm, are tests/unit/test_drift.py's, on generated samples.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.measures

REPO = Path(__file__).resolve().parents[2]
REQUESTS = "11000"  # above the 10,000 samples a p999 verdict needs, whatever this machine's speed


def hostkit(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}
    env.update(HOME=str(cwd), HOSTKIT_STATE_DIR=str(cwd / ".hostkit"), PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "hostkit.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env=env,
    )


@pytest.fixture(scope="module")
def me(tmp_path_factory) -> Path:
    from hostkit.lab import fixtures

    work = tmp_path_factory.mktemp("drift-live")
    root = fixtures.materialize("epyc-9634-nps1", work / "root")
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": "/usr/bin/python3",
        "hostkit_sysroot": str(root),
    }
    (work / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": {"me": host}}}))
    return work


def test_injected_stalls_are_a_tail_that_moved_with_the_state_unchanged(me):
    base = hostkit("baseline", "-i", "inventory.yml", "--name", "calm", "--smoke-requests", REQUESTS, "--json", cwd=me)
    assert base.returncode == 0, base.stdout[-2000:] + base.stderr[-2000:]
    assert json.loads(base.stdout)["hosts"]["me"]["latency"]["samples"] >= 10_000

    proc = hostkit(
        "drift", "-i", "inventory.yml", "--smoke-requests", REQUESTS, "--inject-stall", "100@0.5", "--json", cwd=me
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(proc.stdout)["hosts"]["me"]
    lat = doc["latency"]
    print(f"\n{lat['basis']}")
    assert doc["verdict"] == "latency drifted" and doc["differences"] == [] and doc["cause"] is None, doc
    assert lat["verdict"] == "MOVED" and lat["injected"] == {"stall_ms": 100.0, "every_s": 0.5}, lat
    assert lat["p_worse"] < 0.001 and lat["interval"][0] >= 1.5, lat
    assert lat["samples_before"] >= 10_000 and lat["samples_now"] >= 10_000, lat
    assert lat["above_now"] > lat["above_before"] and lat["p999_ms_now"] >= 50, lat  # the stalls are the tail
    assert lat["duration_s_before"] > 0 and lat["duration_s_now"] > 0, lat
    assert lat["basis"].startswith("calibration, 100 ms stalls injected every 0.5 s: p999 "), lat["basis"]
