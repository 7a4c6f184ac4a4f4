#!/usr/bin/env python3
"""Benchmark: `hostkit audit` of 1 and 8 lab hosts (real sshd on loopback), wall time and ratio.

Every size gets its own lab of identical hosts, all up at once; the sizes alternate run by run so
that both see the same load. One untimed audit per lab first: the hosts then hold the agent
(copied once per agent version, as on a fleet after its first audit). Each host is then one
remote command per audit (the agent's facts and every file the checks read). Target on this
2-core machine: 8-host/1-host <= 2.

    .venv/bin/python bench/audit_fleet.py [--sizes 1,8] [--runs 5] [--fixture NAME] [--port 2360]
"""

from __future__ import annotations

import argparse
import sys

from fleet_lab import fleets, hostkit, load, median, print_ratio


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,8")
    ap.add_argument("--fixture", default="epyc-9634-nps1")
    ap.add_argument("--port", type=int, default=2360)
    ap.add_argument("--runs", type=int, default=5, help="audits per size, alternating sizes (median reported)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    walls: dict[int, list[float]] = {n: [] for n in sizes}
    loads: list[str] = []
    with fleets(sizes, args.fixture, args.port, "audit") as (labs, env):
        for n in sizes:
            hostkit(env, "audit", "-i", str(labs[n].inventory))
        for _ in range(args.runs):
            for n in sizes:
                loads.append(load())
                wall, rc, doc = hostkit(env, "audit", "-i", str(labs[n].inventory))
                walls[n].append(wall)
                hosts = (doc or {}).get("hosts", {})
                bad = {h: r["status"] for h, r in hosts.items() if r["status"] in ("unreachable", "failed", "refused")}
                if bad or len(hosts) != n:
                    print(f"{n} host(s): exit {rc}, not audited: {bad or 'no hosts'}")
    results = {n: median(w) for n, w in walls.items()}
    for n in sizes:
        print(
            f"{n:>2} host(s): median {results[n]:6.2f} s of {args.runs} ({', '.join(f'{w:.2f}' for w in walls[n])})",
            flush=True,
        )
    print(f"load (1 min) before each audit: {' '.join(loads)}")
    print_ratio(results, 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
