"""The Ansible side of an apply: one run of playbooks/apply.yml through ansible-runner (each host's
facts, plan and roles) -> one outcome per host; the host-side lock (take, release, unlock)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hostkit.ansible.reboot import DEFAULT_TIMEOUT as REBOOT_TIMEOUT
from hostkit.ansible.run import RunResult, run_playbook
from hostkit.errors import BadInput
from hostkit.paths import project_root
from hostkit.profiles import shipped


def _apply_roles() -> list[str]:
    """The apply roles in their order: the tune role's ``hostkit_apply_roles``, the one list of hostkit's
    roles (apply.yml runs them through the tune role; ``--tags`` names some of them)."""
    defaults = yaml.safe_load((project_root() / "roles" / "tune" / "defaults" / "main.yml").read_text())
    return list(defaults["hostkit_apply_roles"])


ROLES = _apply_roles()


@dataclass
class HostApply:
    """One host's outcome of an apply (a host that was not run carries why in ``status``/``msg``)."""

    name: str
    status: str  # ok | changed | failed | unreachable | refused | skipped
    changed: int = 0
    roles: dict[str, dict] = field(default_factory=dict)  # role -> {"changed": n, "failed": bool, "tasks": n}
    reboot_required: bool = False
    refused: list[str] = field(default_factory=list)
    msg: str | None = None
    would_run: list[list[str]] = field(default_factory=list)
    irq_refused: list[dict] = field(default_factory=list)
    locked_by: dict | None = None  # the other run holding this host's lock
    diffs: list[dict] = field(default_factory=list)  # {"task", "before_header"?, "before", "after"} (--diff)
    refused_parts: list[str] = field(default_factory=list)  # the plan's parts this host cannot take
    bad_input: bool = False  # its facts showed its input to be bad (the agent's exit 2, the plan's BadInput)
    locked: bool = False  # this run took the host's lock
    # With the tune role's gates (run_apply's ``gates``): the audit module's result, each smoke run's
    # ("before", "after": the gate) module result, and the gate the host failed ("audit", "smoke"),
    # None when it failed in the apply itself or passed.
    audit: dict | None = None
    smoke: dict[str, dict] = field(default_factory=dict)
    failed_gate: str | None = None
    # hostkit.tuning.bios's result where the host has a BMC: its plan, the PATCH, the power cycles
    # and their steps (None: no BIOS step ran)
    bios: dict | None = None
    # The plan's after_bios where the BIOS changes the topology at its next power cycle: the OS
    # planned for it (predicted, its notes) or why not (hostkit.plan.after_bios)
    after_bios: dict | None = None

    def to_dict(self) -> dict:
        return {
            **({"bios": self.bios} if self.bios is not None else {}),
            **({"after_bios": self.after_bios} if self.after_bios is not None else {}),
            "status": self.status,
            "changed": self.changed,
            "roles": self.roles,
            "reboot_required": self.reboot_required,
            "refused": self.refused,
            "msg": self.msg,
            "would_run": self.would_run,
            "irq_refused": self.irq_refused,
            "refused_parts": self.refused_parts,
        }


def controller_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def stale_note(holder: dict) -> str:
    """Whether a lock's holder is a dead process on this controller (the only case we can know)."""
    ctl = str(holder.get("controller") or "")
    host, _, pid = ctl.rpartition(":")
    if host == socket.gethostname() and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
        return f"stale: run {holder.get('run_id')} died (controller pid {pid} is gone); `hostkit unlock` clears it"
    return f"held by run {holder.get('run_id')} from {ctl or 'an unknown controller'}"


def unlock(
    inventory: str, limit: str | None, *, run_id: str | None = None, force: bool = False, forks: int | None = None
) -> RunResult:
    return run_playbook(
        "unlock.yml",
        inventory,
        limit=limit,
        forks=forks,
        extravars={"hostkit_run_id": run_id or "none", "hostkit_unlock_force": force},
    )


def validate_tags(tags: str | None) -> str | None:
    """``--tags``: Ansible's tags, each the name of a role to run (the tune role's apply step tags each
    role's tasks with its name) or ``bios`` (the BIOS step through the host's BMC); an unknown name
    is bad input."""
    if not tags:
        return None
    names = [t.strip() for t in tags.split(",") if t.strip()]
    unknown = [t for t in names if t not in (*ROLES, "bios")]
    if unknown:
        raise BadInput(
            f"--tags: unknown role(s) {', '.join(unknown)} (roles: {', '.join(ROLES)}; bios: the BMC's step)"
        )
    return ",".join(names)


