"""The ``hostkit`` command: :mod:`hostkit.cli.main` assembles one module per sub-command, each with
``add_parser(sub)`` and ``run(args) -> int``; :mod:`hostkit.cli.output` prints tables, JSON and diffs.
The commands build a typed request, call one function of :mod:`hostkit.api` and print its result."""

from hostkit.cli.main import main

__all__ = ["main"]
