"""``hostkit plan``: facts + profile -> the tuning plan per host; nothing is changed."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import ansible_output_args, command, plan_args


def add_parser(sub) -> argparse.ArgumentParser:
    pl = command(
        sub,
        "plan",
        "compute the tuning plan (CPU partition, cmdline, sysctls, ...)",
        "Facts + profile -> a concrete tuning plan, per host. Nothing is changed.\n"
        "Exit 3 when a guard refuses (isolation on a VM or deceptive topology,\n"
        "a node without housekeeping, nothing isolated); exit 2 on bad input.",
        "profiles: bare-metal-inference (default), vmware-guest, baseline, or a YAML path.\n"
        "inventory vars: hostkit_profile chooses the profile, hostkit_overrides overrides\n"
        "any profile key or pins isolated/housekeeping/irq_cpus, e.g.\n"
        '  hostkit_overrides: {isolated: "8-63", reserve_per_node: 3}',
    )
    src = pl.add_mutually_exclusive_group()
    src.add_argument("--sysroot", default="/", metavar="DIR", help="plan for the host under DIR (default /)")
    src.add_argument("-i", "--inventory", metavar="INVENTORY", help="plan for every inventory host (facts over SSH)")
    pl.add_argument("--limit", metavar="PATTERN")
    plan_args(pl, "override the profile (default: hostkit_profile or bare-metal-inference)")
    pl.add_argument("--json", action="store_true")
    ansible_output_args(pl)
    return pl


def run(args) -> int:
    from hostkit.plan.render import PLAN_HEADER, plan_rows, plan_text

    result = api.plan(
        api.PlanRequest(
            inventory=args.inventory, limit=args.limit, sysroot=args.sysroot, profile=args.profile, force=args.force
        )
    )
    if args.json:
        output.emit_json(result.to_dict())
        return result.rc
    con = output.console()
    for host, r in result.hosts.items():
        if r.status != "ok":
            con.print(f"[bold]{output.escape(host)}[/bold]: {output.escape(r.status)}: {output.escape(r.error)}")
            continue
        doc = r.plan.to_dict()
        con.print(
            output.table(
                PLAN_HEADER,
                plan_rows(doc),
                title=f"{host}: profile {doc['profile']}" + (" (REFUSED)" if r.refused else ""),
            )
        )
        print(plan_text(doc))
        print()
    return result.rc
