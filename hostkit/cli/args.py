"""Argument conventions shared by the sub-commands."""

from __future__ import annotations

import argparse
import sys

from hostkit.errors import EXIT_BAD_INPUT


class Parser(argparse.ArgumentParser):
    """argparse that exits 2 with a one-line error (its own convention, and hostkit's bad input)."""

    def error(self, message: str):  # noqa: D401
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, f"hostkit: error: {message}\n")


def command(sub, name: str, help: str, description: str | None = None, epilog: str | None = None, *,
            raw: bool = True):
    """A sub-command's parser; with ``raw``, its description and epilog keep their line breaks."""
    kw = {"formatter_class": argparse.RawDescriptionHelpFormatter} if raw else {}
    return sub.add_parser(name, help=help, description=description, epilog=epilog, **kw)


def reboot_args(p: argparse.ArgumentParser, what: str) -> None:
    """--reboot/--reboot-timeout, the same on apply and rollback."""
    p.add_argument("--reboot", action="store_true",
                   help=f"reboot hosts whose {what}, wait for SSH (bounded), re-check /proc/cmdline; "
                        "without it a pending reboot is reported")
    p.add_argument("--reboot-timeout", type=int, default=900, metavar="S",
                   help="seconds a rebooting host may take to answer again (default 900); a host that does "
                        "not come back is failed, the others go on")


def plan_args(p: argparse.ArgumentParser, profile_help: str | None = None,
              force_help: str = "allow isolation on a VM / deceptive topology") -> None:
    """--profile/--force: how a command computes each host's plan, as ``hostkit plan`` does."""
    p.add_argument("--profile", metavar="NAME|FILE", help=profile_help)
    p.add_argument("--force", action="store_true", help=force_help)


def fleet_args(p: argparse.ArgumentParser, json_help: str = "print JSON on stdout") -> None:
    """-i/--limit/--json, the same on every command that works on an inventory."""
    p.add_argument("-i", "--inventory", required=True, metavar="INVENTORY")
    p.add_argument("--limit", metavar="PATTERN", help="only hosts matching this Ansible pattern")
    p.add_argument("--json", action="store_true", help=json_help)
