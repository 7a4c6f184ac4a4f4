#!/usr/bin/env python3
"""Benchmark: full `hostkit apply` on 1, 4 and 8 lab hosts (real sshd on loopback).

Each size gets a fresh lab of identical hosts (the seed's EPYC 9634 fixture) so the
work per host is the same; the wall time of the whole command (facts, plan, apply)
is printed per size with the ratio 8-host/1-host. Target on a 2-core machine: <= 3.

    .venv/bin/python bench/apply_fleet.py [--sizes 1,4,8] [--fixture NAME] [--port 2340]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from fleet_lab import fleets, machine_cpu_seconds, print_ratio


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,4,8")
    ap.add_argument("--fixture", default="epyc-9634-nps1")
    ap.add_argument("--port", type=int, default=2340)
    args = ap.parse_args()
    results = {}
    for n, lab, env in fleets([int(s) for s in args.sizes.split(",")], args.fixture, args.port, "bench"):
        cpu0 = machine_cpu_seconds()
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "hostkit.cli", "apply", "-i", str(lab.inventory),
                               "--json"], capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t
        cpu = machine_cpu_seconds() - cpu0
        doc = json.loads(proc.stdout)
        statuses = sorted({h["status"] for h in doc["hosts"].values()})
        changed = sum(h["changed"] for h in doc["hosts"].values())
        results[n] = wall
        print(f"{n:>2} host(s): {wall:6.1f} s  (exit {proc.returncode}, status {','.join(statuses)}, "
              f"{changed} changed tasks; machine CPU {cpu:5.1f} s = {100 * cpu / wall / os.cpu_count():.0f}% "
              f"of {os.cpu_count()} cores, {cpu / n:.1f} CPU-s per host)", flush=True)
    print_ratio(results, 3)
    if len(results) > 1:
        print("note: lab hosts run their modules on this machine's cores too; near 100% busy means the ratio is\n"
              "      bounded by CPU here, where a real fleet runs the remote half on each host")
    return 0


if __name__ == "__main__":
    sys.exit(main())
