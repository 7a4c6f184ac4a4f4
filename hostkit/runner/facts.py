"""``hostkit facts -i INVENTORY``: the facts engine run on every host through ansible-runner."""

from __future__ import annotations

import json

from hostkit import runtime
from hostkit.runner.inventory import load_inventory
from hostkit.runner.run import RunResult, run_playbook, summarize_error

FACTS_TASK = "Read topology, IRQ and kernel facts under the sysroot"


def gather_remote(inventory: str, limit: str | None = None, *, forks: int | None = None,
                  on_event=None) -> tuple[dict[str, dict], RunResult]:
    """Per host: ``{"status": "ok", "facts": {...}}`` or ``{"status": "unreachable"|"failed", "error": str}``."""
    hosts = load_inventory(inventory, limit)  # bad input fails here, before anything runs
    from hostkit.paths import state_dir

    artifact = runtime.build(state_dir() / "runtime")
    result = run_playbook("facts.yml", inventory, limit=limit, forks=forks or max(5, len(hosts)),
                          extravars={"hostkit_runtime": str(artifact)}, on_event=on_event)
    out: dict[str, dict] = {}
    for h in hosts:
        hr = result.hosts.get(h.name)
        if hr is None:
            out[h.name] = {"status": "failed", "error": result.error or "no result from Ansible (see the run's artifacts)"}
            continue
        if hr.status == "unreachable":
            out[h.name] = {"status": "unreachable", "error": _one_line(hr.msg)}
            continue
        task = hr.result_of(FACTS_TASK)
        stdout = (task.res.get("stdout") if task else "") or ""
        doc = _parse(stdout)
        if doc is None:
            out[h.name] = {"status": "failed", "error": _one_line(hr.msg or (task.res.get("stderr") if task else None)
                                                                 or "the facts runtime printed no JSON")}
        elif "error" in doc:
            out[h.name] = {"status": "failed", "error": doc["error"], "exit_code": doc.get("exit_code")}
        else:
            out[h.name] = {"status": "ok", "facts": doc}
    return out, result


def _parse(stdout: str) -> dict | None:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def _one_line(msg) -> str:
    return summarize_error(msg)