def profile_ref(ref: str | None) -> str | None:
    """A profile reference the playbook can load: a shipped name as it is, a file as an absolute path
    (ansible-playbook runs in playbooks/, not in the caller's directory)."""
    if ref and ref not in shipped() and Path(ref).exists():
        return str(Path(ref).resolve())
    return ref


def run_apply(
    hosts: list[str],
    inventory: str,
    *,
    plans: dict[str, dict] | None = None,
    profiles: dict[str, str | None] | None = None,
    force: bool = False,
    smoke_gate: bool = False,
    check: bool = False,
    diff: bool = False,
    tags: str | None = None,
    forks: int | None = None,
    run_id: str,
    on_event=None,
    reboot: bool = False,
    reboot_timeout: int = REBOOT_TIMEOUT,
    gates: dict | None = None,
) -> tuple[dict[str, HostApply], RunResult]:
    """Run apply.yml for ``hosts``, one outcome per host. Each host's facts and plan come first, in
    the same run (``hostkit.tuning.facts`` and ``hostkit.tuning.plan``, from ``profiles``: host ->
    profile name or file, None for the default; ``force``; ``smoke_gate``: a smoke test follows,
    so unbooted kernel arguments are refused without ``reboot``), unless ``plans`` (host -> plan
    document) are given.

    A host that failed mid-run gets this run's lock released; an unreachable one keeps it (the
    next run names it, ``hostkit unlock`` clears it). With ``reboot``, a host whose kernel
    arguments changed is rebooted by the isolcpus role (bounded by ``reboot_timeout``) and its
    ``/proc/cmdline`` re-checked; a host that does not come back fails alone.

    ``gates`` (the smoke options: ``duration``, ``target_p999_ms``; None for the profile's) runs the
    tune role's gates in the same run, as playbooks/rollout.yml does: a smoke test before the apply
    (evidence), then the audit (strict with ``reboot``) and the smoke gate. A host that fails a gate
    keeps its apply's status; the gate is in :attr:`HostApply.failed_gate`.
    """
    planning = (
        {"hostkit_plans": plans}
        if plans is not None
        else {
            "hostkit_profiles": {h: profile_ref((profiles or {}).get(h)) for h in hosts},
            "hostkit_force": force,
            "hostkit_smoke_gate": smoke_gate or gates is not None,
            "hostkit_reboot": reboot,
        }
    )
    gating = (
        {}
        if gates is None
        else {
            "hostkit_gates": True,
            "hostkit_smoke_duration": gates.get("duration"),
            "hostkit_target_p999_ms": gates.get("target_p999_ms"),
        }
    )
    run = run_playbook(
        "apply.yml",
        inventory,
        limit=",".join(hosts),
        forks=forks or max(5, len(hosts)),
        check=check,
        diff=diff,
        tags=validate_tags(tags),
        run_id=run_id,
        on_event=on_event,
        extravars={
            **planning,
            **gating,
            "hostkit_run_id": run_id,
            "hostkit_controller": controller_id(),
            # Only when asked: extra vars win over the inventory, whose isolcpus_reboot_ok
            # must keep working without --reboot.
            **(
                {
                    "isolcpus_reboot_ok": True,
                    "isolcpus_reboot_timeout": int(reboot_timeout),
                    "hostkit_reboot_timeout": int(reboot_timeout),  # the wait after a BMC's power cycle
                }
                if reboot
                else {}
            ),
        },
    )
    out = {name: _host_result(name, run) for name in hosts}
    if run.status in ("canceled", "timeout"):  # SIGINT or a timeout: every host may still hold our lock
        failed = [n for n in hosts if not out[n].locked_by]
        for n in hosts:
            if out[n].status in ("ok", "changed"):
                out[n].status, out[n].msg = "failed", f"run {run.status} before this host finished"
    else:
        failed = [n for n in hosts if out[n].status == "failed" and out[n].locked and not out[n].locked_by]
    if failed:
        unlock(inventory, ",".join(failed), run_id=run_id)
    return out, run


