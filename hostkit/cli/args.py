"""Argument conventions shared by the sub-commands: one helper per option that several commands take,
so that an option means the same and reads the same everywhere."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hostkit.api import REBOOT_TIMEOUT
from hostkit.errors import EXIT_BAD_INPUT, BadInput


class Parser(argparse.ArgumentParser):
    """argparse that exits 2 with a one-line error (its own convention, and hostkit's bad input)."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, f"hostkit: error: {message}\n")


def command(sub, name: str, help: str, description: str | None = None, epilog: str | None = None, *, raw: bool = True):
    """A sub-command's parser; with ``raw``, its description and epilog keep their line breaks."""
    kw = {"formatter_class": argparse.RawDescriptionHelpFormatter} if raw else {}
    return sub.add_parser(name, help=help, description=description, epilog=epilog, **kw)


JSON_HELP = "print one JSON document on stdout instead of the text output"


def json_arg(p: argparse.ArgumentParser) -> None:
    """--json, in the same words on every command that has a document to print."""
    p.add_argument("--json", action="store_true", help=JSON_HELP)


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


MAX_FORKS = 10000


def forks_value(text: str) -> int:
    """--forks N: a whole number of hosts at a time (argparse reports the error: exit 2, one line)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_FORKS:
        raise argparse.ArgumentTypeError(f"hosts at a time: a whole number 1-{MAX_FORKS}, got {text[:40]!r}")
    return n


def signature_args(p: argparse.ArgumentParser, *, calibration: bool = False) -> None:
    """--no-smoke, --smoke-duration, --smoke-requests: the smoke run of a latency signature, the same
    on baseline and drift; with ``calibration`` (drift) also --inject-stall, the smoke's own stall."""
    p.add_argument("--no-smoke", action="store_true", help="state only: no smoke run, no latency signature")
    run = p.add_mutually_exclusive_group()
    run.add_argument(
        "--smoke-duration",
        type=float,
        metavar="S",
        help="seconds of the smoke run (default: its default run of 20,000 requests, a credible p999)",
    )
    run.add_argument(
        "--smoke-requests",
        type=int,
        metavar="N",
        help="requests of the smoke run; a p999 verdict needs at least 10,000 samples in each run",
    )
    if calibration:
        p.add_argument(
            "--inject-stall",
            metavar="MS@EVERY_S",
            help="calibration: SIGSTOP the smoke worker for MS every EVERY_S seconds, a tail that moved "
            "with the state unchanged, which drift must call MOVED (hostkit smoke --inject-stall)",
        )


# The options that act on the hosts of an inventory and on the Ansible runs that reach them: what
# they mean nothing without (see :func:`check_fleet_options`).
FLEET_OPTIONS = (("limit", "--limit"), ("forks", "--forks"), ("verbose", "-v"), ("log", "--log"))


def fleet_args(
    p: argparse.ArgumentParser,
    *,
    local: str | None = None,
    where=None,
    inventory_help: str = "the hosts: an Ansible inventory (file or directory)",
    forks_default: str = "all of them",
    forks: bool = True,
) -> None:
    """-i, --limit, --forks, -v/--log: the same on every command that works on an inventory.

    ``local``: the command also runs without -i (a --sysroot, this machine); ``local`` says what it
    does then, -i is optional (added to ``where``, a mutually exclusive group, when given), and
    :func:`check_fleet_options` refuses --limit, --forks, -v and --log without -i. ``forks``: False
    where the command has its own unit of hosts at a time (rollout: a wave)."""
    (where or p).add_argument("-i", "--inventory", required=local is None, metavar="INVENTORY", help=inventory_help)
    given = "with -i: " if local else ""
    p.add_argument("--limit", metavar="PATTERN", help=f"{given}only hosts matching this Ansible pattern")
    if forks:
        p.add_argument(
            "--forks", type=forks_value, metavar="N", help=f"{given}hosts at a time (default: {forks_default})"
        )
    ansible_output_args(p, given)
    if local:
        p.set_defaults(local_mode=local)


MAX_VERBOSITY = 4


def ansible_output_args(p: argparse.ArgumentParser, given: str = "") -> None:
    """-v..-vvvv and --log FILE: Ansible's own output (part of :func:`fleet_args`)."""
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help=f"{given}Ansible's verbosity, passed through (-v .. -vvvv): the full task log of every "
        "run on stderr instead of the progress display, with each run's artifacts path",
    )
    p.add_argument(
        "--log",
        metavar="FILE",
        help=f"{given}append Ansible's log of every run to FILE (default: ansible.log in each run's "
        "directory, .hostkit/runs/<run-id>/, unless your ansible.cfg sets log_path)",
    )


def check_fleet_options(args: argparse.Namespace) -> None:
    """--limit, --forks, -v and --log choose, pace and show the Ansible runs over an inventory's hosts:
    without -i (a command run on a --sysroot or on this machine) they mean nothing, and are bad input
    rather than silently ignored."""
    local = getattr(args, "local_mode", None)
    if not local or args.inventory:
        return
    given = [flag for dest, flag in FLEET_OPTIONS if getattr(args, dest, None)]
    if given:
        sysroot = getattr(args, "sysroot", None)
        where = f"with --sysroot {sysroot}" if sysroot not in (None, "/") else "without -i INVENTORY"
        raise BadInput(
            f"{', '.join(given)} {where}: {'it acts' if len(given) == 1 else 'they act'} on the hosts of an "
            f"inventory and their Ansible runs; without -i {local}"
        )


def output_options(args: argparse.Namespace) -> dict:
    """The keyword arguments of :func:`hostkit.api.output_options` of a parsed command line (-v, --log)."""
    verbosity = getattr(args, "verbose", 0) or 0
    if verbosity > MAX_VERBOSITY:
        raise BadInput(f"-{'v' * verbosity}: Ansible's verbosity goes up to -{'v' * MAX_VERBOSITY}")
    log = getattr(args, "log", None)
    if log:
        parent = Path(log).absolute().parent
        if not parent.is_dir():
            raise BadInput(f"--log {log}: directory {parent} does not exist")
        if Path(log).is_dir():
            raise BadInput(f"--log {log} is a directory, not a file")
    return {"verbosity": int(verbosity), "log": log}
