"""``hostkit baseline``: keep each host's effective state, plan and latency signature."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, fleet_args, json_arg, signature_args

DESCRIPTION = """\
Record, per host, what hostkit reads of it (boot, kernel, IRQs, CPU power, services, topology,
packages and microcode, and the BIOS where it has a BMC: its facts), the plan of its profile, and
its latency signature (one smoke run: the deschedule histogram, its sample count and how long it
ran) as a new baseline on the controller,
.hostkit/baselines/HOST/NAME.json. A baseline is never overwritten: a name that exists is bad
input; who, when and why are journaled beside it (journal.log). hostkit drift compares against it."""

EPILOG = """\
exit codes: 0 ok, 1 a host failed (facts or smoke), 2 bad input (nothing written)

examples:
  hostkit baseline -i inventory.yml --name accepted --why "after tuning, ticket 123"
  hostkit baseline -i inventory.yml --no-smoke         state only"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = command(
        sub, "baseline", "record each host's effective state and tail latency as a baseline", DESCRIPTION, EPILOG
    )
    fleet_args(p)
    json_arg(p)
    p.add_argument("--name", metavar="NAME", help="the baseline's name (default: the time, YYYYmmddTHHMMSSZ)")
    p.add_argument("--why", default="", metavar="TEXT", help="why this baseline (journaled with who and when)")
    p.add_argument("--profile", metavar="NAME|FILE", help="the profile the plan is made with (default: each host's)")
    signature_args(p)
    return p


def run(args) -> int:
    result = api.baseline(
        api.BaselineRequest(
            inventory=args.inventory,
            limit=args.limit,
            forks=args.forks,
            name=args.name,
            why=args.why,
            profile=args.profile,
            smoke=not args.no_smoke,
            smoke_duration=args.smoke_duration,
            smoke_requests=args.smoke_requests,
        )
    )
    if args.json:
        output.emit_json(result.to_dict())
        return result.rc
    for host, doc in sorted(result.hosts.items()):
        if doc["status"] != "ok":
            print(f"{host}: FAILED {doc['error']}")
            continue
        lat = doc["latency"]
        got = f"p999 {lat['p999_ms']} ms over {lat['samples']:,} samples" if lat else "no latency (--no-smoke)"
        print(f"{host}: baseline {doc['baseline']} ({got}) in {doc['path']}")
    return result.rc
