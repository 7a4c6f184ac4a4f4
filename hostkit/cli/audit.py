"""``hostkit audit``: each host's live state against its plan, over testinfra (drift, pending
reboots, cross-layer consistency)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, fleet_args, json_arg, plan_args


def add_parser(sub) -> argparse.ArgumentParser:
    au = command(
        sub,
        "audit",
        "audit hosts with testinfra: drift, pending reboots, cross-layer consistency",
        "Compares each host's live state with its plan (computed as apply does), over\n"
        "one testinfra SSH connection per host (host keys verified), hosts in parallel.\n"
        "A host with a BMC (hostkit_bmc) also has its BIOS read: bios.<intent> pass,\n"
        "pending_reboot (set, applied at the next reset) or drift, and bios.cross_layer\n"
        "(the BIOS in effect against the booted OS's NUMA nodes per socket, SMT).\n"
        "Exit 1 on drift or an unreachable host; a pending reboot alone warns (exit 0)\n"
        "unless --strict.",
    )
    fleet_args(au)
    json_arg(au)
    plan_args(au, force_help="plan isolation on VMs as apply --force did")
    au.add_argument("--junit", metavar="FILE", help="JUnit XML: one testcase per host x check")
    au.add_argument("--strict", action="store_true", help="a pending reboot is a failure")
    return au


HEADER = ["host", "status", "pass", "drift", "pending reboot", "tolerated", "n/a", "error"]


def run(args) -> int:
    steps = api.audit_steps()
    with output.task_progress(quiet=args.json, roles=list(steps), total_roles=len(steps), what="steps") as progress:
        result = api.audit(
            api.AuditRequest(
                inventory=args.inventory,
                limit=args.limit,
                profile=args.profile,
                force=args.force,
                forks=args.forks,
                strict=args.strict,
            ),
            on_event=progress,
        )
    if args.junit:
        Path(args.junit).write_text(result.junit_xml())
    if args.json:
        output.emit_json(result.to_dict())
    else:
        print_result(result, args.strict)
    return result.rc


# A finding's line in the text: what is off the plan, and what the audit tolerated (a warning).
SHOWN = {"drift": "DRIFT", "pending_reboot": "PENDING_REBOOT", "tolerated": "TOLERATED"}


def print_result(result: api.AuditResult, strict: bool) -> None:
    """The table, then every line the JSON holds that a reader must see in full: a host's refusal or
    error, each finding off the plan, each one tolerated."""
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
        if r.get("error"):
            print(f"{host}: {r['status'].upper()}: {r['error']}")
        for f in r.get("findings") or []:
            if f["status"] in SHOWN:
                print(
                    f"{host}: {SHOWN[f['status']]} {f['check']}: expected {f['expected']}, got {f['actual']} "
                    f"({f['source']})" + (f" - {f['note']}" if f.get("note") else "")
                )
    if result.pending_reboot:
        print(
            "WARNING: reboot pending on some hosts (planned kernel arguments not booted yet)"
            + ("; --strict makes that a failure" if not strict else ""),
            file=sys.stderr,
        )
