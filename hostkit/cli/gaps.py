"""``hostkit gaps``: the vCPU-gap probe, on this machine or on every inventory host: clock gaps the
guest kernel did not account for, and co-stops (several vCPUs stopped at once by the hypervisor)."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, fleet_args, json_arg
from hostkit.smoke.gaps import GapOptions, add_gap_arguments, text_summary

DESCRIPTION = """\
One spinner per CPU reads the monotonic clock in a tight loop and records every gap over
--threshold-us, with how much of it the kernel charged to the spinner as CPU time. A gap the
kernel charged (it believed the spinner ran) went below the guest: a hypervisor that stopped the
vCPU, or firmware. Such gaps on two or more vCPUs at once are co-stops: the hypervisor stopped the
VM (co-scheduling of a wide VM, an overcommitted host). Gaps the kernel did not charge (another
task or an interrupt took the CPU) are counted as kernel-explained. Spinners run SCHED_IDLE by
default: they use only time no other task wants, and their CPU time is reported."""

EPILOG = """\
examples:
  hostkit gaps --duration 6                                every CPU of this machine, 6 s
  hostkit gaps --cpus 0 --threshold-us 1000 --duration 3   CPU 0 alone, gaps over 1 ms
  hostkit gaps -i inventory.yml --json                     every host (lab hosts one at a time)"""


def add_parser(sub) -> argparse.ArgumentParser:
    gp = command(
        sub, "gaps", "vCPU-gap probe: stalls the guest kernel cannot see, co-stops across vCPUs", DESCRIPTION, EPILOG
    )
    fleet_args(
        gp,
        local="the probe runs on this machine",
        inventory_help="probe every inventory host (through the agent)",
        forks_default="every host at once; lab hosts, which share this machine, one at a time",
    )
    json_arg(gp)
    add_gap_arguments(gp)
    return gp


def run(args) -> int:
    req = api.GapsRequest(
        inventory=args.inventory, limit=args.limit, forks=args.forks, options=GapOptions.from_args(args)
    )
    if not args.inventory:
        req.options.probed_cpus()  # bad --cpus for this machine: exit 2 before anything starts
    if not args.json:
        output.note(
            f"probing {'every host of ' + args.inventory if args.inventory else 'this machine'} for "
            f"{req.options.duration_s:g} s..."
        )
    result = api.gaps(req)
    if args.json:
        output.emit_json(result.to_dict())
        return result.rc
    for host, r in result.hosts.items():
        print(f"{host}: " + (text_summary(r.doc) if r.ok else f"{r.status}: {r.error}"))
    return result.rc
