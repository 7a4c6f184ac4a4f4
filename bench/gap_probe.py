#!/usr/bin/env python3
"""Benchmark: what the vCPU-gap probe costs a smoke run, end to end through `hostkit smoke`.

The same run (closed loop, default 2 ms model) without and with --probe-gaps, one after the other:
deschedule and rpc percentiles, throughput, and the probe's own CPU time.

    .venv/bin/python bench/gap_probe.py [--duration 10] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys


def smoke(duration: float, probe: bool) -> dict:
    argv = [sys.executable, "-m", "hostkit.cli", "smoke", "--duration", str(duration), "--json"]
    proc = subprocess.run(argv + (["--probe-gaps"] if probe else []), capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"hostkit smoke failed ({proc.returncode}): {proc.stderr[-500:]}")
    return json.loads(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--runs", type=int, default=1, help="pairs of runs (without, with)")
    args = ap.parse_args()
    print(f"{'run':<14} {'samples':>8} {'rps':>7} {'desched p99':>12} {'p999':>8} {'rpc p50':>8} {'rpc p99':>8} "
          f"{'probe CPU s':>12}")
    for _ in range(args.runs):
        for probe in (False, True):
            d = smoke(args.duration, probe)
            g = d.get("gaps") or {}
            print(f"{'with probe' if probe else 'without':<14} {d['samples']:>8} {d['throughput_rps']:>7} "
                  f"{d['deschedule_ms']['p99']:>12} {d['deschedule_ms']['p999']:>8} {d['rpc_ms']['p50']:>8} "
                  f"{d['rpc_ms']['p99']:>8} {g.get('probe_cpu_s', '-'):>12}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
