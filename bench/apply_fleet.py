#!/usr/bin/env python3
"""Benchmark: full `hostkit apply` on 1 and 8 lab hosts (real sshd on loopback), wall time and ratio.

Every size gets its own lab of identical hosts (the epyc-9634-nps1 fixture), all up at once; the
sizes alternate run by run so that both see the same load, and each run is the whole command a
user runs (facts, plan, apply). Between runs `hostkit rollback` restores the hosts (not timed), so
every apply does the same work. One untimed `hostkit facts` per lab first: the hosts already
hold the agent (copied once per agent version, as on a fleet after its first run). Printed per
size: the median wall time, the machine's load and CPU, the Ansible runs and their slowest tasks;
then the ratio 8-host/1-host against the target (<= 3 on this 2-core machine), and the module calls
each host ran per apply and per rollback, and a one-host apply against one Ansible module round trip
to the same host (`ansible HOST -m ping`, median of 5, measured in the same run; target <= 5x).

    .venv/bin/python bench/apply_fleet.py [--sizes 1,8] [--runs 3] [--fixture NAME] [--port 2340]
"""

from __future__ import annotations

import argparse
import os
import sys

from fleet_lab import (
    ansible_runs,
    fleets,
    hostkit,
    load,
    machine_cpu_seconds,
    median,
    module_calls,
    print_ratio,
    round_trip,
    run_names,
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,8")
    ap.add_argument("--runs", type=int, default=3, help="applies per size, alternating sizes (median reported)")
    ap.add_argument("--fixture", default="epyc-9634-nps1")
    ap.add_argument("--port", type=int, default=2340)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    walls: dict[int, list[float]] = {n: [] for n in sizes}
    calls: dict[str, set[int]] = {"apply": set(), "rollback": set()}
    with fleets(sizes, args.fixture, args.port, "apply") as (labs, env):
        for n in sizes:
            hostkit(env, "facts", "-i", str(labs[n].inventory))
        for r in range(args.runs):
            for n in sizes:
                inv = str(labs[n].inventory)
                before, load0, cpu0 = run_names(env), load(), machine_cpu_seconds()
                wall, rc, doc = hostkit(env, "apply", "-i", inv)
                cpu = machine_cpu_seconds() - cpu0
                walls[n].append(wall)
                hosts = (doc or {}).get("hosts", {})
                statuses = sorted({h["status"] for h in hosts.values()})
                print(
                    f"run {r + 1}, {n:>2} host(s): {wall:6.1f} s  exit {rc}, status {','.join(statuses)}, "
                    f"{sum(h['changed'] for h in hosts.values())} changed tasks; load {load0}; machine CPU "
                    f"{cpu:5.1f} s = {100 * cpu / wall / os.cpu_count():.0f}% of {os.cpu_count()} cores, "
                    f"{cpu / n:.1f} CPU-s per host",
                    flush=True,
                )
                for name, h in hosts.items():
                    if h["status"] not in ("ok", "changed"):
                        print(f"    {name}: {h['status']}: {h.get('msg')}")
                for run in ansible_runs(env, before):
                    slow = "; ".join(f"{t[:40]} {s:.1f} s" for t, s in run["slowest"])
                    print(f"    {run['playbook']}: {run['span']:.1f} s, {run['tasks']} tasks (slowest: {slow})")
                calls["apply"].update(module_calls(env, before).values())
                before = run_names(env)
                hostkit(env, "rollback", "-i", inv)
                calls["rollback"].update(module_calls(env, before).values())
        if 1 in labs:
            one = labs[1].hosts()[0].name
            ping = round_trip(str(labs[1].inventory), one)
    results = {n: median(w) for n, w in walls.items()}
    print(
        "module calls per host (facts, plan and apply; rollback): "
        + ", ".join(f"{k} {'/'.join(map(str, sorted(v)))}" for k, v in calls.items())
    )
    if 1 in results:
        print(
            f"one-host apply {results[1]:.1f} s vs one module round trip {ping:.2f} s (ansible -m ping, median of 5): "
            f"{results[1] / ping:.1f}x (target <= 5x: {'met' if results[1] / ping <= 5 else 'MISSED'})"
        )
    for n in sizes:
        print(f"{n:>2} host(s): median {results[n]:.1f} s of {args.runs} ({', '.join(f'{w:.1f}' for w in walls[n])})")
    print_ratio(results, 3)
    if len(results) > 1:
        print(
            "note: lab hosts run their modules on this machine's cores too; near 100% busy means the ratio is\n"
            "      bounded by CPU here, where a real fleet runs the remote half on each host"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
