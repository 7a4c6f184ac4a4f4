"""The ``hostkit`` command: one module per sub-command, assembled here.

Each command module has ``add_parser(sub)`` (its options) and ``run(args) -> int`` (build a typed
request, call :mod:`hostkit.api`, print the result through :mod:`hostkit.cli.output`). Exit codes
(:mod:`hostkit.errors`): 0 ok, 1 a check, host or SLO failed, 2 bad input (nothing was changed),
3 refused by a safety guard.
"""

from __future__ import annotations

import argparse
import sys

from hostkit import __version__
from hostkit.ansible.run import run_options as ansible_run_options
from hostkit.cli import (
    apply,
    audit,
    collection,
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
from hostkit.cli.args import Parser, run_options
from hostkit.errors import EXIT_OK, HostkitError

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
    migrate,
    lab,
    fixtures,
    collection,
]

EPILOG = """\
exit codes: 0 ok, 1 a check/host/SLO failed, 2 bad input (nothing changed), 3 refused by a safety guard

examples:
  hostkit facts                                  this machine, human summary
  hostkit facts --sysroot tests/sysroots/x --json  a fixture tree, as JSON
  hostkit lab up --hosts 3                       three sshd lab hosts on 127.0.0.2-4
  hostkit facts -i .hostkit/lab/inventory.yml    every lab host over SSH (Ansible)
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
        # -v/--log of the fleet commands: every Ansible run of the command shows and logs the same.
        quiet = getattr(args, "json", False) and not getattr(args, "verbose", 0)
        with ansible_run_options(run_options(args, echo=None if quiet else output.echo)):
            return args.run(args)
    except HostkitError as exc:
        print(f"hostkit: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("hostkit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
