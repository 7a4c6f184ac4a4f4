"""Run commands of the hostkit runtime (facts, history, rollback, ...) on inventory hosts.

The runtime zipapp (:mod:`hostkit.runtime`) is copied to each host by
``playbooks/runtime.yml`` and run with the host's python3 against its
``hostkit_sysroot``. Its one-line JSON comes back per host.
"""

from __future__ import annotations

import json

from hostkit import runtime
from hostkit.paths import state_dir
from hostkit.runner.inventory import load_inventory
from hostkit.runner.run import RunResult, run_playbook, summarize_error

RUNTIME_TASK = "Run the hostkit runtime under the sysroot"


def run_runtime(inventory: str, args: list[str], limit: str | None = None, *, forks: int | None = None,
                on_event=None, playbook: str = "runtime.yml", task: str = RUNTIME_TASK,
                extravars: dict | None = None) -> tuple[dict[str, dict], RunResult]:
    """Per host: ``{"status": "ok", "doc": {...}}`` or ``{"status": "unreachable"|"failed", "error": str}``.

    A runtime that exits 1 (a check failed) still returns its document as ``ok``;
    exit 2 (bad input on the host) is ``failed`` with the runtime's message.
    """
    hosts = load_inventory(inventory, limit)  # bad input fails here, before anything runs
    artifact = runtime.build(state_dir() / "runtime")
    extravars = {**(extravars or {}), "hostkit_runtime": str(artifact)}
    if playbook == "runtime.yml":
        extravars["hostkit_runtime_args"] = list(args)
    result = run_playbook(playbook, inventory, limit=limit, forks=forks or max(5, len(hosts)),
                          extravars=extravars, on_event=on_event)
    out: dict[str, dict] = {}
    for h in hosts:
        hr = result.hosts.get(h.name)
        if hr is None:
            out[h.name] = {"status": "failed", "error": result.error or "no result from Ansible (see the run's artifacts)"}
            continue
        if hr.status == "unreachable":
            out[h.name] = {"status": "unreachable", "error": summarize_error(hr.msg)}
            continue
        result_task = hr.result_of(task)
        stdout = (result_task.res.get("stdout") if result_task else "") or ""
        doc = parse_json_line(stdout)
        if doc is None:
            out[h.name] = {"status": "failed", "error": summarize_error(
                hr.msg or (result_task.res.get("stderr") if result_task else None) or "the runtime printed no JSON")}
        elif "error" in doc and doc.get("exit_code", 2) >= 2:
            out[h.name] = {"status": "failed", "error": doc["error"], "exit_code": doc.get("exit_code")}
        else:
            out[h.name] = {"status": "ok", "doc": doc}
    return out, result


def parse_json_line(stdout: str) -> dict | None:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None
