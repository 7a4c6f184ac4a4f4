#!/usr/bin/env python3
"""Benchmark: `hostkit audit` of 1 and 8 lab hosts (real sshd on loopback), wall time and ratio.

Hosts are audited in parallel, one testinfra SSH connection per host reused by every check.
Target on a 2-core machine: 8-host/1-host <= 2.

    .venv/bin/python bench/audit_fleet.py [--sizes 1,8] [--fixture NAME] [--port 2360]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hostkit.lab.lab import Lab  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,8")
    ap.add_argument("--fixture", default="epyc-9634-nps1")
    ap.add_argument("--port", type=int, default=2360)
    ap.add_argument("--runs", type=int, default=3, help="audits per size (median reported)")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, HOSTKIT_STATE_DIR=str(Path(tmp) / "state"))
        for n in [int(s) for s in args.sizes.split(",")]:
            lab = Lab(Path(tmp) / f"lab{n}")
            lab.up(host_specs=[(f"audit-{i}", args.fixture) for i in range(1, n + 1)], port=args.port)
            try:
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
            finally:
                lab.down()
    if 1 in results and max(results) > 1:
        big = max(results)
        ratio = results[big] / results[1]
        print(f"ratio {big}-host/1-host: {ratio:.2f}  (target <= 2.00: {'met' if ratio <= 2 else 'MISSED'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
