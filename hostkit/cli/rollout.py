"""``hostkit rollout``: the tuning over a fleet in batches, each batch gated by an audit and the
smoke test's SLO; stops on the first bad host and rolls that batch back; resumable."""

from __future__ import annotations

import argparse

from hostkit.cli import output
from hostkit.cli.args import ansible_output_args, command, json_arg, plan_args, reboot_args
from hostkit.errors import BadInput

SUMMARY = "roll the tuning out in batches, gated by audit and smoke SLO; resume or abort"
DESCRIPTION = """\
Hosts in batches (the --canary hosts first, then --batch N hosts or P% of the
fleet at a time, inventory order); with --max-unavailable M a batch goes out in
waves of at most M hosts, each wave back in service before the next one starts.
Per batch (per wave), the hosts in parallel:
  pre-batch hooks -> smoke "before" -> apply (--reboot: where the plan needs it)
  -> audit -> smoke "after" against the SLO -> post-batch hooks.
With --drift-gate, after the pre-batch hooks (an upgrade, say) and before hostkit
changes anything: hostkit drift against the hosts' baselines (hostkit baseline);
a host whose state drifted or whose tail moved stops the rollout, the drift named.
A host failing a gate (hook, drift, apply, audit, smoke MISSED or a failed smoke run)
stops the rollout: its batch is rolled back (--reboot: with reboot where the boot
configuration came back) and the report says which gate failed and why. A failing
pre-batch hook stops before anything changed on the batch. INCONCLUSIVE (too few
samples for a credible p999) is reported, not a gate, as with apply --verify-smoke.

Hooks come from the inventory (host or group vars, one command or a list), are
rendered with Jinja2 and run on this machine per host, bounded by --hook-timeout:
  hostkit_pre_batch:  "kubectl drain {{ inventory_hostname }} --ignore-daemonsets --delete-emptydir-data"
  hostkit_post_batch: "kubectl uncordon {{ inventory_hostname }}"

The state is rewritten atomically after every step: .hostkit/runs/<rollout-id>/rollout.json
(HOSTKIT_STATE_DIR moves .hostkit), with report.md, fleet.prom and fleet.png beside it."""
EPILOG = """\
examples:
  hostkit rollout -i inv.yml --batch 25% --canary 1 --reboot
  hostkit rollout -i inv.yml --batch 50% --max-unavailable 2 --reboot   at most 2 nodes drained at once
  hostkit rollout -i inv.yml --limit gpu_nodes --batch 2 --max-failures 1 --target-p999-ms 0.5
  hostkit rollout -i inv.yml --batch 1 --drift-gate accepted   an upgrade hook, judged before the apply
  hostkit rollout --resume 20261130T061500Z-1a2b3c     go on after a stop, crash or Ctrl-C
  hostkit rollout --abort 20261130T061500Z-1a2b3c      roll back what it changed, newest batch first

exit codes: 0 every host rolled out (or aborted cleanly), 1 a gate failed or a host was rolled
back, 2 bad input (nothing changed), 3 a host's plan was refused by a safety guard"""

# A new rollout's settings with a value: flag, type, metavar, help. Each defaults to None, so that
# one not given keeps RolloutRequest's default and one given with --resume/--abort is refused.
SETTINGS = (
    ("--canary", int, "K", "the first K hosts (inventory order) form the first batch (default 0)"),
    (
        "--max-failures",
        int,
        "N",
        "failed hosts tolerated (each rolled back alone) before the rollout stops and "
        "rolls back its batch (default 0: the first failed host stops it)",
    ),
    (
        "--max-unavailable",
        int,
        "M",
        "never more than M hosts out of service at once (from a host's pre-batch hook "
        "to its post-batch hooks, a failed host left drained included): a larger batch "
        "goes out in waves of M; a stop still rolls back the whole batch (default: a "
        "batch)",
    ),
    ("--target-p999-ms", float, "MS", "the smoke gate's p999 target for every host (default: each host's profile)"),
    (
        "--smoke-duration",
        float,
        "S",
        "seconds per smoke run (default: the smoke test's default run, a credible "
        "p999; a short run is INCONCLUSIVE, which does not stop the rollout)",
    ),
    ("--hook-timeout", float, "S", "seconds each hook command may run before it is killed and fails (default 600)"),
)

SETTING_NAMES = tuple(flag[2:].replace("-", "_") for flag, *_ in SETTINGS)
# What only a new rollout takes: --resume and --abort refuse these.
NEW_ONLY = ("inventory", "limit", "batch", "reboot", "profile", "force", "drift_gate") + SETTING_NAMES


