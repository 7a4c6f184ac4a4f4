"""Everything the commands print: JSON documents, tables (rich), unified diffs, progress lines.

Domain renderings (a host's facts summary, a plan's rows) live with their domain
(:mod:`hostkit.facts.render`, :mod:`hostkit.plan.render`); this module only emits.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
import time

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
    """A table of plain text: what a cell holds came from hosts and files, and is shown as it is
    (never read as Rich markup, where "[/x]" in a host name or an error would break the output)."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=Text(title) if title else None, show_lines=False, header_style="bold")
    for i, h in enumerate(header):
        # The first column names the host: never folded, whatever the width.
        t.add_column(h, overflow="fold", no_wrap=(i == 0))
    for r in rows:
        t.add_row(*(Text(str(c)) for c in r))
    return t


def escape(text) -> str:
    """Text from a host, an inventory or a file, safe inside a Rich markup string."""
    from rich.markup import escape as rich_escape

    return rich_escape(str(text))


def print_table(header: list[str], rows: list[list[str]], title: str | None = None) -> None:
    console().print(table(header, rows, title))


def unified_diff(before, after) -> str:
    return "".join(
        difflib.unified_diff(
            str(before or "").splitlines(True), str(after or "").splitlines(True), fromfile="before", tofile="after"
        )
    )


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


class HostProgress:
    """One host's progress through the runs of a command."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.end: float | None = None
        self.roles: list[str] = []  # roles in the order they started
        self.current = ""
        self.tasks = 0
        self.failed = ""  # FAILED / UNREACHABLE once a task failed

    def elapsed(self) -> float:
        return (self.end or time.monotonic()) - self.start


class Progress:
    """``on_event(host, task, status)`` for Ansible runs (and the audit's steps): a compact per-host
    display on stderr. On a terminal, one live line per host: roles done of ``total_roles`` (or
    tasks done when the playbook has no roles), the current role or task, elapsed time. Elsewhere
    (a pipe, CI), one line per host when the command's runs are over. Ansible's full task log is
    ``-v`` (:func:`echo`, printed above the display) and the run's artifacts.

    Use as a context manager around the API call."""

    def __init__(
        self,
        roles: list[str] | None = None,
        total_roles: int | None = None,
        what: str = "roles",
        live: bool | None = None,
    ) -> None:
        self.known_roles = set(roles or [])
        self.total_roles = total_roles
        self.what = what
        self.hosts: dict[str, HostProgress] = {}
        self.err = err_console()
        self.is_live = self.err.is_terminal if live is None else live
        self._live = None
        self.entered = False

    # ------------------------------------------------------------------ events
    def __call__(self, host: str, task: str, status: str) -> None:
        if not self.entered:  # called without ``with``: one line per task, as before
            self.err.print(f"  {host}: {task} [{PROGRESS_MARKS.get(status, status)}]", markup=False)
            return
        hp = self.hosts.setdefault(host, HostProgress())
        role, _, name = task.partition(": ")
        if role in self.known_roles:
            if role not in hp.roles:
                hp.roles.append(role)
            # A role seen before that runs again after the last one started: its handlers.
            hp.current = role if role == hp.roles[-1] else f"{role} handlers"
        else:
            hp.current = task
        hp.tasks += 1
        if status in ("failed", "unreachable") and not hp.failed:
            hp.failed = PROGRESS_MARKS[status]
        hp.end = time.monotonic()
        self._refresh()

    # ------------------------------------------------------------------ rendering
    def line(self, host: str, done: bool = False) -> str:
        hp = self.hosts[host]
        if hp.roles:
            finished = len(hp.roles) if done else len(hp.roles) - 1
            count = f"{finished}/{self.total_roles} {self.what}" if self.total_roles else f"{finished} {self.what}"
        else:
            count = f"{hp.tasks} task{'s' if hp.tasks != 1 else ''}"
        state = hp.failed or ("done" if done else hp.current)
        return f"  {host}: {count}, {state} ({hp.elapsed():.1f} s)"

    def _render(self):
        from rich.text import Text

        return Text("\n".join(self.line(h) for h in self.hosts) or "  waiting for the first task...")

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def __enter__(self) -> Progress:
        self.entered = True
        if self.is_live:
            from rich.live import Live

            self._live = Live(
                self._render(), console=self.err, refresh_per_second=4, transient=True, get_renderable=self._render
            )
            self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        for host in self.hosts:
            self.err.print(self.line(host, done=True), markup=False, highlight=False)


def task_progress(
    quiet: bool = False, roles: list[str] | None = None, total_roles: int | None = None, what: str = "roles"
) -> Progress:
    """The progress display of a command (:class:`Progress`); with ``quiet`` (``--json``) it shows nothing
    (its ``on_event`` is still safe to pass)."""
    if quiet:
        return QuietProgress()
    return Progress(roles, total_roles, what)


class QuietProgress(Progress):
    def __init__(self) -> None:
        super().__init__(live=False)

    def __call__(self, host: str, task: str, status: str) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


_ERR = None


def err_console():
    """The one stderr console every progress line and note goes through (so a live display and the
    lines printed above it never garble each other)."""
    global _ERR
    if _ERR is None:
        _ERR = console(stderr=True)
    return _ERR


def echo(text: str) -> None:
    """A line of Ansible's own output (-v) or a run's artifacts path, on stderr (above a live display)."""
    err_console().print(text.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)


def note(text: str) -> None:
    """A line for the operator on stderr (never mixed into stdout's tables or JSON)."""
    err_console().print(text, markup=False, highlight=False)