def _host_result(name: str, run: RunResult) -> HostApply:
    hr = run.hosts.get(name)
    if hr is None:
        return HostApply(name, "failed", msg=run.error or "no result from Ansible (see the run's artifacts)")
    out = HostApply(name, hr.status, changed=hr.changed, msg=hr.msg)
    for t in hr.tasks:
        res = t.res or {}
        if t.action in GATE_ACTIONS:  # the tune role's gates (hostkit_gates), after the apply's tasks
            _gate_result(out, t)
            continue
        if t.action == "hostkit.tuning.bios":  # the BIOS: planned (then PATCHed), then the power cycle
            if t.status != "skipped":
                first, last = (
                    {k: res[k] for k in ("plan", "pending") if k in res},
                    {k: res[k] for k in ("cycles", "steps", "msg") if k in res},
                )
                out.bios = {**first, **(out.bios or {}), **last}  # the plan before any change; the cycle's outcome
            continue
        if "after_bios" in res:  # the OS planned for the topology the BIOS gives at its next power cycle
            out.after_bios = res["after_bios"]
        if "prediction" in res:  # after that cycle: the booted host's plan against the one applied before it
            out.after_bios = {**(out.after_bios or {}), "prediction": res["prediction"]}
        if "plan" in res or "refusals" in res or res.get("bad_input"):  # the facts and plan, before any change
            out.refused_parts = list((res.get("plan") or {}).get("refused_parts") or [])
            out.bad_input = bool(res.get("bad_input"))
            if res.get("refusals"):
                out.status, out.refused = "refused", list(res["refusals"])
            continue
        out.locked = out.locked or bool(res.get("acquired"))
        role = t.role or "-"
        r = out.roles.setdefault(role, {"changed": 0, "failed": False, "tasks": 0})
        r["tasks"] += 1
        r["changed"] += int(t.changed)
        r["failed"] = r["failed"] or t.status in ("failed", "unreachable")
        msg, head = str(res.get("msg", "")), f"{role}: not applicable ("
        if t.status == "ok" and msg.startswith(head) and msg.endswith(")"):
            # a role with nothing to do on this host says why in one debug line (no module call)
            r.setdefault("not_applicable", []).append(msg[len(head) : -1])
        for leaf in result_leaves(res):
            if leaf.get("skipped_reason"):  # a step that could not do its job on this host, and why
                r.setdefault("skipped", []).append(leaf["skipped_reason"])
            if leaf.get("not_applicable") and isinstance(leaf["not_applicable"], str):
                r.setdefault("not_applicable", []).append(leaf["not_applicable"])
            if leaf.get("would_run") and leaf.get("argv"):
                out.would_run.append(list(leaf["argv"]))
        if "reboot_required" in res:  # the last word wins: the re-check after a reboot clears it
            out.reboot_required = bool(res["reboot_required"])
        out.irq_refused += res.get("refused") or []
        out.diffs += [{"task": t.task, **d} for d in task_diffs(res)]
        if res.get("locked"):
            out.locked_by = res.get("holder")
            out.msg = f"{res.get('msg')} [{stale_note(res.get('holder') or {})}]"
    if out.failed_gate:  # the apply itself passed: its status is its changes'
        out.status = "ok"
    if out.status == "ok" and out.changed:
        out.status = "changed"
    return out


GATE_ACTIONS = ("hostkit.tuning.audit", "hostkit.tuning.smoke")


def _gate_result(out: HostApply, t) -> None:
    """One task of the tune role's gates: the audit, or a smoke run ("before" until the audit ran,
    then "after", the gate). A run that could not give its result (unreachable) keeps Ansible's
    message as its ``msg``. A host lost in the "before" run failed before its apply: no gate."""
    if t.status == "skipped":
        return
    res = dict(t.res or {})
    failed = t.status in ("failed", "unreachable")
    if failed:
        res.setdefault("msg", out.msg or t.status)
        res["failed"] = True
    if t.action.endswith(".audit"):
        out.audit, gate = res, "audit"
    elif out.audit is None:
        out.smoke["before"], gate = res, None
    else:
        out.smoke["after"], gate = res, "smoke"
    if failed and gate:
        out.failed_gate = out.failed_gate or gate


def result_leaves(res: dict):
    """A task's result and the results inside it: each change of a ``hostkit_changes`` call (and the
    commands a ``bootargs`` change ran), or each item of a loop."""
    yield res
    for sub in res.get("results") or []:
        if isinstance(sub, dict):
            yield sub
            yield from (ran for ran in sub.get("ran") or [] if isinstance(ran, dict))


def task_diffs(res: dict) -> list[dict]:
    """The diffs a task result carries (--diff) that change something."""
    d = res.get("diff")
    if not d:
        return []
    return [x for x in (d if isinstance(d, list) else [d]) if x.get("before") != x.get("after")]
