#!/usr/bin/env python3
"""Benchmark: `hostkit audit` of 1 and 8 lab hosts (real sshd on loopback), wall time and ratio.

Hosts are audited in parallel, one testinfra SSH connection per host reused by every check.
Target on a 2-core machine: 8-host/1-host <= 2.

    .venv/bin/python bench/audit_fleet.py [--sizes 1,8] [--fixture NAME] [--port 2360]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from fleet_lab import fleets, print_ratio


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,8")
    ap.add_argument("--fixture", default="epyc-9634-nps1")
    ap.add_argument("--port", type=int, default=2360)
    ap.add_argument("--runs", type=int, default=3, help="audits per size (median reported)")
    args = ap.parse_args()
    results = {}
    for n, lab, env in fleets([int(s) for s in args.sizes.split(",")], args.fixture, args.port, "audit"):
        walls = []
        for _ in range(args.runs):
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "hostkit.cli", "audit", "-i", str(lab.inventory),
                                   "--json"], capture_output=True, text=True, env=env)
            walls.append(time.perf_counter() - t)
            doc = json.loads(proc.stdout)
            checks = sum(len(r.get("findings", [])) for r in doc["hosts"].values())
        walls.sort()
        results[n] = walls[len(walls) // 2]
        print(f"{n:>2} host(s): {results[n]:6.2f} s median of {args.runs} ({checks} findings, exit "
              f"{proc.returncode}: untuned hosts drift by design)", flush=True)
    print_ratio(results, 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
