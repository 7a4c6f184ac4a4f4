"""``hostkit history``: hostkit's runs on each host, from the hosts' journals."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, fleet_args

HEADER = ["host", "run", "changes", "roles", "last change", "rolled back"]


def add_parser(sub) -> argparse.ArgumentParser:
    hi = command(sub, "history", "list hostkit runs per host (from the hosts' journals)", raw=False)
    fleet_args(hi)
    return hi


def run(args) -> int:
    result = api.history(api.HistoryRequest(args.inventory, args.limit))
    if args.json:
        output.emit_json(result.to_dict())
        return result.rc
    rows = []
    for host, r in result.hosts.items():
        if not r.ok:
            rows.append(output.error_row(host, r.status, r.error, 80, len(HEADER)))
            continue
        if not r.doc["runs"]:
            rows.append([host, "(no hostkit runs)", "", "", "", ""])
        for run in r.doc["runs"]:
            rows.append([host, run["run_id"] + (" (adopted)" if run["adopted"] else ""), str(run["changes"]),
                         ",".join(run["roles"]), run["last_change"] or "-", run["rolled_back"] or "-"])
    output.print_table(HEADER, rows, title="hostkit history")
    return result.rc
