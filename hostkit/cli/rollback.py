"""``hostkit rollback``: restore exactly what hostkit changed, newest change first; ``--adopt``
records a host tuned by another tool as a baseline first."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, fleet_args, json_arg, plan_args, reboot_args
from hostkit.errors import BadInput

HEADER = ["host", "status", "runs", "restored", "unchanged", "re-check", "reboot required", "errors"]
SUMMARY = "restore exactly what hostkit changed, newest change first"
DESCRIPTION = """\
From each host's journal, restore previous runtime values and file contents
(mode and owner included; files hostkit created are removed). Default: the
latest run; --all: every run back to the first. A second rollback changes
nothing. The host is re-checked against the restored values afterwards.
A host with a BMC (hostkit_bmc) and a BIOS journal also gets its BIOS
attributes PATCHed back (not with --run-id: the BIOS journal is of no run);
with --reboot it is power-cycled once through the BMC, which boots its
restored kernel arguments too, and its OS is checked against the BIOS."""


def add_parser(sub) -> argparse.ArgumentParser:
    rb = command(sub, "rollback", SUMMARY, DESCRIPTION)
    fleet_args(rb)
    json_arg(rb)
    which = rb.add_mutually_exclusive_group()
    which.add_argument("--run-id", metavar="ID", help="roll back this run (see hostkit history)")
    which.add_argument("--all", action="store_true", help="roll back every hostkit run, newest first")
    rb.add_argument("--check", action="store_true", help="report what would be restored; change nothing")
    rb.add_argument("--diff", action="store_true", help="show file diffs and value changes")
    reboot_args(rb, "boot configuration was restored")
    rb.add_argument(
        "--adopt",
        action="store_true",
        help="host tuned by another tool: record its current tuning as a baseline run, then apply "
        "the profile (--profile or hostkit_profile), so even that can be rolled back",
    )
    plan_args(rb, "with --adopt: the profile to apply", "with --adopt: allow isolation on a VM")
    return rb


def run(args) -> int:
    if args.adopt:
        if args.run_id or args.all:
            raise BadInput("--adopt takes no --run-id or --all: it records a new baseline, then applies")
        return _adopt(args)
    with output.task_progress(quiet=args.json) as progress:
        result = api.rollback(
            api.RollbackRequest(
                inventory=args.inventory,
                limit=args.limit,
                run_id=args.run_id,
                all=args.all,
                check=args.check,
                diff=args.diff,
                reboot=args.reboot,
                reboot_timeout=args.reboot_timeout,
                forks=args.forks,
            ),
            on_event=progress,
        )
    if args.json:
        output.emit_json(result.to_dict())
        return result.rc
    if args.diff:
        for host, r in result.hosts.items():
            for a in r.doc["actions"] if r.ok else []:
                if a.get("diff"):
                    print(f"--- {host}: {a['path']}\n{output.unified_diff(a['diff']['before'], a['diff']['after'])}")
                elif a["kind"] == "value":
                    print(f"--- {host}: {a['path']}: {a['from']} -> {a['to']}")
    output.print_table(
        HEADER,
        output.host_rows(result.hosts, HEADER, lambda host, doc: _restored(host, doc, result.restored(host))),
        title=f"hostkit rollback{' --check' if args.check else ''}",
    )
    for host, b in result.bios.items():
        print(f"{host}: BIOS {_bios_line(b, args.check)}")
    for host, r in result.reboots.items():
        print(f"{host}: reboot {r.status}" + (f": booted {r.cmdline}" if r.cmdline else f": {r.msg}"))
    return result.rc


def _bios_line(b: dict, check: bool) -> str:
    """One line of a host's BIOS rollback (hostkit bios rollback's document)."""
    if b["status"] != "ok":
        return f"{b['status'].upper()}: {b.get('error')}"
    restore = ", ".join(f"{k}={v}" for k, v in b["restore"].items()) or "nothing to PATCH back"
    done = "would PATCH back" if check else "PATCHed back"
    os = b.get("os") or {}
    after = (
        f"; {b['cycles']} power cycle, the OS shows {os['numa_per_socket']} NUMA node(s) per socket"
        if b.get("cycles") and os.get("checked")
        else "; pending until the next power cycle (--reboot)"
        if b["restore"] and not b.get("cycles") and not check
        else ""
    )
    return f"{done}: {restore}{after}"


def _restored(host: str, d: dict, restored: bool) -> list[list[str]]:
    return [
        [
            host,
            ("would change" if d["check"] and d["changed"] else "changed" if d["changed"] else "unchanged")
            if restored
            else "FAILED",
            ",".join(d["runs"]) or "-",
            str(len(d["actions"])),
            str(d["unchanged"]),
            "-"
            if d["verify"] is None
            else ("ok" if d["verify"]["ok"] else f"{len(d['verify']['mismatches'])} mismatch(es)"),
            "yes" if d["reboot_required"] else "no",
            "; ".join(e["path"] + ": " + e["error"] for e in d["errors"])[:80],
        ]
    ]


def _adopt(args) -> int:
    result = api.adopt(
        api.AdoptRequest(
            inventory=args.inventory,
            limit=args.limit,
            profile=args.profile,
            force=args.force,
            forks=args.forks,
            check=args.check,
            diff=args.diff,
        )
    )
    if args.json:
        output.emit_json(result.to_dict())
        return result.rc
    rows = [
        [h, v.adopted_run or "FAILED", str(len(v.adopted_files)), v.apply_status, "yes" if v.reboot_required else "no"]
        for h, v in result.hosts.items()
    ]
    output.print_table(
        ["host", "adopted baseline run", "files recorded", "apply", "reboot required"],
        rows,
        title="hostkit rollback --adopt",
    )
    print(f"`hostkit rollback -i {args.inventory}` now returns these hosts to the adopted state.")
    return result.rc
