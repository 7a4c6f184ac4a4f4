"""``hostkit apply``: facts -> plan per host -> extravars -> playbooks/apply.yml through ansible-runner."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from hostkit.ansible.run import RunResult, new_run_id, run_playbook
from hostkit.errors import BadInput

ROLES = ["bios_nps", "isolcpus", "irq_affinity", "cpu_governor", "rt_runtime", "numa_sysctl", "containerd", "kubelet"]


@dataclass
class HostApply:
    name: str
    status: str  # ok | changed | failed | unreachable | refused | skipped
    changed: int = 0
    roles: dict[str, dict] = field(default_factory=dict)  # role -> {"changed": n, "failed": bool}
    reboot_required: bool = False
    refused: list[str] = field(default_factory=list)
    msg: str | None = None
    would_run: list[list[str]] = field(default_factory=list)
    irq_refused: list[dict] = field(default_factory=list)
    locked_by: dict | None = None  # the other run holding this host's lock


@dataclass
class ApplyResult:
    run_id: str
    hosts: dict[str, HostApply]
    run: RunResult | None
    plans: dict[str, dict]

    @property
    def failed(self) -> bool:
        return any(h.status in ("failed", "unreachable") for h in self.hosts.values())

    @property
    def refused(self) -> bool:
        return any(h.status == "refused" for h in self.hosts.values())


def controller_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def stale_note(holder: dict) -> str:
    """Whether a lock's holder is a dead process on this controller (the only case we can know)."""
    ctl = str(holder.get("controller") or "")
    host, _, pid = ctl.rpartition(":")
    if host == socket.gethostname() and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
        return f"stale: run {holder.get('run_id')} died (controller pid {pid} is gone); `hostkit unlock` clears it"
    return f"held by run {holder.get('run_id')} from {ctl or 'an unknown controller'}"


def unlock(inventory: str, limit: str | None, *, run_id: str | None = None, force: bool = False) -> RunResult:
    return run_playbook("unlock.yml", inventory, limit=limit,
                        extravars={"hostkit_run_id": run_id or "none", "hostkit_unlock_force": force})


def validate_tags(tags: str | None) -> str | None:
    if not tags:
        return None
    names = [t.strip() for t in tags.split(",") if t.strip()]
    unknown = [t for t in names if t not in ROLES]
    if unknown:
        raise BadInput(f"--tags: unknown role(s) {', '.join(unknown)} (roles: {', '.join(ROLES)})")
    return ",".join(names)


def apply(plans: dict[str, dict], inventory: str, *, check: bool = False, diff: bool = False,
          tags: str | None = None, forks: int | None = None, run_id: str | None = None,
          on_event=None) -> ApplyResult:
    """Run apply.yml for every host whose plan is not refused.

    ``plans``: host -> {"status": "ok", "plan": ...} or {"status": "unreachable"|"failed", ...}
    (as returned by the CLI's plans_for); refused and unreachable hosts are reported, not run.
    """
    tags = validate_tags(tags)
    run_id = run_id or new_run_id()
    hosts: dict[str, HostApply] = {}
    runnable: dict[str, dict] = {}
    for name, r in plans.items():
        if r["status"] != "ok":
            hosts[name] = HostApply(name, r["status"], msg=r.get("error"))
        elif r["plan"]["refused"]:
            hosts[name] = HostApply(name, "refused", refused=list(r["plan"]["refused"]))
        else:
            runnable[name] = r["plan"]
    run = None
    if runnable:
        run = run_playbook(
            "apply.yml", inventory, limit=",".join(runnable), forks=forks or max(5, len(runnable)),
            check=check, diff=diff, tags=tags, run_id=run_id, on_event=on_event,
            extravars={"hostkit_plans": runnable, "hostkit_run_id": run_id,
                       "hostkit_controller": controller_id()},
        )
        for name in runnable:
            hosts[name] = _host_result(name, run)
        # A host that failed mid-run kept this run's lock (post_tasks never ran): give it back.
        # Unreachable hosts keep it; the next run names it, `hostkit unlock` clears it.
        if run.status in ("canceled", "timeout"):  # SIGINT or a timeout: every host may still hold our lock
            failed = [n for n in runnable if not hosts[n].locked_by]
            for n in runnable:
                if hosts[n].status in ("ok", "changed"):
                    hosts[n].status, hosts[n].msg = "failed", f"run {run.status} before this host finished"
        else:
            failed = [n for n in runnable if hosts[n].status == "failed" and not hosts[n].locked_by]
        if failed:
            unlock(inventory, ",".join(failed), run_id=run_id)
    return ApplyResult(run_id=run_id, hosts=hosts, run=run, plans={k: v for k, v in runnable.items()})


def _host_result(name: str, run: RunResult) -> HostApply:
    hr = run.hosts.get(name)
    if hr is None:
        return HostApply(name, "failed", msg=run.error or "no result from Ansible (see the run's artifacts)")
    out = HostApply(name, hr.status, changed=hr.changed, msg=hr.msg)
    for t in hr.tasks:
        role = t.role or "-"
        r = out.roles.setdefault(role, {"changed": 0, "failed": False, "tasks": 0})
        r["tasks"] += 1
        r["changed"] += int(t.changed)
        r["failed"] = r["failed"] or t.status in ("failed", "unreachable")
        res = t.res or {}
        if res.get("reboot_required"):
            out.reboot_required = True
        if res.get("would_run") and res.get("argv"):
            out.would_run.append(list(res["argv"]))
        out.irq_refused += res.get("refused") or []
        if res.get("locked"):
            out.locked_by = res.get("holder")
            out.msg = f"{res.get('msg')} [{stale_note(res.get('holder') or {})}]"
    if out.status == "ok" and out.changed:
        out.status = "changed"
    return out
