"""Reboot hosts through Ansible and wait for them, bounded: ``playbooks/reboot.yml``.

Used after a rollback that restored boot configuration (``hostkit rollback --reboot``);
``hostkit apply --reboot`` reboots inside the isolcpus role, between writing the boot
configuration and re-checking ``/proc/cmdline``. A host that does not come back within
the timeout is reported failed; the other hosts are not held up by it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hostkit.ansible.run import new_run_id, run_playbook

# Seconds a rebooting host may take to answer again: the one default of the CLI, the api and the roles
# (roles/tune/defaults: hostkit_reboot_timeout, which isolcpus_reboot_timeout follows; tested equal).
DEFAULT_TIMEOUT = 900


@dataclass
class Rebooted:
    host: str
    status: str  # ok | would_run (a lab sysroot: recorded, not rebooted) | failed | unreachable
    cmdline: str | None = None
    msg: str | None = None


def reboot_hosts(
    inventory: str,
    hosts: list[str],
    *,
    timeout: int = DEFAULT_TIMEOUT,
    forks: int | None = None,
    run_id: str | None = None,
    on_event=None,
) -> dict[str, Rebooted]:
    if not hosts:
        return {}
    run = run_playbook(
        "reboot.yml",
        inventory,
        limit=",".join(hosts),
        forks=forks or len(hosts),
        run_id=run_id or new_run_id(),
        on_event=on_event,
        extravars={"hostkit_reboot_timeout": int(timeout), "hostkit_run_id": run_id or "reboot"},
    )
    out = {}
    for name in hosts:
        hr = run.hosts.get(name)
        if hr is None:
            out[name] = Rebooted(name, "failed", msg=run.error or "no result from the reboot play")
            continue
        published = hr.published.get("hostkit_reboot_agent_output") or {}
        status = hr.status if hr.status != "ok" or published else "failed"
        if status == "ok" and str(published.get("live", True)).lower() in ("false", "0"):
            status = "would_run"
        out[name] = Rebooted(name, status, cmdline=published.get("cmdline"), msg=hr.msg)
    return out
