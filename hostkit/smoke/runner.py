"""TEMPORARY: the old module name of hostkit.smoke.session, for callers not yet switched.

``hostkit/cli.py`` and ``hostkit/agent/main.py`` still import ``SmokeConfig``, ``parse_stall`` and
``run_smoke`` from here. Delete this file once they use ``hostkit.smoke.options.SmokeOptions``
(``add_smoke_arguments``, ``SmokeOptions.from_args``, ``to_agent_args``) and
``hostkit.smoke.session.run_smoke``.
"""

from __future__ import annotations

from hostkit.smoke.options import SmokeOptions, parse_stall
from hostkit.smoke.session import run_smoke

__all__ = ["SmokeConfig", "parse_stall", "run_smoke"]


def SmokeConfig(*, nslots: int | None = None, busy_poll: bool = False, **kw) -> SmokeOptions:  # noqa: N802
    """The old keyword names mapped onto SmokeOptions."""
    if nslots is not None:
        kw["slots"] = nslots
    if busy_poll:
        kw["idle"] = "spin"
    return SmokeOptions(**kw)
