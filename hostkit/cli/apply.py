"""``hostkit apply``: plan and apply the tuning through Ansible, journaled, with check and diff."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, fleet_args, json_arg, plan_args, reboot_args
from hostkit.plan.render import after_bios_line

ROLES = api.APPLY_ROLES


def add_parser(sub) -> argparse.ArgumentParser:
    ap = command(
        sub,
        "apply",
        "plan and apply the tuning through Ansible (journaled, check/diff)",
        "One Ansible run (playbooks/apply.yml): facts -> plan -> roles, per host;\n"
        "first the BIOS where the inventory gives a host a BMC (hostkit_bmc: docs/bios.md),\n"
        "power-cycled once through the BMC with --reboot, then planned for the OS it booted.\n"
        "Every change is journaled on the host first; --check changes nothing.\n"
        "Bad input on any host stops every host before any change (exit 2);\n"
        "a host refused by a guard is reported and not touched; the others proceed.",
        f"roles (for --tags): {', '.join(ROLES[:5])},\n{', '.join(ROLES[5:])}. Run artifacts: .hostkit/runs/<run-id>/",
    )
    fleet_args(ap)
    json_arg(ap)
    plan_args(ap)
    ap.add_argument("--check", action="store_true", help="report what would change; change nothing")
    ap.add_argument("--diff", action="store_true", help="show file and value diffs")
    ap.add_argument("--tags", metavar="ROLES", help="comma-separated roles to run")
    ap.add_argument(
        "--verify-smoke",
        action="store_true",
        help="smoke-test every changed host after the apply; a host whose plan changes kernel "
        "arguments is refused (exit 3, nothing changed) unless --reboot boots them first",
    )
    ap.add_argument(
        "--revert-on-fail",
        action="store_true",
        help="with --verify-smoke: roll a host back automatically when it misses its SLO",
    )
    ap.add_argument(
        "--smoke-duration",
        type=float,
        default=None,
        metavar="S",
        help="seconds of smoke per host (default: the smoke test's default run, a credible p999; "
        "a p999 needs 10,000 samples, ~22 s with the default 2 ms model)",
    )
    reboot_args(ap, "kernel arguments changed (a BIOS change: one power cycle through the BMC)")
    return ap


def run(args) -> int:
    req = api.ApplyRequest(
        inventory=args.inventory,
        limit=args.limit,
        profile=args.profile,
        force=args.force,
        check=args.check,
        diff=args.diff,
        tags=args.tags,
        forks=args.forks,
        verify_smoke=args.verify_smoke,
        smoke_duration=args.smoke_duration,
        revert_on_fail=args.revert_on_fail,
        reboot=args.reboot,
        reboot_timeout=args.reboot_timeout,
    )
    if not args.json:
        output.note(f"gathering facts and planning ({args.inventory})...")
    roles = args.tags.split(",") if args.tags else ROLES
    with output.task_progress(quiet=args.json, roles=ROLES, total_roles=len(roles)) as progress:
        result = api.apply(req, on_event=progress)
    if args.json:
        output.emit_json(result.to_dict())
    else:
        print_result(result, diff=args.diff)
    return result.rc


def print_result(result: api.ApplyResult, diff: bool = False, title: str = "hostkit apply") -> None:
    rows = []
    for n, h in result.hosts.items():
        failed_roles = [r for r, v in h.roles.items() if v["failed"]]
        rows.append(
            [
                n,
                h.status.upper() if h.status in ("failed", "unreachable", "refused") else h.status,
                str(h.changed),
                ",".join(failed_roles) or "-",
                "yes" if h.reboot_required else "no",
                str(len(h.would_run)),
                (h.msg or "; ".join(h.refused) or "")[:100],
            ]
        )
    output.print_table(
        ["host", "status", "changed", "failed roles", "reboot required", "would run", "message"],
        rows,
        title=f"{title}{' --check' if result.check else ''}: run {result.run_id}",
    )
    for n, h in result.hosts.items():
        if h.bios is not None:
            print(f"{n}: BIOS {bios_line(h.bios, result.check)}")
        if h.after_bios is not None:
            print(f"{n}: {after_bios_line(h.after_bios)}")
        for reason in h.refused:
            print(f"{n}: REFUSED: {reason}")
        for reason in h.refused_parts:
            print(f"{n}: REFUSED (this part only, the rest applied): {reason}")
        for r in h.irq_refused:
            print(f"{n}: REFUSED by the kernel (tolerated, left as it was): {r['path']}: {r['error']}")
        if h.status in ("failed", "unreachable") and h.msg:
            print(f"{n}: {h.status.upper()}: {h.msg}")
    if diff:
        for n, h in result.hosts.items():
            for d in h.diffs:
                print(
                    f"--- {n}: {d.get('before_header', d['task'])}\n{output.unified_diff(d.get('before'), d.get('after'))}"
                )
    for host, v in result.smoke.items():
        print(f"smoke {host}: {v.verdict}" + (f"; rolled back ({v.rollback})" if v.rollback else ""))


def bios_line(bios: dict, check: bool) -> str:
    """One line of a host's BIOS step (hostkit.tuning.bios's result): each intent's state, then the
    power cycle and its steps' wall times."""
    if "plan" not in bios:
        return f"FAILED: {bios.get('msg')}"
    states = [
        f"{s['attribute']} {s['current']} -> {s['value']} "
        + (
            "(in effect)"
            if s["state"] == "ok"
            else "(pending)"
            if s["state"] == "pending"
            else "(would PATCH)"
            if check
            else "(PATCHed)"
        )
        for s in bios["plan"]["steps"]
    ]
    cycle = ""
    if bios.get("cycles"):
        cycle = (
            "; 1 power cycle through the BMC ("
            + ", ".join(f"{s['step']} {s['seconds']} s" for s in bios.get("steps", []))
            + ")"
        )
    elif bios.get("pending") and not check:
        cycle = "; applied at the next power cycle (--reboot)"
    return ("; ".join(states) or "no bios intent in the profile") + cycle
