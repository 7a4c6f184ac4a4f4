#!/usr/bin/env python3
"""Benchmark: the state part of `hostkit drift` against one `hostkit audit` of the same lab hosts,
and repeated full drift runs (state and latency) on an unchanged lab host: the false alarms.

Part 1. A lab of N identical sshd hosts (default 8, the epyc-9634-nps1 fixture); one untimed
audit first (the hosts then hold the agent), a baseline with --no-smoke; then `hostkit drift
--no-smoke` and `hostkit audit` alternate run by run, the whole commands a user runs. Printed: the
medians and the ratio drift/audit against the target (<= 1.5).

Part 2. On the first host, a baseline with its latency (the smoke test's default run: 20,000
requests), then --repeat full `hostkit drift` runs with nothing changed. Printed: each run's
verdict, the p999s with their sample counts, the interval and the p-value; the false alarms are
the runs that said anything but the same state and a SAME or INCONCLUSIVE tail.

    .venv/bin/python bench/drift_fleet.py [--hosts 8] [--runs 5] [--repeat 10] [--port 2380]
"""

from __future__ import annotations

import argparse
import sys

from fleet_lab import fleets, hostkit, load, median


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--fixture", default="epyc-9634-nps1")
    ap.add_argument("--port", type=int, default=2380)
    ap.add_argument("--runs", type=int, default=5, help="drift/audit pairs, alternating (median reported)")
    ap.add_argument("--repeat", type=int, default=10, help="full drift runs on an unchanged host")
    args = ap.parse_args()
    failed = False
    with fleets([args.hosts], args.fixture, args.port, "drift") as (labs, env):
        inv = str(labs[args.hosts].inventory)
        hostkit(env, "audit", "-i", inv)
        wall, rc, _ = hostkit(env, "baseline", "-i", inv, "--no-smoke", "--name", "state")
        assert rc == 0, "baseline failed"
        walls: dict[str, list[float]] = {"drift": [], "audit": []}
        loads = []
        for _ in range(args.runs):
            loads.append(load())
            w, rc, doc = hostkit(env, "drift", "-i", inv, "--no-smoke", "--against", "state")
            walls["drift"].append(w)
            if rc != 0:
                print(f"  drift said {rc}: {doc}")
                failed = True
            w, rc, _ = hostkit(env, "audit", "-i", inv)
            walls["audit"].append(w)
        d, a = median(walls["drift"]), median(walls["audit"])
        print(f"{args.hosts} lab hosts ({args.fixture}), {args.runs} runs each, load {', '.join(loads)}")
        print(f"  hostkit drift --no-smoke: median {d:.2f} s  (runs {', '.join(f'{x:.2f}' for x in walls['drift'])})")
        print(f"  hostkit audit:            median {a:.2f} s  (runs {', '.join(f'{x:.2f}' for x in walls['audit'])})")
        print(f"  ratio drift/audit: {d / a:.2f} (target <= 1.5) {'ok' if d / a <= 1.5 else 'MISSED'}")
        failed |= d / a > 1.5

        host = sorted(h.name for h in labs[args.hosts].hosts())[0]
        wall, rc, doc = hostkit(env, "baseline", "-i", inv, "--limit", host, "--name", "tail")
        assert rc == 0, f"baseline with latency failed: {doc}"
        print(f"\n{host}: baseline with latency in {wall:.1f} s: {doc['hosts'][host]['latency']}")
        alarms = 0
        for i in range(args.repeat):
            wall, rc, doc = hostkit(env, "drift", "-i", inv, "--limit", host, "--against", "tail")
            h = doc["hosts"][host]
            lat = h["latency"]
            alarm = h["verdict"] not in ("same", "same state, latency INCONCLUSIVE")
            alarms += alarm
            print(
                f"  run {i + 1:2d} ({wall:.1f} s, load {load()}): {h['verdict']}; {lat['verdict']}: "
                f"{lat.get('basis', '')}{'  <- ALARM' if alarm else ''}"
            )
        print(f"  false alarms: {alarms} of {args.repeat}")
        failed |= alarms > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
