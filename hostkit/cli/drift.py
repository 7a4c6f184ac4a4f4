"""``hostkit drift``: each host against its baseline: state differences, latency, verdict."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, fleet_args, json_arg, signature_args
from hostkit.errors import BadInput

DESCRIPTION = """\
Re-read and re-measure each host and judge it against a baseline (hostkit baseline):

  state     every key that moved, by layer (bios, boot, kernel, irqs, cpu_power, services,
            topology, packages), before -> now, and what the baseline's plan says of it: planned,
            undoing a planned value, or not planned (an IRQ irqbalance moved is noted, and counts
            only when it undoes a planned placement; a package upgraded is noted, never counted)
  latency   the deschedule p999 before and now, the ratio with a 95% bootstrap interval and an
            exact test on the samples above the baseline's p999; MOVED only when the change is
            both significant (p < 0.001) and at least 1.5x; too few samples is INCONCLUSIVE,
            never "no drift"
  verdict   same / state drifted / latency drifted / both; when both, the state change ranked
            first is named as the cause, beside the p999's move"""

EPILOG = """\
exit codes: 0 same, 1 drift (or a host failed), 2 bad input: a missing or damaged baseline, one of
another host or another format, a clock gone back (nothing written)

--timer CALENDAR installs the same judgement on each host (a systemd timer, role drift_timer): the
host agent compares the host with a copy of its baseline and writes --prom on the host; the BIOS,
read from the BMC, stays with this command.

--prom FILE writes the verdicts for node_exporter's textfile collector (hostkit_drift_*: an
alert rule can page on them, docs/examples/hostkit-drift.rules.yml); --junit FILE one testcase
per host for its state and its latency.

examples:
  hostkit drift -i inventory.yml                         against each host's newest baseline
  hostkit drift -i inventory.yml --against accepted --json
  hostkit drift -i inventory.yml --no-smoke --prom drift.prom --junit drift.xml
  hostkit drift -i inventory.yml --inject-stall 100@0.5 --smoke-requests 11000
                                         calibration: injected stalls, a tail it must call MOVED
  hostkit drift -i inventory.yml --against accepted --timer daily
                                         each host judges itself daily, for node_exporter
  hostkit drift -i inventory.yml --timer off           remove the timers"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = command(sub, "drift", "judge each host against its baseline: state, latency, verdict", DESCRIPTION, EPILOG)
    fleet_args(p)
    json_arg(p)
    p.add_argument("--against", metavar="NAME", help="the baseline to compare with (default: each host's newest)")
    signature_args(p, calibration=True)
    p.add_argument("--prom", metavar="FILE.prom", help="the verdicts as Prometheus text, for node_exporter")
    p.add_argument("--junit", metavar="FILE", help="JUnit XML: per host a state and a latency testcase")
    p.add_argument(
        "--timer",
        metavar="CALENDAR",
        help="instead of judging now, install on each host a systemd timer that judges it on this "
        "schedule (daily, hourly, a systemd OnCalendar expression) and writes its --prom file "
        "(default /var/lib/prometheus/node-exporter/hostkit_drift.prom); off removes it",
    )
    return p


def run_timer(args) -> int:
    if args.junit or args.inject_stall:
        raise BadInput(
            "--timer with --junit or --inject-stall: the timer writes metrics, and measures the host as it is"
        )
    result = api.drift_timer(
        api.DriftTimerRequest(
            inventory=args.inventory,
            limit=args.limit,
            forks=args.forks,
            against=args.against,
            on_calendar=args.timer,
            textfile=args.prom,
            smoke=not args.no_smoke,
            smoke_duration=args.smoke_duration,
            smoke_requests=args.smoke_requests,
        )
    )
    if args.json:
        output.emit_json(result.to_dict())
        return result.rc
    for host, doc in sorted(result.hosts.items()):
        if doc["status"] != "ok":
            print(f"{host}: FAILED {doc['error']}")
        elif doc["timer"] == "off":
            print(f"{host}: drift timer removed (and {doc['textfile']})")
        else:
            print(
                f"{host}: drift timer {doc['timer']!r} against baseline {doc['against']} "
                f"(latency {doc['latency']}), writes {doc['textfile']}"
            )
    return result.rc


def run(args) -> int:
    from hostkit.smoke.output_files import check_output

    if args.timer is not None:
        return run_timer(args)
    for given, flag in ((args.prom, "--prom"), (args.junit, "--junit")):
        if given:
            if args.inject_stall:
                raise BadInput(f"--inject-stall with {flag}: a calibration's tail is not the host's, not for alerts")
            check_output(given, flag)  # bad input before any host is contacted
    result = api.drift(
        api.DriftRequest(
            inventory=args.inventory,
            limit=args.limit,
            forks=args.forks,
            against=args.against,
            smoke=not args.no_smoke,
            smoke_duration=args.smoke_duration,
            smoke_requests=args.smoke_requests,
            inject_stall=args.inject_stall,
        )
    )
    write_reports(args, result.hosts)
    if args.json:
        output.emit_json(result.to_dict())
        return result.rc
    for host, doc in sorted(result.hosts.items()):
        if "verdict" not in doc:
            print(f"{host}: FAILED {doc['error']}")
            continue
        print(f"{host}: {doc['verdict'].upper()} against baseline {doc['against']}")
        if doc["cause"]:
            print(f"  cause: {doc['cause']}")
        for d in doc["differences"]:
            noted = ", noted only" if d in doc["noted_only"] else ""
            print(f"  {d['layer']:9s} {d['key']}: {d['before']} -> {d['now']} ({d['plan']}{noted})")
        print(f"  latency: {doc['latency']['verdict']}: {doc['latency']['basis']}")
    return result.rc


def write_reports(args, hosts: dict[str, dict]) -> None:
    from hostkit.drift.prometheus import junit_xml, prometheus
    from hostkit.smoke.output_files import write_atomic

    if args.prom:
        write_atomic(args.prom, prometheus(hosts))
    if args.junit:
        write_atomic(args.junit, junit_xml(hosts).encode())
