#!/usr/bin/env python3
"""Benchmark: what the vCPU-gap probe costs a smoke run, end to end through `hostkit smoke`.

The same run (closed loop, default 2 ms model) without and with --probe-gaps, one after the other:
deschedule and rpc percentiles, throughput, the probe's own CPU time, and each figure with the
probe as a ratio of the one without (the baseline, measured in the same pair); the load average
first (the figures are only as quiet as the machine).

    .venv/bin/python bench/gap_probe.py [--duration 10] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def smoke(duration: float, probe: bool) -> dict:
    argv = [sys.executable, "-m", "hostkit.cli", "smoke", "--duration", str(duration), "--json"]
    proc = subprocess.run(argv + (["--probe-gaps"] if probe else []), capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"hostkit smoke failed ({proc.returncode}): {proc.stderr[-500:]}")
    return json.loads(proc.stdout)


def _ratio(a, b) -> str:
    return f"{a / b:.2f}x" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--runs", type=int, default=1, help="pairs of runs (without, with)")
    args = ap.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    cols = (
        ("samples", lambda d: d["samples"]),
        ("rps", lambda d: d["throughput_rps"]),
        ("desched p99", lambda d: d["deschedule_ms"]["p99"]),
        ("p999", lambda d: d["deschedule_ms"]["p999"]),
        ("rpc p50", lambda d: d["rpc_ms"]["p50"]),
        ("rpc p99", lambda d: d["rpc_ms"]["p99"]),
    )
    print(f"{'run':<14} " + " ".join(f"{name:>12}" for name, _ in cols) + f" {'probe CPU s':>12}")
    for _ in range(args.runs):
        base = smoke(args.duration, False)
        probed = smoke(args.duration, True)
        for label, d in (("without", base), ("with probe", probed)):
            g = d.get("gaps") or {}
            print(
                f"{label:<14} " + " ".join(f"{get(d):>12}" for _, get in cols) + f" {g.get('probe_cpu_s', '-'):>12}",
                flush=True,
            )
        print(
            f"{'with/without':<14} "
            + " ".join(f"{_ratio(get(probed), get(base)):>12}" for _, get in cols)
            + f" {'':>12}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
