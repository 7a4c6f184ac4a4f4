"""Call the host agent (facts, history, rollback, adopt, smoke) on inventory hosts, from the controller.

The agent zipapp (:mod:`hostkit.ansible.agent_zipapp`) is copied to each host by
``playbooks/agent.yml`` (or the smoke role) and run with the host's python3 against its
``hostkit_sysroot``. The playbook publishes the call's output as a fact
(:data:`AGENT_OUTPUT`, :data:`SMOKE_OUTPUT`); its one-line JSON comes back per host.
"""

from __future__ import annotations

import json

from hostkit.ansible import agent_zipapp
from hostkit.ansible.inventory import load_inventory
from hostkit.ansible.run import HostResult, RunResult, run_playbook, summarize_error
from hostkit.paths import state_dir

# The ansible_facts keys the agent's output is published under (set_fact in the playbook/role).
AGENT_OUTPUT = "hostkit_agent_output"  # playbooks/agent.yml
SMOKE_OUTPUT = "smoke_agent_output"  # roles/smoke


def call_agent(inventory: str, args: list[str], limit: str | None = None, *, forks: int | None = None,
               on_event=None, playbook: str = "agent.yml", output: str = AGENT_OUTPUT,
               extravars: dict | None = None) -> tuple[dict[str, dict], RunResult]:
    """Per host: ``{"status": "ok", "doc": {...}}`` or ``{"status": "unreachable"|"failed", "error": str}``.

    ``args`` is the agent's command line for ``playbooks/agent.yml``; another playbook builds
    its own (and publishes its output under ``output``). An agent that exits 1 (a check
    failed) still returns its document as ``ok``; exit 2 (bad input on the host) is
    ``failed`` with the agent's message and ``exit_code``.
    """
    hosts = load_inventory(inventory, limit)  # bad input fails here, before anything runs
    artifact = agent_zipapp.build(state_dir() / "agent")
    extravars = {**(extravars or {}), "hostkit_agent": str(artifact)}
    if playbook == "agent.yml":
        extravars["hostkit_agent_args"] = list(args)
    result = run_playbook(playbook, inventory, limit=limit, forks=forks or max(5, len(hosts)),
                          extravars=extravars, on_event=on_event)
    return {h.name: host_output(result.hosts.get(h.name), result, output) for h in hosts}, result


def host_output(hr: HostResult | None, run: RunResult, output: str = AGENT_OUTPUT) -> dict:
    """One host's agent result, from the fact ``output`` its playbook published."""
    if hr is None:
        return {"status": "failed", "error": run.error or "no result from Ansible (see the run's artifacts)"}
    if hr.status == "unreachable":
        return {"status": "unreachable", "error": summarize_error(hr.msg)}
    published = hr.published.get(output) or {}
    doc = parse_json_line(published.get("stdout"))
    if doc is None:
        return {"status": "failed", "error": summarize_error(
            hr.msg or published.get("stderr") or published.get("msg") or "the agent printed no JSON")}
    if "error" in doc and doc.get("exit_code", 2) >= 2:
        return {"status": "failed", "error": doc["error"], "exit_code": doc.get("exit_code")}
    return {"status": "ok", "doc": doc}


def parse_json_line(stdout) -> dict | None:
    """The last JSON object line of the agent's stdout (older templating may hand it over parsed)."""
    if isinstance(stdout, dict):
        return stdout
    for line in reversed(str(stdout or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None
