"""``hostkit fixtures``: the sysroot fixtures that stand in for other machines."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hostkit.cli import output
from hostkit.cli.args import Parser, json_arg
from hostkit.errors import EXIT_OK, BadInput


def add_parser(sub) -> argparse.ArgumentParser:
    fx = sub.add_parser("fixtures", help="sysroot fixtures standing in for other machines")
    fsub = fx.add_subparsers(dest="fx_cmd", required=True, parser_class=Parser)
    fl = fsub.add_parser("list", help="list the fixtures")
    json_arg(fl)
    fm = fsub.add_parser("make", help="write a fixture's sysroot tree to DEST")
    fm.add_argument("name")
    fm.add_argument("dest")
    fc = fsub.add_parser("capture", help="capture the files hostkit reads from a root into a fixture JSON")
    fc.add_argument("out")
    fc.add_argument("--sysroot", default="/")
    return fx


def run(args) -> int:
    from hostkit.lab import fixtures

    if args.fx_cmd == "list":
        names = fixtures.fixture_names()
        if args.json:
            output.emit_json([{"name": n, "description": fixtures.describe(n)} for n in names])
        else:
            for n in names:
                print(f"{n:<22} {fixtures.describe(n)}")
        return EXIT_OK
    if args.fx_cmd == "make":
        dest = Path(args.dest)
        if dest.exists() and not dest.is_dir():
            raise BadInput(f"{dest} exists and is not a directory")
        if dest.is_dir() and any(dest.iterdir()):
            raise BadInput(f"{dest} exists and is not empty")
        if not dest.parent.is_dir():
            raise BadInput(f"{dest.parent} is not a directory: nowhere to write {dest.name}")
        fixtures.materialize(args.name, dest)
        print(dest)
        return EXIT_OK
    from hostkit.facts.capture import capture  # capture

    out = Path(args.out)
    if out.is_dir():
        raise BadInput(f"{out} is a directory: name the JSON file to write")
    if not out.parent.is_dir():
        raise BadInput(f"{out.parent} is not a directory: nowhere to write {out.name}")
    doc = capture(args.sysroot)
    out.write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")
    print(f"captured {len(doc['files'])} files from {args.sysroot} into {args.out}")
    return EXIT_OK
