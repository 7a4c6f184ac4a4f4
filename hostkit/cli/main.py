"""The ``hostkit`` command: one module per sub-command, assembled here.

Each command module has ``add_parser(sub)`` (its options) and ``run(args) -> int`` (build a typed
request, call :mod:`hostkit.api`, print the result through :mod:`hostkit.cli.output`). Exit codes
(:mod:`hostkit.errors`): 0 ok, 1 a check, host or SLO failed, 2 bad input (nothing was changed),
3 refused by a safety guard.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys

from hostkit import __version__, api
from hostkit.cli import (
    apply,
    audit,
    baseline,
    bios,
    collection,
    drift,
    facts,
    fixtures,
    gaps,
    history,
    lab,
    migrate,
    output,
    plan,
    rollback,
    rollout,
    smoke,
    unlock,
)
from hostkit.cli.args import Parser, check_fleet_options, output_options
from hostkit.errors import EXIT_BAD_INPUT, EXIT_OK, HostkitError

COMMANDS = [
    facts,
    plan,
    apply,
    history,
    rollback,
    rollout,
    smoke,
    gaps,
    unlock,
    audit,
    baseline,
    drift,
    bios,
    migrate,
    lab,
    fixtures,
    collection,
]

EPILOG = """\
exit codes: 0 ok, 1 a check/host/SLO failed, 2 bad input (nothing changed), 3 refused by a safety guard

examples:
  hostkit facts                                     this machine, as a summary
  hostkit fixtures make vmware-88vcpu vm            a fixture tree in ./vm: a VMware guest of 88 vCPUs
  hostkit facts --sysroot vm --json                 its facts, as JSON
  hostkit plan --sysroot vm --profile vmware-guest  its tuning plan (nothing is changed)
  hostkit lab up --hosts 3                          three sshd lab hosts on 127.0.0.2-4
  hostkit facts -i .hostkit/lab/inventory.yml       every lab host over SSH (Ansible)
  hostkit lab down
"""


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="hostkit",
        description=(
            "Tune Linux hosts for latency-critical CPU inference, audit them, roll back, and prove the result."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"hostkit {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(sub).set_defaults(run=command.run)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_fleet_options(args)
        # -v/--log of the fleet commands: every Ansible run of the command shows and logs the same.
        quiet = getattr(args, "json", False) and not getattr(args, "verbose", 0)
        with api.output_options(**output_options(args), echo=None if quiet else output.echo):
            return args.run(args)
    except HostkitError as exc:
        print(f"hostkit: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        # A name no file system holds (over 255 bytes in one component, 4095 in all), given for a
        # file hostkit writes or a directory it makes (--log, --junit, -p ...): bad input, one line.
        # The files hostkit reads are checked before anything runs (hostkit.jsonfile.check_name).
        if exc.errno != errno.ENAMETOOLONG:
            raise
        name = repr(os.fsdecode(exc.filename or ""))
        shown = name if len(name) <= 80 else f"{name[:60]}... ({len(name)} characters)"
        print(f"hostkit: error: {shown}: {exc.strerror}: longer than the file system allows", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("hostkit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
