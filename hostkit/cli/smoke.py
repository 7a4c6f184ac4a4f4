"""``hostkit smoke``: the on-host SHM inference smoke test (p999 deschedule against a target), on
this machine or on every inventory host through the smoke role."""

from __future__ import annotations

import argparse
from dataclasses import fields

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, fleet_args, json_arg
from hostkit.smoke.options import SmokeOptions, add_smoke_arguments


def add_parser(sub) -> argparse.ArgumentParser:
    sm = command(
        sub,
        "smoke",
        "on-host SHM inference smoke test: p999 deschedule against a target",
        "Runs a shared-memory inference path (queue, pinned worker, clients) on this host and\n"
        "measures deschedule = wall - thread CPU of every inference (time runnable but not\n"
        "running). Exit 1 when p999 misses --target-p999-ms, the run faulted, or it has too\n"
        "few samples for a credible p999 (INCONCLUSIVE: see --duration).",
        "examples:\n"
        "  hostkit smoke --duration 3 --json                 3 s: INCONCLUSIVE (too few samples), exit 1\n"
        "  hostkit smoke --transport socket --duration 3     TCP loopback + pickle\n"
        "  hostkit smoke --inject-stall 20@0.5 --duration 3  calibration: stalls it must see\n"
        "  hostkit smoke --duration 3 --with-cyclictest --plot tail.png --prom hk.prom",
    )
    fleet_args(
        sm,
        local="the smoke test runs on this machine",
        inventory_help="run on every inventory host through the smoke role (the host agent needs only python3)",
        forks_default="every host at once; lab hosts, which share this machine, one at a time",
    )
    sm.add_argument("--profile", metavar="NAME|FILE", help="take transport and target from a profile")
    add_smoke_arguments(sm)
    json_arg(sm)
    sm.add_argument(
        "--plot",
        metavar="FILE.png",
        help="deschedule on a percentile axis (50%%..99.99%%, log latency), p99, p99.9 and max "
        "labelled; with -i also FILE-<host>.png per host, FILE.png the fleet (needs matplotlib)",
    )
    sm.add_argument(
        "--prom",
        metavar="FILE.prom",
        help="Prometheus textfile for node_exporter's textfile collector (seconds; deschedule and "
        "rpc histograms, SLO target, p999, verdict), replaced atomically; with -i also "
        "FILE-<host>.prom per host, FILE.prom the fleet's merged histograms",
    )
    return sm


def given_options(args) -> frozenset[str]:
    """The smoke options the command line set (the others are absent from ``args``)."""
    names = {f.name for f in fields(SmokeOptions)} & set(vars(args))
    if getattr(args, "inject_stall", None):
        names |= {"inject_stall_ms", "inject_every_s"}
    return frozenset(names)


def check_outputs(args) -> None:
    """--prom/--plot: bad input (exit 2) before anything runs, not after a whole smoke run."""
    from hostkit.smoke.output_files import check_output
    from hostkit.smoke.plots import require_matplotlib

    if args.prom:
        check_output(args.prom, "--prom")
    if args.plot:
        check_output(args.plot, "--plot")
        require_matplotlib("--plot")


def run(args) -> int:
    check_outputs(args)
    if args.inventory:
        return _fleet(args)
    from hostkit.smoke.output_files import write_atomic
    from hostkit.smoke.plots import plot
    from hostkit.smoke.prometheus import prometheus
    from hostkit.smoke.text import table_rows, text_summary

    # The profile is read once, here (bad input before anything runs); the run gets the resolved options.
    opts = api.local_smoke_options(
        api.LocalSmokeRequest(options=SmokeOptions.from_args(args), profile=args.profile, given=given_options(args))
    )
    req = api.LocalSmokeRequest(options=opts)
    if args.json:
        result = api.smoke_here(req)
    else:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("smoke"),
            BarColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=output.console(stderr=True),
            transient=True,
        ) as bar:
            task = bar.add_task("starting", total=opts.duration or opts.total_requests or 1)

            def progress(done, total, elapsed, duration):
                if duration:
                    bar.update(task, completed=min(elapsed, duration), description=f"{done or 0} inferences")
                else:
                    bar.update(task, completed=done or 0, description=f"{done or 0}/{total}")

            result = api.smoke_here(req, progress=progress)
    report = result.report
    if args.prom:
        write_atomic(args.prom, prometheus(report, result.hostname))
    if args.plot:
        plot(
            [(f"{report['transport']} (n={report['samples']})", report, result.deschedule_ms)],
            args.plot,
            report["target_p999_ms"],
        )
    if args.json:
        output.emit_json(result.to_dict())
    else:
        output.print_table(["metric (ms)", "n", "p50", "p99", "p999", "max"], table_rows(report), title="hostkit smoke")
        print(text_summary(report))
    return result.rc


