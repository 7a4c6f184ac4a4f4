"""``hostkit fixtures``: the sysroot fixtures that stand in for other machines."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import Parser, json_arg


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
    if args.fx_cmd == "list":
        listed = api.fixture_list()
        if args.json:
            output.emit_json(listed.to_dict())
        else:
            for f in listed.fixtures:
                print(f"{f['name']:<22} {f['description']}")
        return listed.rc
    if args.fx_cmd == "make":
        made = api.fixture_make(api.FixtureMakeRequest(name=args.name, dest=args.dest))
        print(made.dest)
        return made.rc
    captured = api.fixture_capture(api.FixtureCaptureRequest(out=args.out, sysroot=args.sysroot))
    print(f"captured {captured.files} files from {captured.sysroot} into {captured.out}")
    return captured.rc
