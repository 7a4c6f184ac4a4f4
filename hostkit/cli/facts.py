"""``hostkit facts``: a host's CPU/NUMA/IRQ/kernel state, from a sysroot or every inventory host."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, fleet_args, json_arg


def add_parser(sub) -> argparse.ArgumentParser:
    f = command(
        sub,
        "facts",
        "discover a host's CPU/NUMA/IRQ/kernel state",
        "Read topology, virtualization, kernel, cpufreq, IRQ and NIC facts.\n"
        "Locally from a sysroot (default /), or from every inventory host over SSH.",
        "JSON fields: topology{sockets,cores_per_socket,threads_per_core,cpus,online,isolated,\n"
        "numa_nodes,numa_per_socket,l3_groups}, virtualization{hypervisor,deceptive_topology,\n"
        "reasons}, kernel{cmdline,sched_rt_runtime_us,...}, cpufreq, irqs, nics, steal.\n"
        "The full shape: docs/contracts.md.",
    )
    src = f.add_mutually_exclusive_group()
    src.add_argument(
        "--sysroot",
        default="/",
        metavar="DIR",
        help="read /proc and /sys under DIR (a fixture tree or another root); default /",
    )
    fleet_args(
        f,
        local="facts come from one root on this machine (--sysroot, default /)",
        where=src,
        inventory_help="gather from every host of an Ansible inventory through ansible-runner",
    )
    json_arg(f)  # with --json -i, -v also keeps the progress on stderr
    return f


def run(args) -> int:
    from hostkit.facts.render import FLEET_HEADER, fleet_row, summary

    req = api.FactsRequest(inventory=args.inventory, limit=args.limit, sysroot=args.sysroot, forks=args.forks)
    err = output.console(stderr=True)
    progress = None
    if req.inventory and (not args.json or args.verbose):

        def progress(host: str, task: str, status: str) -> None:
            err.print(f"[dim]{output.escape(host)}[/dim]: {output.escape(status)}", highlight=False)

    result = api.facts(req, on_event=progress)
    if args.json:
        output.emit_json(result.to_dict())
    elif result.run is None:
        print(summary(result.hosts["localhost"].doc))
    else:
        rows = output.host_rows(result.hosts, FLEET_HEADER, lambda h, doc: [fleet_row(h, doc)], width=60)
        output.print_table(FLEET_HEADER, rows, title=f"hostkit facts: {len(result.hosts)} host(s)")
        for host in result.failed:
            err.print(f"{host}: {result.hosts[host].status}: {result.hosts[host].error}", markup=False)
        run = result.run
        err.print(
            f"run {run.run_id}: {len(result.hosts) - len(result.failed)} ok, {len(result.failed)} "
            f"failed/unreachable ({run.seconds:.1f} s); artifacts in {run.private_data_dir}"
        )
    return result.rc
