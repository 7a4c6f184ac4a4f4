"""``hostkit history``: hostkit's runs on each host, from the hosts' journals."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, fleet_args, json_arg


def add_parser(sub) -> argparse.ArgumentParser:
    hi = command(sub, "history", "list hostkit runs per host (from the hosts' journals)", raw=False)
    fleet_args(hi)
    json_arg(hi)
    return hi


HEADER = ["host", "run", "changes", "roles", "last change", "rolled back"]


def run(args) -> int:
    result = api.history(api.HistoryRequest(inventory=args.inventory, limit=args.limit, forks=args.forks))
    if args.json:
        output.emit_json(result.to_dict())
        return result.rc
    output.print_table(HEADER, output.host_rows(result.hosts, HEADER, _runs), title="hostkit history")
    return result.rc


def _runs(host: str, doc: dict) -> list[list[str]]:
    return [
        [
            host,
            run["run_id"] + (" (adopted)" if run["adopted"] else ""),
            str(run["changes"]),
            ",".join(run["roles"]),
            run["last_change"] or "-",
            run["rolled_back"] or "-",
        ]
        for run in doc["runs"]
    ] or [[host, "(no hostkit runs)", "", "", "", ""]]
