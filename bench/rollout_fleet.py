#!/usr/bin/env python3
"""Benchmark: `hostkit rollout` against the collection's `ansible-playbook hostkit.tuning.rollout` on
the same lab fleet (real sshd on loopback), wall time and ratio, measured in the same run.

Both faces do the same job on the same hosts: batches of 2, the tune role's steps per batch (facts,
plan, smoke "before", apply with the lab's simulated reboot, audit, smoke gate), 2 s smoke runs
against a target they cannot miss (INCONCLUSIVE, not a gate). The faces alternate run by run so that
both see the same load; between runs the fleet is rolled back (`hostkit rollout --abort`, or
`hostkit rollback` for the playbook's runs; not timed). One untimed `hostkit facts` first: the hosts
then hold the agent. Printed per face: each run's wall time and exit, the machine's load; for
`hostkit rollout` also its Ansible runs and the module calls each host ran (the playbook's run is
not under hostkit's state directory); then the ratio hostkit/playbook (target <= 1.25: the CLI's
state file, hooks and report cost little beside the playbook's work).

    .venv/bin/python bench/rollout_fleet.py [--hosts 4] [--runs 2] [--fixture NAME] [--port 2380]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml
from fleet_lab import ansible_runs, fleets, hostkit, load, median, module_calls, run_names


def playbook(env: dict, inventory: str, collections: str) -> tuple[float, int]:
    """``ansible-playbook -i INV hostkit.tuning.rollout`` with the same settings: (wall, exit code)."""
    cmd = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        inventory,
        "hostkit.tuning.rollout",
        "-e",
        "hostkit_batch=2",
        "-e",
        "hostkit_smoke_duration=2",
        "-e",
        "hostkit_reboot=true",
    ]
    t = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=dict(env, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_NOCOLOR="1")
    )
    wall = time.perf_counter() - t
    if proc.returncode:
        print(f"ansible-playbook: exit {proc.returncode}: {proc.stdout.strip()[-600:]}")
    return wall, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--runs", type=int, default=2, help="rollouts per face, alternating faces (median reported)")
    ap.add_argument("--fixture", default="boot-debian12")
    ap.add_argument("--port", type=int, default=2380)
    args = ap.parse_args()
    n = args.hosts
    walls: dict[str, list[float]] = {"hostkit rollout": [], "ansible-playbook": []}
    calls: set[int] = set()
    runs_per_rollout: set[int] = set()
    with fleets([n], args.fixture, args.port, "ro") as (labs, env):
        lab = labs[n]
        inv = yaml.safe_load(lab.inventory.read_text())
        for v in inv["all"]["children"]["lab"]["hosts"].values():
            v["hostkit_overrides"] = {"smoke": {"target_p999_ms": 1000.0}}  # 2 s runs: INCONCLUSIVE, never MISSED
        inventory = Path(env["HOSTKIT_STATE_DIR"]).parent / "inventory.yml"
        inventory.write_text(yaml.safe_dump(inv, sort_keys=False))
        collections = str(Path(env["HOSTKIT_STATE_DIR"]).parent / "collections")
        _, rc, _ = hostkit(env, "collection", "install", "-p", collections)
        if rc:
            print(f"hostkit collection install -p {collections}: exit {rc}; the playbook face cannot run")
            return 1
        hostkit(env, "facts", "-i", str(inventory))
        for r in range(args.runs):
            # hostkit rollout, then its abort (every host back as it was)
            before, load0 = run_names(env), load()
            wall, rc, doc = hostkit(
                env, "rollout", "-i", str(inventory), "--batch", "2", "--smoke-duration", "2", "--reboot"
            )
            walls["hostkit rollout"].append(wall)
            status = (doc or {}).get("status")
            runs = ansible_runs(env, before)
            runs_per_rollout.add(len(runs))
            calls.update(module_calls(env, before).values())
            print(
                f"run {r + 1}, hostkit rollout:  {wall:6.1f} s  exit {rc}, {status}; load {load0}; "
                f"{len(runs)} Ansible runs ({', '.join(sorted({x['playbook'] for x in runs}))})",
                flush=True,
            )
            if doc and doc.get("rollout_id"):
                hostkit(env, "rollout", "--abort", doc["rollout_id"])
            # the collection's playbook, then a rollback of its run on each host
            load0 = load()
            wall, rc = playbook(env, str(inventory), collections)
            walls["ansible-playbook"].append(wall)
            print(f"run {r + 1}, ansible-playbook: {wall:6.1f} s  exit {rc}; load {load0}", flush=True)
            hostkit(env, "rollback", "-i", str(inventory))
    results = {face: median(w) for face, w in walls.items()}
    for face, w in walls.items():
        print(f"{face:>16}: median {results[face]:.1f} s of {args.runs} ({', '.join(f'{x:.1f}' for x in w)})")
    print(
        f"hostkit rollout: {'/'.join(map(str, sorted(runs_per_rollout)))} Ansible runs per rollout of {n} hosts, "
        f"module calls per host {'/'.join(map(str, sorted(calls)))}"
    )
    ratio = results["hostkit rollout"] / results["ansible-playbook"]
    print(
        f"ratio hostkit rollout / ansible-playbook rollout.yml: {ratio:.2f}  "
        f"(target <= 1.25: {'met' if ratio <= 1.25 else 'MISSED'})"
    )
    print(f"machine: {os.cpu_count()} cores; lab hosts run their modules on them too")
    return 0


if __name__ == "__main__":
    sys.exit(main())
