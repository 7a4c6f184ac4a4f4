"""``hostkit plan``: facts + profile -> the tuning plan per host; nothing is changed."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, fleet_args, json_arg, plan_args


def add_parser(sub) -> argparse.ArgumentParser:
    default, *others = api.profile_names()
    pl = command(
        sub,
        "plan",
        "compute the tuning plan (CPU partition, cmdline, sysctls, ...)",
        "Facts + profile -> a concrete tuning plan, per host. Nothing is changed.\n"
        "Exit 3 when a guard refuses (isolation on a VM or deceptive topology,\n"
        "a node without housekeeping, nothing isolated); exit 2 on bad input.",
        f"profiles: {default} (default), {', '.join(others)},\n"
        "or a YAML file (`extends: NAME` builds on a shipped one).\n"
        "inventory vars: hostkit_profile chooses the profile, hostkit_overrides overrides\n"
        "any profile key or pins isolated/housekeeping/irq_cpus, e.g.\n"
        '  hostkit_overrides: {isolated: "8-63", reserve_per_node: 3}\n\n'
        "examples:\n"
        "  hostkit fixtures make boot-arch-uki uki    an Arch host booted from a unified kernel image\n"
        "  hostkit plan --sysroot uki                 its kernel arguments refused, the rest planned\n"
        "  hostkit fixtures make kvm-small kvm        a small KVM guest\n"
        "  hostkit plan --sysroot kvm --profile virtual-guest --json",
    )
    src = pl.add_mutually_exclusive_group()
    src.add_argument("--sysroot", default="/", metavar="DIR", help="plan for the host under DIR (default /)")
    fleet_args(
        pl,
        local="the plan is made from one root on this machine (--sysroot, default /)",
        where=src,
        inventory_help="plan for every inventory host (facts over SSH)",
    )
    plan_args(pl, "override the profile (default: hostkit_profile or bare-metal-inference)")
    json_arg(pl)
    return pl


def run(args) -> int:
    from hostkit.plan.render import PLAN_HEADER, after_bios_line, plan_rows, plan_text, plan_title

    result = api.plan(
        api.PlanRequest(
            inventory=args.inventory,
            limit=args.limit,
            sysroot=args.sysroot,
            profile=args.profile,
            force=args.force,
            forks=args.forks,
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
        con.print(output.table(PLAN_HEADER, plan_rows(doc), title=plan_title(host, doc)))
        print(plan_text(doc))
        if r.after_bios:
            print(after_bios_line(r.after_bios))
        print()
    return result.rc
