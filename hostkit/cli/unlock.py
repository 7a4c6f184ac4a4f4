"""``hostkit unlock``: clear the host-side lock a dead run left behind."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, fleet_args, json_arg


def add_parser(sub) -> argparse.ArgumentParser:
    ul = command(
        sub,
        "unlock",
        "clear the host-side lock left by a dead run",
        "Every apply takes <sysroot>/var/lib/hostkit/lock on each host; a second apply is refused naming "
        "the holder. A run that died keeps its lock: this clears it (any holder, or only --run-id's).",
        raw=False,
    )
    fleet_args(ul)
    json_arg(ul)
    ul.add_argument("--run-id", metavar="ID", help="only release the lock when this run holds it")
    return ul


def run(args) -> int:
    result = api.unlock(
        api.UnlockRequest(inventory=args.inventory, limit=args.limit, forks=args.forks, run_id=args.run_id)
    )
    if args.json:
        output.emit_json(result.to_dict())
    else:
        for h in sorted(result.released.keys() | result.failed.keys()):
            print(
                f"{h}: "
                + (
                    f"FAILED {result.failed[h]}"
                    if h in result.failed
                    else ("lock released" if result.released[h] else "not locked")
                )
            )
    return result.rc
