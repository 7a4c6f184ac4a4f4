"""Entry point of the runtime artifact on a host: ``python3 hostkit-runtime.pyz facts --sysroot DIR``.

Prints one JSON document on stdout. On bad input it prints
``{"error": ..., "exit_code": 2}`` and exits 2, so the controller can tell a
host's bad sysroot from an unreachable host. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys

from hostkit.errors import HostkitError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hostkit-runtime")
    sub = parser.add_subparsers(dest="cmd", required=True)
    facts = sub.add_parser("facts")
    facts.add_argument("--sysroot", default="/")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "facts":
            from hostkit.facts import gather

            doc = gather(args.sysroot or "/")
    except HostkitError as exc:
        json.dump({"error": str(exc), "exit_code": exc.exit_code}, sys.stdout)
        sys.stdout.write("\n")
        return exc.exit_code
    json.dump(doc, sys.stdout)
    sys.stdout.write("\n")
    return 0
