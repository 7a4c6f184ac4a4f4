"""``hostkit facts -i INVENTORY``: the facts engine run on every host through ansible-runner."""

from __future__ import annotations

from hostkit.runner.remote import run_runtime
from hostkit.runner.run import RunResult


def gather_remote(inventory: str, limit: str | None = None, *, forks: int | None = None,
                  on_event=None) -> tuple[dict[str, dict], RunResult]:
    """Per host: ``{"status": "ok", "facts": {...}}`` or ``{"status": "unreachable"|"failed", "error": str}``."""
    results, run = run_runtime(inventory, ["facts"], limit, forks=forks, on_event=on_event, playbook="facts.yml")
    out = {}
    for host, r in results.items():
        if r["status"] == "ok":
            out[host] = {"status": "ok", "facts": r["doc"]}
        else:
            out[host] = r
    return out, run
