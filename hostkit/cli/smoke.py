"""``hostkit smoke``: the on-host SHM inference smoke test (p999 deschedule against a target), on
this machine or on every inventory host through the smoke role."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command
from hostkit.errors import EXIT_FAILED, EXIT_OK
from hostkit.smoke.options import SmokeOptions, add_smoke_arguments


def add_parser(sub) -> argparse.ArgumentParser:
    sm = command(sub, "smoke", "on-host SHM inference smoke test: p999 deschedule against a target",
                 "Runs a shared-memory inference path (queue, pinned worker, clients) on this host and\n"
                 "measures deschedule = wall - thread CPU of every inference (time runnable but not\n"
                 "running). Exit 1 when p999 misses --target-p999-ms, the run faulted, or it has too\n"
                 "few samples for a credible p999 (INCONCLUSIVE: see --duration).",
                 "examples:\n"
                 "  hostkit smoke --duration 10                        shm transport, 2 ms model\n"
                 "  hostkit smoke --transport socket --requests 20000  TCP loopback + pickle\n"
                 "  hostkit smoke --inject-stall 20@0.5 --duration 5   calibration: stalls it must see\n"
                 "  hostkit smoke --with-cyclictest --plot cdf.png --prom /var/lib/node_exporter/hk.prom")
    sm.add_argument("-i", "--inventory", metavar="INVENTORY",
                    help="run on every inventory host through the smoke role (the host agent needs only python3)")
    sm.add_argument("--limit", metavar="PATTERN", help="with -i: only these hosts")
    sm.add_argument("--forks", type=int, default=None, help="with -i: hosts at a time (lab: 1)")
    sm.add_argument("--profile", metavar="NAME|FILE", help="take transport and target from a profile")
    add_smoke_arguments(sm)
    sm.add_argument("--json", action="store_true")
    sm.add_argument("--plot", metavar="FILE.png")
    sm.add_argument("--prom", metavar="FILE", help="Prometheus textfile for node_exporter")
    return sm


def given_options(args) -> frozenset[str]:
    """The smoke options the command line set (the others are absent from ``args``)."""
    names = {f.name for f in fields(SmokeOptions)} & set(vars(args))
    if getattr(args, "inject_stall", None):
        names |= {"inject_stall_ms", "inject_every_s"}
    return frozenset(names)


def run(args) -> int:
    if args.inventory:
        return _fleet(args)
    fallbacks = {}
    if args.profile:
        from hostkit.profiles import load_profile

        profile = load_profile(args.profile)
        fallbacks = {k: profile["smoke"][k] for k in api.PROFILE_SMOKE_SETTINGS}
    opts = SmokeOptions.from_args(args, **fallbacks)
    from hostkit.facts import gather
    from hostkit.smoke.report import plot, prometheus, table_rows, text_summary
    from hostkit.smoke.session import run_smoke

    facts = gather("/")
    if args.json:
        result = run_smoke(opts, facts=facts)
    else:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("smoke"), BarColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=output.console(stderr=True), transient=True) as bar:
            task = bar.add_task("starting", total=opts.duration or opts.total_requests or 1)

            def progress(done, total, elapsed, duration):
                if duration:
                    bar.update(task, completed=min(elapsed, duration), description=f"{done or 0} inferences")
                else:
                    bar.update(task, completed=done or 0, description=f"{done or 0}/{total}")

            result = run_smoke(opts, progress=progress, facts=facts)
    values = result.pop("_deschedule_raw")
    if args.prom:
        Path(args.prom).write_text(prometheus(result, facts.get("hostname") or "localhost"))
    if args.plot:
        plot([(f"{result['transport']} (n={result['samples']})", result, values)], args.plot, opts.target_p999_ms)
    if args.json:
        output.emit_json(result)
    else:
        output.print_table(["metric (ms)", "n", "p50", "p99", "p999", "max"], table_rows(result), title="hostkit smoke")
        print(text_summary(result))
    return EXIT_OK if result["slo"]["passed"] else EXIT_FAILED


FLEET_HEADER = ["host", "transport", "samples", "p99 ms", "p999 ms", "max ms", "SLO", "diagnosis"]


def _fleet(args) -> int:
    req = api.SmokeRequest(args.inventory, args.limit, args.forks, args.profile, SmokeOptions.from_args(args),
                           given_options(args))
    if not args.json:
        settings, forks = api.smoke_plan(req)
        output.note(f"smoke test on {len(settings)} host(s), {forks} at a time, "
                    f"{next(iter(settings.values()))['duration']} s each")
    result = api.smoke(req, on_event=output.task_progress(quiet=args.json))
    if args.json:
        output.emit_json(result.to_dict())
        return result.rc
    from hostkit.smoke.report import verdict

    def measured(host: str, d: dict) -> list[list[str]]:
        return [[host, d["transport"], str(d["samples"]), str(d["deschedule_ms"]["p99"]),
                 str(d["deschedule_ms"]["p999"]), str(d["deschedule_ms"]["max"]),
                 verdict(d["slo"]), ", ".join(x["cause"] for x in d["diagnosis"])]]

    output.print_table(FLEET_HEADER, output.host_rows(result.hosts, FLEET_HEADER, measured, width=60),
                       title="hostkit smoke (deschedule)")
    return result.rc
