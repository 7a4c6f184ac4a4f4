"""Call the host agent (facts, history, rollback, adopt, smoke) on inventory hosts, from the controller.

``playbooks/agent.yml`` runs the agent zipapp (:mod:`hostkit.ansible.agent_zipapp`) a host keeps
in its cache (copied there once per agent version) with the host's python3 against its
``hostkit_sysroot``; the smoke role copies it for each run. The playbook publishes the call's output as a fact
(:data:`AGENT_OUTPUT`, :data:`SMOKE_OUTPUT`); its one-line JSON comes back per host.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from hostkit.ansible import agent_zipapp
from hostkit.ansible.inventory import load_inventory
from hostkit.ansible.run import HostResult, RunResult, run_playbook, summarize_error
from hostkit.paths import state_dir

# The ansible_facts keys the agent's output is published under (set_fact in the playbook/role).
AGENT_OUTPUT = "hostkit_agent_output"  # playbooks/agent.yml
SMOKE_OUTPUT = "smoke_agent_output"  # roles/smoke


@dataclass
class AgentReply:
    """One host's answer to an agent call."""

    host: str
    status: str  # ok | failed | unreachable
    doc: dict = field(default_factory=dict)  # the agent's JSON document (status ok; else empty)
    error: str | None = None
    exit_code: int | None = None  # 2: the host's input was bad (its sysroot), not the host

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        """The document, or ``{"status", "error"[, "exit_code"]}`` for a host that gave none."""
        if self.ok:
            return self.doc
        out = {"status": self.status, "error": self.error}
        if self.exit_code is not None:
            out["exit_code"] = self.exit_code
        return out


def call_agent(
    inventory: str,
    args: list[str],
    limit: str | None = None,
    *,
    forks: int | None = None,
    on_event=None,
    playbook: str = "agent.yml",
    output: str = AGENT_OUTPUT,
    extravars: dict | None = None,
) -> tuple[dict[str, AgentReply], RunResult]:
    """Run the agent on every host of ``inventory`` (after ``limit``); one reply per host.

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
        extravars["hostkit_agent_command"] = agent_zipapp.agent_command(artifact)
    result = run_playbook(
        playbook, inventory, limit=limit, forks=forks or max(5, len(hosts)), extravars=extravars, on_event=on_event
    )
    return {h.name: host_reply(h.name, result.hosts.get(h.name), result, output) for h in hosts}, result


def host_reply(name: str, hr: HostResult | None, run: RunResult, output: str = AGENT_OUTPUT) -> AgentReply:
    """One host's agent reply, from the fact ``output`` its playbook published."""
    if hr is None:
        return AgentReply(name, "failed", error=run.error or "no result from Ansible (see the run's artifacts)")
    if hr.status == "unreachable":
        return AgentReply(name, "unreachable", error=summarize_error(hr.msg))
    published = hr.published.get(output) or {}
    doc = parse_json_line(published.get("stdout"))
    if doc is None:
        return AgentReply(
            name,
            "failed",
            error=summarize_error(
                hr.msg or published.get("stderr") or published.get("msg") or "the agent printed no JSON"
            ),
        )
    if agent_error(doc):
        return AgentReply(name, "failed", error=doc["error"], exit_code=doc.get("exit_code"))
    return AgentReply(name, "ok", doc=doc)


def agent_error(doc: dict) -> bool:
    """The agent's document is its own error (bad input on the host, exit 2 and up), not a report:
    the one rule of the playbook route and the collection's modules (:mod:`hostkit.actions`)."""
    return "error" in doc and doc.get("exit_code", 2) >= 2


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
