"""``hostkit migrate report``: migration evidence, two smoke results side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import Parser, json_arg
from hostkit.errors import EXIT_FAILED, EXIT_OK


def add_parser(sub) -> argparse.ArgumentParser:
    mg = sub.add_parser("migrate", help="migration evidence: smoke results before and after, side by side")
    mgsub = mg.add_subparsers(dest="mg_cmd", required=True, parser_class=Parser)
    mr = mgsub.add_parser("report", help="compare two `hostkit smoke --json` files (exit 1 if after misses the SLO)")
    mr.add_argument("before", metavar="BEFORE.json")
    mr.add_argument("after", metavar="AFTER.json")
    mr.add_argument("--md", metavar="FILE", help="write Markdown for a change ticket")
    mr.add_argument(
        "--plot",
        metavar="FILE.png",
        help="before and after on one percentile axis per host (50%%..99.99%%, log latency), "
        "p99, p99.9 and max labelled (needs matplotlib)",
    )
    json_arg(mr)
    return mg


def _side(r: dict) -> dict:
    return {
        "p999_ms": r["slo"]["p999_ms"],
        "passed": r["slo"]["passed"],
        "diagnosis": [d["cause"] for d in r["diagnosis"]],
    }


def run(args) -> int:
    from hostkit.smoke.migration import markdown, plot, verdict
    from hostkit.smoke.output_files import check_output
    from hostkit.smoke.plots import require_matplotlib

    for option, path in (("--md", args.md), ("--plot", args.plot)):
        if path:
            check_output(path, option)
    if args.plot:
        require_matplotlib("--plot")
    pairs = api.migration_pairs(args.before, args.after)
    md = markdown(pairs, args.before, args.after)
    if args.md:
        Path(args.md).write_text(md)
    if args.plot:
        plot(pairs, args.plot)
    if args.json:
        output.emit_json({host: {"before": _side(b), "after": _side(a)} for host, b, a in pairs})
    elif not args.md:
        print(md)
    else:
        for host, b, a in pairs:
            print(f"{host}: before {verdict(b)}; after {verdict(a)}")
        print(f"wrote {args.md}" + (f" and {args.plot}" if args.plot else ""))
    return EXIT_OK if all(a["slo"]["passed"] for _, _, a in pairs) else EXIT_FAILED
