"""Argument conventions shared by the sub-commands."""

from __future__ import annotations

import argparse
import sys

from hostkit.ansible.reboot import DEFAULT_TIMEOUT as REBOOT_TIMEOUT
from hostkit.errors import EXIT_BAD_INPUT


class Parser(argparse.ArgumentParser):
    """argparse that exits 2 with a one-line error (its own convention, and hostkit's bad input)."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, f"hostkit: error: {message}\n")


def command(sub, name: str, help: str, description: str | None = None, epilog: str | None = None, *, raw: bool = True):
    """A sub-command's parser; with ``raw``, its description and epilog keep their line breaks."""
    kw = {"formatter_class": argparse.RawDescriptionHelpFormatter} if raw else {}
    return sub.add_parser(name, help=help, description=description, epilog=epilog, **kw)


def reboot_args(
    p: argparse.ArgumentParser,
    what: str,
    *,
    pending: str = "without it a pending reboot is reported",
    timeout_default: int | None = REBOOT_TIMEOUT,
    lost: str = "a host that does not come back is failed, the others go on",
) -> None:
    """--reboot/--reboot-timeout, the same on apply, rollback and rollout (whose default timeout is
    None, so that a value given with --resume can be told apart; it means REBOOT_TIMEOUT there too)."""
    p.add_argument(
        "--reboot",
        action="store_true",
        help=f"reboot hosts whose {what}, wait for SSH (bounded), re-check /proc/cmdline; {pending}",
    )
    p.add_argument(
        "--reboot-timeout",
        type=int,
        default=timeout_default,
        metavar="S",
        help=f"seconds a rebooting host may take to answer again (default {REBOOT_TIMEOUT}); {lost}",
    )


def plan_args(
    p: argparse.ArgumentParser,
    profile_help: str | None = None,
    force_help: str = "allow isolation on a VM / deceptive topology",
) -> None:
    """--profile/--force: how a command computes each host's plan, as ``hostkit plan`` does."""
    p.add_argument("--profile", metavar="NAME|FILE", help=profile_help)
    p.add_argument("--force", action="store_true", help=force_help)


def fleet_args(p: argparse.ArgumentParser, json_help: str = "print JSON on stdout") -> None:
    """-i/--limit/--json and -v/--log, the same on every command that works on an inventory."""
    p.add_argument("-i", "--inventory", required=True, metavar="INVENTORY")
    p.add_argument("--limit", metavar="PATTERN", help="only hosts matching this Ansible pattern")
    p.add_argument("--json", action="store_true", help=json_help)
    ansible_output_args(p)


MAX_VERBOSITY = 4


def ansible_output_args(p: argparse.ArgumentParser) -> None:
    """-v..-vvvv and --log FILE: Ansible's own output (commands that take ``-i`` without
    :func:`fleet_args` call this themselves)."""
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="Ansible's verbosity, passed through (-v .. -vvvv): the full task log of every "
        "run on stderr instead of the progress display, with each run's artifacts path",
    )
    p.add_argument(
        "--log",
        metavar="FILE",
        help="append Ansible's log of every run to FILE (default: ansible.log in each run's "
        "directory, .hostkit/runs/<run-id>/, unless your ansible.cfg sets log_path)",
    )


def run_options(args: argparse.Namespace, echo=None):
    """The :class:`hostkit.ansible.run.RunOptions` of a parsed command line (-v, --log)."""
    from hostkit.ansible.run import RunOptions
    from hostkit.errors import BadInput

    verbosity = getattr(args, "verbose", 0) or 0
    if verbosity > MAX_VERBOSITY:
        raise BadInput(f"-{'v' * verbosity}: Ansible's verbosity goes up to -{'v' * MAX_VERBOSITY}")
    log = getattr(args, "log", None)
    if log:
        from pathlib import Path

        parent = Path(log).absolute().parent
        if not parent.is_dir():
            raise BadInput(f"--log {log}: directory {parent} does not exist")
        if Path(log).is_dir():
            raise BadInput(f"--log {log} is a directory, not a file")
    return RunOptions(verbosity=int(verbosity), log=log, echo=echo)
