"""Everything the commands print: JSON documents, tables (rich), unified diffs, progress lines.

Domain renderings (a host's facts summary, a plan's rows) live with their domain
(:mod:`hostkit.facts.render`, :mod:`hostkit.plan.render`); this module only emits.
"""

from __future__ import annotations

import difflib
import json
import os
import sys

PROGRESS_MARKS = {"ok": "ok", "failed": "FAILED", "unreachable": "UNREACHABLE", "skipped": "skip"}


def emit_json(doc) -> None:
    """One JSON document on stdout (the machine-readable output of every ``--json``)."""
    json.dump(doc, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def console(stderr: bool = False):
    """A rich console; when not a terminal, wide enough that host names never fold."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else int(os.environ.get("COLUMNS") or 0) or 160
    return Console(stderr=stderr, highlight=False, soft_wrap=stderr, width=width)


def table(header: list[str], rows: list[list[str]], title: str | None = None):
    from rich.table import Table

    t = Table(title=title, show_lines=False, header_style="bold")
    for i, h in enumerate(header):
        # The first column names the host: never folded, whatever the width.
        t.add_column(h, overflow="fold", no_wrap=(i == 0))
    for r in rows:
        t.add_row(*r)
    return t


def print_table(header: list[str], rows: list[list[str]], title: str | None = None) -> None:
    console().print(table(header, rows, title))


def unified_diff(before, after) -> str:
    return "".join(difflib.unified_diff(str(before or "").splitlines(True), str(after or "").splitlines(True),
                                        fromfile="before", tofile="after"))


def error_row(host: str, status: str, error: str | None, width: int, cells: int) -> list[str]:
    """A table row for a host that gave no result: its status upper-cased, the error in the last cell."""
    return [host, status.upper()] + [""] * (cells - 3) + [(error or "")[:width]]


def host_rows(replies: dict, header: list[str], rows_of, width: int = 80) -> list[list[str]]:
    """Table rows, host by host: ``rows_of(host, doc)`` (a list of rows) for a host that answered
    (an ``AgentReply``), one :func:`error_row` for a host that did not."""
    rows = []
    for host, r in replies.items():
        rows += rows_of(host, r.doc) if r.ok else [error_row(host, r.status, r.error, width, len(header))]
    return rows


def task_progress(quiet: bool = False):
    """``on_event`` printing one line per host and task on stderr (None when ``quiet``)."""
    if quiet:
        return None
    err = console(stderr=True)

    def progress(host: str, task: str, status: str) -> None:
        err.print(f"  {host}: {task} [{PROGRESS_MARKS.get(status, status)}]", markup=False)

    return progress


def note(text: str) -> None:
    """A line for the operator on stderr (never mixed into stdout's tables or JSON)."""
    console(stderr=True).print(text, markup=False, highlight=False)
