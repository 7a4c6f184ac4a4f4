"""``hostkit audit``: each host's live state against its plan, over testinfra (drift, pending
reboots, cross-layer consistency)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, fleet_args, plan_args


def add_parser(sub) -> argparse.ArgumentParser:
    au = command(
        sub,
        "audit",
        "audit hosts with testinfra: drift, pending reboots, cross-layer consistency",
        "Compares each host's live state with its plan (computed as apply does), over\n"
        "one testinfra SSH connection per host (host keys verified), hosts in parallel.\n"
        "Exit 1 on drift or an unreachable host; a pending reboot alone warns (exit 0)\n"
        "unless --strict.",
    )
    fleet_args(au)
    plan_args(au, force_help="plan isolation on VMs as apply --force did")
    au.add_argument("--junit", metavar="FILE", help="JUnit XML: one testcase per host x check")
    au.add_argument("--strict", action="store_true", help="a pending reboot is a failure")
    return au


HEADER = ["host", "status", "pass", "drift", "pending reboot", "tolerated", "n/a", "error"]


def run(args) -> int:
    from hostkit.audit.runner import STEPS, junit_xml

    with output.task_progress(quiet=args.json, roles=list(STEPS), total_roles=len(STEPS), what="steps") as progress:
        result = api.audit(
            api.AuditRequest(
                inventory=args.inventory, limit=args.limit, profile=args.profile, force=args.force, strict=args.strict
            ),
            on_event=progress,
        )
    if args.junit:
        Path(args.junit).write_text(junit_xml(result.hosts))
    if args.json:
        output.emit_json(result.to_dict())
        return result.rc
    rows = []
    for host, r in result.hosts.items():
        c = r.get("counts") or {}
        rows.append(
            [
                host,
                r["status"] if r["status"] == "pass" else r["status"].upper(),
                *(str(c.get(k, "")) for k in ("pass", "drift", "pending_reboot", "tolerated", "not_applicable")),
                (r.get("error") or "")[:70],
            ]
        )
    output.print_table(HEADER, rows, title="hostkit audit")
    for host, r in result.hosts.items():
        for f in r.get("findings", []):
            if f["status"] in ("drift", "pending_reboot"):
                print(
                    f"{host}: {f['status'].upper()} {f['check']}: expected {f['expected']}, got {f['actual']} "
                    f"({f['source']})" + (f" - {f['note']}" if f.get("note") else "")
                )
    if result.pending_reboot:
        print(
            "WARNING: reboot pending on some hosts (planned kernel arguments not booted yet)"
            + ("; --strict makes that a failure" if not args.strict else ""),
            file=sys.stderr,
        )
    return result.rc