FLEET_HEADER = ["host", "transport", "samples", "p99 ms", "p999 ms", "max ms", "SLO", "diagnosis"]


def _fleet(args) -> int:
    req = api.SmokeRequest(
        inventory=args.inventory,
        limit=args.limit,
        forks=args.forks,
        profile=args.profile,
        options=SmokeOptions.from_args(args),
        given=given_options(args),
    )
    if not args.json:
        settings, forks = api.smoke_plan(req)
        output.note(
            f"smoke test on {len(settings)} host(s), {forks} at a time, {next(iter(settings.values()))['run']} each"
        )
    result = api.smoke(req, on_event=output.task_progress(quiet=args.json))
    summary, failed = _fleet_outputs(args, result)
    if args.json:
        output.emit_json(result.to_dict())
        return result.rc
    from hostkit.smoke.gate import verdict

    def measured(host: str, d: dict) -> list[list[str]]:
        return [
            [
                host,
                d["transport"],
                str(d["samples"]),
                str(d["deschedule_ms"]["p99"]),
                str(d["deschedule_ms"]["p999"]),
                str(d["deschedule_ms"]["max"]),
                verdict(d["slo"]),
                ", ".join(x["cause"] for x in d["diagnosis"]),
            ]
        ]

    output.print_table(
        FLEET_HEADER,
        output.host_rows(result.hosts, FLEET_HEADER, measured, width=60),
        title="hostkit smoke (deschedule)",
    )
    print(fleet_line(summary, failed))
    return result.rc


def _fleet_outputs(args, result) -> tuple[dict, list[str]]:
    """--prom/--plot with -i: one file per measured host beside the fleet's (output_files.host_path)."""
    from hostkit.smoke.fleet import fleet_summary
    from hostkit.smoke.output_files import host_path, write_atomic
    from hostkit.smoke.plots import plot_fleet, plot_results
    from hostkit.smoke.prometheus import prometheus, prometheus_fleet

    docs = {h: r.doc for h, r in result.hosts.items() if r.ok}
    failed = sorted(h for h, r in result.hosts.items() if not r.ok)
    summary = fleet_summary(docs)
    written = []
    if args.prom:
        for h, d in docs.items():
            write_atomic(host_path(args.prom, h), prometheus(d, h))
        write_atomic(args.prom, prometheus_fleet(summary, failed))
        written.append(args.prom)
    if args.plot:
        targets = {d["slo"]["target_p999_ms"] for d in docs.values()}
        for h, d in docs.items():
            plot_results(
                [(h, d)],
                host_path(args.plot, h),
                d["slo"]["target_p999_ms"],
                title=f"hostkit smoke: {h}, deschedule per inference",
            )
        plot_fleet(docs, summary, args.plot, targets.pop() if len(targets) == 1 else None)
        written.append(args.plot)
    if written:
        output.note(
            f"wrote {' and '.join(written)} (the fleet) and one file per measured host beside it"
            + (f"; none for {', '.join(failed)} (no result)" if failed else "")
        )
    return summary, failed


def fleet_line(summary: dict, failed: list[str]) -> str:
    """The fleet's deschedule from the merged histograms, and the hosts per verdict."""
    from hostkit.smoke.gate import VERDICTS
    from hostkit.smoke.text import fmt

    def ms(s):
        return fmt(None if s is None else s * 1000.0)

    if not summary["hosts"]:
        return f"fleet: no host measured ({len(failed)} failed)"
    b = summary["at_most_s"]["deschedule"]
    return (
        f"fleet ({len(summary['hosts'])} host(s) measured, {len(failed)} failed): deschedule p99 <= "
        f"{ms(b['p99'])} ms, p99.9 <= {ms(b['p999'])} ms (merged histogram buckets), max "
        f"{ms(summary['max_s']['deschedule'])} ms; SLO "
        + ", ".join(f"{v} {summary['verdicts'].get(v, 0)}" for v in VERDICTS)
    )
