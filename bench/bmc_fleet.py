#!/usr/bin/env python3
"""Benchmark: `hostkit bios facts` and `hostkit bios plan` on 1 and 8 lab BMCs, wall time and ratio.

Each host has a BMC of its own (hostkit/lab/bmc: sushy-tools' emulator with hostkit's driver, TLS
and basic authentication, serving the HPE ProLiant DL385 Gen10 Plus v2 fixture), as each server
has in a rack. Every run is the whole command a user runs (the inventory read, the profiles, the
BMCs contacted --forks at a time, the JSON written); the sizes alternate run by run so that both see
the same load. Printed per command and size: the median wall time, then the ratio 8-host/1-host
against the target (<= 2), the Redfish requests per host by method, and every resource a host read
more than once in a run (the target: none).

    .venv/bin/python bench/bmc_fleet.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from hostkit.lab import bmc as lab_bmc

FIXTURE = "hpe-dl385-gen10plus-v2"
TARGET = 2.0


def inventory(path: Path, bmcs: dict[str, lab_bmc.LabBmc]) -> str:
    hosts = {
        h: {"hostkit_bmc": b.host_var(h), "hostkit_overrides": {"bios": {"numa_per_socket": 2}}}
        for h, b in bmcs.items()
    }
    path.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    return str(path)


def run(action: str, inv: str, cwd: Path) -> tuple[float, dict]:
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "hostkit.cli", "bios", action, "-i", inv, "--json"],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "HOSTKIT_STATE_DIR": str(cwd / "state")},
    )
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"hostkit bios {action} failed ({proc.returncode}): {proc.stderr[-1000:]}")
    return wall, json.loads(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="runs per command and size, alternating (median reported)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hostkit-bench-bmc-"))
    names = [f"bm{i}" for i in range(1, 9)]
    bmcs = {h: lab_bmc.start({h: FIXTURE}, work / h) for h in names}
    try:
        invs = {1: inventory(work / "one.yml", {names[0]: bmcs[names[0]]}), 8: inventory(work / "eight.yml", bmcs)}
        print(f"hostkit bios on lab BMCs (one emulator process per host, {FIXTURE}), {args.runs} runs per size")
        failed = False
        for action in ("facts", "plan"):
            walls: dict[int, list[float]] = {1: [], 8: []}
            last: dict[int, dict] = {}
            for _ in range(args.runs):
                for n in (1, 8):
                    wall, doc = run(action, invs[n], work)
                    walls[n].append(wall)
                    last[n] = doc
            m1, m8 = statistics.median(walls[1]), statistics.median(walls[8])
            ratio = m8 / m1
            print(f"\n{action}:")
            print(f"  1 host:  median {m1:.2f} s  (runs {', '.join(f'{w:.2f}' for w in walls[1])})")
            print(f"  8 hosts: median {m8:.2f} s  (runs {', '.join(f'{w:.2f}' for w in walls[8])})")
            print(f"  ratio 8/1: {ratio:.2f} (target <= {TARGET}) {'ok' if ratio <= TARGET else 'MISSED'}")
            per_host = {h: d["requests"] for h, d in last[8]["hosts"].items()}
            gets = sorted({r.get("GET", 0) for r in per_host.values()})
            twice = {h: r["read_twice"] for h, r in per_host.items() if r["read_twice"]}
            print(
                f"  Redfish requests per host: GET {', '.join(map(str, gets))}; other methods: "
                f"{sorted({k for r in per_host.values() for k in r if k not in ('GET', 'read_twice')}) or 'none'}"
            )
            print(f"  resources read twice in a run: {twice or 'none'}")
            failed |= ratio > TARGET or bool(twice)
        return 1 if failed else 0
    finally:
        for b in bmcs.values():
            b.stop()


if __name__ == "__main__":
    sys.exit(main())
