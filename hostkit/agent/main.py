"""The host agent's entry point, run ON a host: ``python3 hostkit-agent.pyz facts --sysroot DIR``.

Prints one JSON document on stdout. On bad input it prints
``{"error": ..., "exit_code": 2}`` and exits 2, so the controller can tell a
host's bad sysroot from an unreachable host. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys

from hostkit.errors import BadInput, HostkitError
from hostkit.smoke.gaps import GapOptions, add_gap_arguments
from hostkit.smoke.options import SmokeOptions, add_smoke_arguments


def _stdin_json() -> dict:
    try:
        doc = json.load(sys.stdin)
    except ValueError as exc:
        raise BadInput(f"the request on stdin is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadInput("the request on stdin is not a JSON object")
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hostkit-agent")
    sub = parser.add_subparsers(dest="cmd", required=True)
    facts = sub.add_parser("facts")
    facts.add_argument("--sysroot", default="/")
    hist = sub.add_parser("history")
    hist.add_argument("--sysroot", default="/")
    rb = sub.add_parser("rollback")
    rb.add_argument("--sysroot", default="/")
    rb.add_argument("--run-id")
    rb.add_argument("--all", action="store_true")
    rb.add_argument("--check", action="store_true")
    rb.add_argument("--diff", action="store_true")
    ad = sub.add_parser("adopt")
    ad.add_argument("--sysroot", default="/")
    sm = sub.add_parser("smoke")
    sm.add_argument("--sysroot", default="/")
    add_smoke_arguments(sm)
    # The work of the modules hostkit_changes (one role's parsed changes) and hostkit_lock, for their
    # action plugins (hostkit.actions): the request as JSON on stdin, the module's result on stdout.
    for name in ("changes", "lock"):
        sub.add_parser(name).add_argument("--sysroot", default="/")
    # The host's own drift run (its systemd timer, role drift_timer): the baseline copy beside the
    # journal, the smoke run's options as the controller's drift would pass them.
    dr = sub.add_parser("drift")
    dr.add_argument("--sysroot", default="/")
    dr.add_argument("--baseline", required=True)
    dr.add_argument("--prom")
    dr.add_argument("--no-smoke", action="store_true")
    add_smoke_arguments(dr)
    gp = sub.add_parser("gaps")
    gp.add_argument("--sysroot", default="/")
    add_gap_arguments(gp)
    args = parser.parse_args(argv)
    try:
        sysroot = args.sysroot or "/"
        if args.cmd == "changes":
            from hostkit.agent.changes.change_set import run_request

            doc = run_request(_stdin_json(), sysroot)
        elif args.cmd == "lock":
            from hostkit.agent.lock import run_request

            doc = run_request(_stdin_json(), sysroot)
        elif args.cmd == "facts":
            from hostkit.facts import gather

            doc = gather(sysroot)
        elif args.cmd == "adopt":
            from hostkit.agent.adopt import adopt
            from hostkit.facts.sysroot import Sysroot

            Sysroot(sysroot)
            doc = adopt(sysroot)
        elif args.cmd == "smoke":
            from hostkit.facts import gather
            from hostkit.smoke.session import run_smoke

            doc = run_smoke(SmokeOptions.from_args(args), facts=gather(sysroot))
        elif args.cmd == "drift":
            from hostkit.drift.on_host import judge

            opts = None if args.no_smoke else SmokeOptions.from_args(args)
            doc = judge(args.baseline, sysroot, opts, args.prom)
        elif args.cmd == "gaps":
            from hostkit.smoke.gaps import public, run_probe

            doc = public(run_probe(GapOptions.from_args(args)))
        elif args.cmd == "history":
            from hostkit.agent.journal import history
            from hostkit.facts.sysroot import Sysroot

            Sysroot(sysroot)  # the same checks as facts: an existing Linux root
            doc = history(sysroot)
        else:
            from hostkit.agent.rollback import rollback
            from hostkit.facts.sysroot import Sysroot

            Sysroot(sysroot)
            doc = rollback(sysroot, run_id=args.run_id, all_runs=args.all, check=args.check, diff=args.diff)
    except HostkitError as exc:
        json.dump({"error": str(exc), "exit_code": exc.exit_code}, sys.stdout)
        sys.stdout.write("\n")
        return exc.exit_code
    json.dump(doc, sys.stdout)
    sys.stdout.write("\n")
    if args.cmd in ("changes", "lock"):
        return 1 if doc.get("failed") else 0
    if args.cmd == "drift":
        return 0 if doc["status"] == "ok" else 1
    if args.cmd == "rollback":
        from hostkit.agent.rollback import restored

        return 0 if restored(doc) else 1
    return 0