def add_parser(sub) -> argparse.ArgumentParser:
    ro = command(sub, "rollout", SUMMARY, DESCRIPTION, EPILOG)
    ro.add_argument("-i", "--inventory", metavar="INVENTORY", help="the fleet (a new rollout)")
    ro.add_argument("--limit", metavar="PATTERN", help="only hosts matching this Ansible pattern")
    ro.add_argument(
        "--batch", metavar="N|P%", help="hosts per batch after the canaries: N, or P%% of the fleet (rounded up)"
    )
    for flag, kind, metavar, text in SETTINGS:
        ro.add_argument(flag, type=kind, default=None, metavar=metavar, help=text)
    reboot_args(
        ro,
        "kernel arguments changed (and, on a rollback, whose boot configuration came back)",
        pending="a reboot still pending after it fails the audit gate (without --reboot it is only reported)",
        timeout_default=None,
        lost="a host that does not come back fails its gate",
    )
    ro.add_argument(
        "--drift-gate",
        nargs="?",
        const="",
        default=None,
        metavar="BASELINE",
        help="after each wave's pre-batch hooks, before any change: hostkit drift against BASELINE "
        "(default: each host's newest; a missing one is bad input before anything runs); a host "
        "whose state drifted or whose tail moved stops the rollout",
    )
    plan_args(ro)
    which = ro.add_mutually_exclusive_group()
    which.add_argument("--resume", metavar="RUN", help="go on with this rollout: finished hosts are not redone")
    which.add_argument("--abort", metavar="RUN", help="roll back every apply this rollout made, newest batch first")
    json_arg(ro)  # the rollout's state
    ansible_output_args(ro)
    return ro


def request(args):
    from hostkit.rollout.driver import RolloutRequest

    if not args.inventory:
        raise BadInput("a new rollout needs -i INVENTORY (or --resume RUN / --abort RUN)")
    if not args.batch:
        raise BadInput("a new rollout needs --batch N or --batch P%")
    given = {
        k: getattr(args, k) for k in SETTING_NAMES + ("reboot_timeout",) if getattr(args, k) is not None
    }  # the others keep RolloutRequest's defaults
    return RolloutRequest(
        inventory=args.inventory,
        batch=args.batch,
        limit=args.limit,
        reboot=args.reboot,
        profile=args.profile,
        force=args.force,
        drift_gate=args.drift_gate is not None,
        drift_against=args.drift_gate or None,
        **given,
    )


def run(args) -> int:
    from hostkit.rollout.driver import abort, resume, start

    existing = args.resume or args.abort
    if existing:
        given = [f"--{n.replace('_', '-')}" for n in NEW_ONLY if getattr(args, n) not in (None, False)]
        if given:
            raise BadInput(
                f"{'--resume' if args.resume else '--abort'} takes the rollout's own settings; drop {', '.join(given)}"
            )
    note = None if args.json else output.note
    if args.resume:
        result = resume(args.resume, on_step=note)
    elif args.abort:
        result = abort(args.abort, on_step=note)
    else:
        req = request(args)
        if note:
            note(f"rollout of {args.inventory}: planning batches...")
        result = start(req, on_step=note)
    if args.json:
        output.emit_json(result.to_dict())
    else:
        print_result(result)
    return result.rc


def print_result(result) -> None:
    s = result.state
    rows = []
    for h, r in s["hosts"].items():
        be, af = r.get("before") or {}, r.get("after") or {}
        rows.append(
            [
                h,
                str(r["batch"] + 1),
                r["status"],
                _v(be),
                _v(af),
                (r.get("audit") or {}).get("status", "-"),
                (r["gate"]["gate"] + ": " + r["gate"]["why"])[:100] if r.get("gate") else "-",
            ]
        )
    output.print_table(
        ["host", "batch", "status", "smoke before", "smoke after", "audit", "gate failed"],
        rows,
        title=f"hostkit rollout {s['rollout_id']}: {s['status']}",
    )
    f = s.get("failure")
    if f:
        print(f"stopped at batch {f['batch'] + 1}: {f['host']} failed the {f['gate']} gate: {f['why']}")
        print(f"fix it, then: hostkit rollout --resume {s['rollout_id']}   (or --abort {s['rollout_id']})")
    print(f"report: {result.report}")


def _v(rec: dict) -> str:
    return "-" if not rec else f"{rec['verdict']} {rec['p999_ms'] if rec['p999_ms'] is not None else '-'} ms"
