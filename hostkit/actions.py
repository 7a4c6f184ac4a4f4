"""The work of the collection's action plugins (``hostkit.tuning.facts``, ``plan``, ``smoke``,
``audit``, ``rollback``, ``bios_facts``, ``bios``): the same code the CLI runs, over the connection Ansible already holds.

An action plugin (``action_plugins/<name>.py``, ``plugins/action/`` in the collection) is a thin
shell: it wraps its connection as a :class:`Remote` (:class:`ActionRemote`), calls one function
here and returns its dict. Each function takes plain values and returns what the module returns,
or raises :class:`HostkitError` with the one-line reason the host fails with. Nothing here knows
Ansible's classes, so tests/unit/test_collection_actions.py drives every rule against a fake remote.

One rule, two faces:

* the agent is run from the host's cache exactly as ``playbooks/agent.yml`` and the audit run it
  (:mod:`hostkit.ansible.agent_zipapp`; a host without this version gets it once, on the same
  command's stdin);
* the plan is :func:`hostkit.plan.build_plan` with :func:`hostkit.profiles.for_host`, and the
  smoke-before-reboot refusal is :func:`hostkit.api.smoke_before_reboot`;
* the smoke gate is :func:`hostkit.smoke.gate.gate_record` (MISSED or a failed run fails the
  host, INCONCLUSIVE never does), the rollout's gate;
* the audit is :func:`hostkit.audit.runner.audit_host` and :func:`hostkit.api.audit_failed`;
* the rollback is the agent's, judged by :func:`hostkit.agent.rollback.restored`.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hostkit.agent import lock as host_lock
from hostkit.agent.changes import change_set
from hostkit.ansible import agent_zipapp
from hostkit.ansible.agent_call import agent_error, parse_json_line
from hostkit.errors import BadInput, HostkitError, Refused
from hostkit.paths import state_dir, user_cache_dir


class Remote(Protocol):
    """A shell on one host: ``run`` returns ``(rc, stdout, stderr)`` of ``sh -c command`` (become
    applied), with ``stdin`` on its standard input."""

    def run(self, command: str, stdin: bytes | None = None) -> tuple[int, str, str]: ...


class ActionRemote:
    """:class:`Remote` over an action plugin's connection (``_low_level_execute_command``)."""

    def __init__(self, action) -> None:
        self._action = action

    def run(self, command: str, stdin: bytes | None = None) -> tuple[int, str, str]:
        # No terminal (ssh's use_tty would give -tt): stdout and stderr apart, lines as the host
        # wrote them, as playbooks/agent.yml runs the agent.
        conn = self._action._connection
        try:
            tty = conn.get_option("use_tty")
        except (KeyError, AttributeError):
            tty = None
        if tty:
            conn.set_option("use_tty", False)
        try:
            res = self._action._low_level_execute_command(command, sudoable=True, in_data=stdin)
        finally:
            if tty:
                conn.set_option("use_tty", tty)
        return int(res.get("rc", 1)), res.get("stdout", ""), res.get("stderr", "")


# ----------------------------------------------------------------------------- the agent


def agent_artifact() -> Path:
    """The agent zipapp, built on the controller once per hostkit version: under ``HOSTKIT_STATE_DIR``
    when set (hostkit's own runs), else in the user's cache (an AWX job's or an execution
    environment's working directory is not the place for it)."""
    if os.environ.get("HOSTKIT_STATE_DIR"):
        return agent_zipapp.build(state_dir() / "agent")
    return agent_zipapp.build(user_cache_dir() / "agent")


def run_agent(
    remote: Remote, args: list[str], *, sysroot: str = "/", python: str = "/usr/bin/python3", stdin: bytes | None = None
) -> dict:
    """The agent's JSON document for ``args`` on the host (under ``sysroot``), ``stdin`` its input.
    The host's own bad input (the agent's exit 2) and a host that printed no JSON raise
    :class:`HostkitError`."""
    artifact = agent_artifact()
    tail = " ".join(shlex.quote(a) for a in [python, *args, "--sysroot", sysroot or "/"])
    command = f"{agent_zipapp.agent_command(artifact)} {tail}"
    rc, out, err = remote.run(command, stdin=stdin)
    if rc == agent_zipapp.CACHE_MISS and stdin is None:  # not there yet: the same command, the agent on its stdin
        rc, out, err = remote.run(
            f"{agent_zipapp.agent_command(artifact, upload=True)} {tail}", stdin=artifact.read_bytes()
        )
    elif rc == agent_zipapp.CACHE_MISS:  # the agent stored first; then the same command, its input on stdin
        rc, out, err = remote.run(agent_zipapp.store_command(artifact), stdin=artifact.read_bytes())
        if rc == 0:
            rc, out, err = remote.run(command, stdin=stdin)
    doc = parse_json_line(out)
    if doc is None:
        raise HostkitError(f"the hostkit agent printed no JSON (exit {rc}): {(err or out).strip()[-300:]}")
    if agent_error(doc):  # exit 2: the host's own input (its sysroot) is bad; nothing was changed
        raise (BadInput if doc.get("exit_code", 2) == 2 else HostkitError)(doc["error"])
    return doc


def changes(
    remote: Remote, args: dict, *, check_mode: bool, diff_mode: bool = False, python: str = "/usr/bin/python3"
) -> dict:
    """``hostkit.tuning.hostkit_changes`` in one agent call: every change checked here, on the
    controller, with the module's own rules (:func:`change_set.parse`; bad input changes nothing and
    never reaches the host), then made by the host's agent (``changes``, the request on its stdin),
    which returns the module's result. The agent carries its compiled code; the module would send
    Ansible's module_utils to be compiled on the host at every call."""
    try:
        parsed = change_set.parse(args["changes"])
    except change_set.ModuleFailure as exc:
        return dict(exc.fields, failed=True, changed=False, msg=str(exc))
    req = change_set.request(args, parsed, check_mode, diff_mode)
    return run_agent(
        remote, ["changes"], sysroot=args.get("sysroot") or "/", python=python, stdin=json.dumps(req).encode()
    )


def lock(
    remote: Remote, args: dict, *, check_mode: bool, diff_mode: bool = False, python: str = "/usr/bin/python3"
) -> dict:
    """``hostkit.tuning.hostkit_lock`` in one agent call: the module's options (checked by the
    plugin) and the mode on the agent's stdin; the module's result back."""
    req = dict({k: v for k, v in args.items() if k != "sysroot"}, check_mode=bool(check_mode))
    return run_agent(
        remote, ["lock"], sysroot=args.get("sysroot") or "/", python=python, stdin=json.dumps(req).encode()
    )


# The modules whose action plugin (action_plugins/hostkit_changes.py, and links to it) has the host's
# agent do their work when hostkit is on the controller: name -> (the module's argument spec, the work).
AGENT_MODULES = {
    "hostkit_changes": (change_set.ARGUMENT_SPEC, changes),
    "hostkit_lock": (host_lock.ARGUMENT_SPEC, lock),
}


def facts(remote: Remote, *, sysroot: str = "/", python: str = "/usr/bin/python3") -> dict:
    """``hostkit.tuning.facts``: the agent's facts as the Ansible fact ``hostkit_facts``."""
    doc = run_agent(remote, ["facts"], sysroot=sysroot, python=python)
    return {"changed": False, "ansible_facts": {"hostkit_facts": doc}}


# ----------------------------------------------------------------------------- the plan


@dataclass(frozen=True, kw_only=True)
class PlanArgs:
    """``hostkit.tuning.plan``'s options (the profile and overrides default to the host's
    ``hostkit_profile`` and ``hostkit_overrides``, as for the CLI)."""

    host: str
    facts: dict
    hostvars: dict
    profile: str | None = None
    overrides: dict | None = None
    force: bool = False
    smoke_gate: bool = False  # a smoke gate follows the apply
    reboot: bool = False  # the run reboots into new kernel arguments before that gate
    writable: bool = True  # the plan will be applied (not --check): a read-only sysroot is bad input
    # After a power cycle through the BMC (hostkit.tuning.bios): the topology its BIOS now says
    # (NUMA nodes per socket, threads per core); the booted OS must show it before it is planned.
    bios_after: dict | None = None
    # Before it: what the next power cycle changes of the topology (the BIOS plan's cycle_changes,
    # settings pending or to be PATCHed); the OS is planned for it (hostkit.plan.after_bios).
    bios_pending: dict | None = None
    # After it: the plan applied before the cycle; the result says whether the booted host's is the same.
    planned_before: dict | None = None


class PlanRefused(Refused):
    """The plan's guards refused the host: every reason, and the one line the host fails with."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("refused: " + "; ".join(reasons))
        self.reasons = reasons


def plan(args: PlanArgs) -> dict:
    """The host's plan document; :class:`PlanRefused` with the plan's refusals, :class:`BadInput`
    for input these facts show to be bad (nothing is changed on the host either way)."""
    from hostkit.ansible.run import new_run_id
    from hostkit.api import require_writable, smoke_before_reboot
    from hostkit.plan import build_plan
    from hostkit.plan.after_bios import facts_after_bios
    from hostkit.profiles import for_host

    if not isinstance(args.facts, dict) or "kernel" not in args.facts:
        raise BadInput("facts: no hostkit facts for this host (run hostkit.tuning.facts first, or pass facts)")
    if args.writable:
        require_writable(args.host, args.facts)
    if args.bios_after:
        _booted_as_the_bios_says(args.host, args.bios_after, args.facts)
    facts, after_bios = facts_after_bios(args.facts, args.bios_pending)
    hostvars = dict(args.hostvars)
    if args.overrides is not None:
        hostvars["hostkit_overrides"] = args.overrides
    try:
        profile, pinned = for_host(args.host, hostvars, args.profile)
        p = build_plan(facts, profile, pinned, force=args.force, host=args.host)
    except BadInput as exc:
        raise BadInput(f"{args.host}: {exc}") from None
    refused = list(p.refused)
    unbooted = smoke_before_reboot(p, args.facts)
    if args.smoke_gate and not args.reboot and unbooted:
        refused.append(unbooted)
    if refused:
        raise PlanRefused(refused)
    doc = p.to_dict()
    return {
        "changed": False,
        "plan": doc,
        "profile": p.profile,
        "reboot_needed": bool(unbooted),
        "run_id": new_run_id(),
        **({"after_bios": after_bios} if after_bios else {}),
        **({"prediction": _prediction(args.planned_before, doc)} if args.planned_before else {}),
    }


def _prediction(before: dict, booted: dict) -> dict:
    """Whether the plan applied before a BIOS power cycle is the booted host's (what differs is
    applied now, by the roles' second pass)."""
    from hostkit.plan.after_bios import prediction_misses

    misses = prediction_misses(before, booted)
    return {"held": not misses, "misses": misses}


def _booted_as_the_bios_says(host: str, after: dict, facts: dict) -> None:
    """After the BMC's power cycle: the booted OS's topology against what the BIOS now says; a
    cross-layer mismatch fails the host before it is planned (a plan for the wrong topology)."""
    from hostkit.bmc.client import BmcError
    from hostkit.bmc.plan import cross_layer

    topo = facts.get("topology") or {}
    problems = cross_layer(
        after, {"numa_per_socket": topo.get("numa_per_socket"), "threads_per_core": topo.get("threads_per_core")}
    )
    if problems:
        raise BmcError(f"{host}: after the power cycle: " + "; ".join(problems))


# ----------------------------------------------------------------------------- the smoke gate


def smoke(
    remote: Remote,
    *,
    host: str,
    hostvars: dict,
    options: dict,
    profile: str | None = None,
    gate: bool = True,
    sysroot: str = "/",
    python: str = "/usr/bin/python3",
) -> dict:
    """``hostkit.tuning.smoke``: the smoke test on the host, its report and the gate's record
    (:func:`hostkit.smoke.gate.gate_record`). With ``gate``, MISSED or a run that failed fails the
    host; INCONCLUSIVE never does. An option the task does not give is the profile's, as for the CLI."""
    from hostkit.api import with_profile_smoke
    from hostkit.profiles import for_host
    from hostkit.smoke import gate as smoke_gate
    from hostkit.smoke.options import options_from_mapping

    opts, given = options_from_mapping(options, source=f"{host}: smoke options")
    opts = with_profile_smoke(opts, for_host(host, hostvars, profile)[0], given)
    doc = None
    try:
        doc = run_agent(remote, ["smoke", *opts.to_agent_args()], sysroot=sysroot, python=python)
        rec = smoke_gate.gate_record(doc)
    except BadInput:
        raise
    except HostkitError as exc:
        rec = smoke_gate.gate_record(None, str(exc))
    out = {"changed": False, "smoke": doc, **rec, "msg": rec["why"]}
    if gate and rec["verdict"] in smoke_gate.GATE_FAILS:
        out["failed"] = True
    return out


# ----------------------------------------------------------------------------- the audit


@dataclass
class _Ran:
    """What testinfra's ``CommandResult`` offers the audit."""

    rc: int
    stdout: str
    stderr: str

    @property
    def exit_status(self) -> int:
        return self.rc

    @property
    def succeeded(self) -> bool:
        return self.rc == 0


class _File:
    def __init__(self, host: RemoteHost, path: str) -> None:
        ran = host.run("cat -- %s", path)
        self.exists, self.content_string = ran.rc == 0, ran.stdout if ran.rc == 0 else ""


class RemoteHost:
    """A testinfra-shaped host over a :class:`Remote`: ``run(command, *args)`` quotes the arguments
    into the command as testinfra does; ``backend.run_input`` sends data on stdin (the agent)."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self.backend = self

    def run(self, command: str, *args) -> _Ran:
        return _Ran(*self.remote.run(command % tuple(shlex.quote(str(a)) for a in args)))

    def run_input(self, data: bytes, command: str, *args) -> _Ran:
        return _Ran(*self.remote.run(command % tuple(shlex.quote(str(a)) for a in args), stdin=data))

    def file(self, path: str) -> _File:
        return _File(self, path)


def audit(
    remote: Remote,
    *,
    host: str,
    hostvars: dict,
    profile: str | None = None,
    force: bool = False,
    strict: bool = False,
    sysroot: str = "/",
    python: str = "/usr/bin/python3",
) -> dict:
    """``hostkit.tuning.audit``: the audit of :func:`hostkit.audit.runner.audit_host` on the host;
    drift (and with ``strict`` a pending reboot) fails it, the rule of ``hostkit audit``."""
    from hostkit.api import audit_failed, audit_failure
    from hostkit.audit.runner import audit_host
    from hostkit.profiles import for_host
    from hostkit.tunables import role_paths

    prepared = for_host(host, hostvars, profile)
    doc = audit_host(
        RemoteHost(remote),
        host,
        sysroot,
        prepared,
        force=force,
        artifact=str(agent_artifact()),
        python=python,
        paths=role_paths(hostvars),
    )
    out = {"changed": False, "audit": doc, "status": doc["status"]}
    if audit_failed(doc["status"], strict):
        out["failed"] = True
        out["msg"] = f"audit {audit_failure(doc)}"
    else:
        out["msg"] = f"audit {doc['status']}: " + ", ".join(f"{n} {s}" for s, n in doc["counts"].items() if n)
    return out


# ----------------------------------------------------------------------------- the rollback


def rollback(
    remote: Remote,
    *,
    run_id: str | None = None,
    check: bool = False,
    sysroot: str = "/",
    python: str = "/usr/bin/python3",
) -> dict:
    """``hostkit.tuning.rollback``: the agent restores a run (``run_id``, else the newest) and
    re-checks every path; the host fails unless :func:`hostkit.agent.rollback.restored`."""
    from hostkit.agent.rollback import restored
    from hostkit.api import RollbackRequest

    args = RollbackRequest(inventory="-", run_id=run_id or None, check=check).agent_args()
    doc = run_agent(remote, args, sysroot=sysroot, python=python)
    out = {
        "changed": bool(doc["changed"]) and not check,
        "rollback": doc,
        "reboot_required": bool(doc["reboot_required"]),
        "runs": doc["runs"],
    }
    if not restored(doc):
        out["failed"] = True
        mismatched = [m["path"] for m in (doc.get("verify") or {}).get("mismatches") or []]
        out["msg"] = "rollback incomplete: " + "; ".join([*map(str, doc["errors"]), *map(str, mismatched)])[:400]
    else:
        out["msg"] = (
            f"runs {', '.join(doc['runs']) or '(none)'} rolled back"
            + (" (check: nothing changed)" if check else "")
            + ("; reboot required" if doc["reboot_required"] else "")
        )
    return out


# ----------------------------------------------------------------------------- the BMC


def _bmc(host: str, hostvars: dict):
    from hostkit.bmc.client import bmc_settings, connect

    if hostvars.get("hostkit_bmc") is None:
        raise BadInput(f"{host}: no hostkit_bmc: this host has no BMC in the inventory")
    settings = bmc_settings(host, hostvars["hostkit_bmc"])
    return settings, connect(settings)


def bios_facts(*, host: str, hostvars: dict) -> dict:
    """``hostkit.tuning.bios_facts``: what the host's BMC says (``hostkit bios facts``), as the fact
    ``hostkit_bios``. Runs on the controller against the BMC; the host is not contacted."""
    from hostkit.bmc.facts import gather

    _settings, bmc = _bmc(host, hostvars)
    doc = gather(bmc)
    return {"changed": False, "bios": doc, "ansible_facts": {"hostkit_bios": doc}}


def bios(
    *,
    host: str,
    hostvars: dict,
    profile: str | None,
    overrides: dict | None,
    reboot: bool,
    check: bool,
    patch: bool = True,
    run_id: str | None = None,
    rollback: bool = False,
) -> dict:
    """``hostkit.tuning.bios``: the host's profile's bios intents through its BMC, as ``hostkit bios
    apply`` sets them: refused (nothing PATCHed) where the map or the registry does not allow them,
    journaled on the controller (under ``run_id``), PATCHed (pending until the next reset), and with
    ``reboot`` one power cycle, after which a setting still pending fails the host. ``patch`` false:
    the plan alone (the tune role plans the BIOS before the OS, and power-cycles after the OS's
    roles: one cycle for both). ``rollback``: the journaled values back instead (``run_id``'s, or
    every one), with ``reboot`` in one power cycle. In check mode: the plan (or the restore) and
    its diff, nothing PATCHed, no cycle."""
    from hostkit.bmc import apply as bmc_apply
    from hostkit.bmc.facts import gather
    from hostkit.bmc.fleet import cycle, rollback_host
    from hostkit.bmc.plan import plan_bios
    from hostkit.profiles import for_host

    given = {**hostvars, **({"hostkit_overrides": overrides} if overrides is not None else {})}
    prof, _pinned = for_host(host, given, profile)
    settings, bmc = _bmc(host, hostvars)
    if rollback and not bmc_apply.journaled(host, run_id):  # decided before the BMC is read
        return {"changed": False, "restore": {}, "cycles": 0, "msg": "no BIOS change of this run to roll back"}
    facts = gather(bmc)
    if rollback:
        doc = rollback_host(
            bmc, host, facts, reboot, bmc_apply.SHUTDOWN_TIMEOUT, lambda _line: None, check=check, run_id=run_id
        )
        before = {k: facts["attributes"].get(k) for k in doc["restore"]}
        return {
            "changed": bool(doc["restore"]) or bool(doc["cycles"]),
            **doc,
            "diff": {"before": before, "after": doc["restore"]},
        }
    plan = plan_bios(prof["bios"], facts, settings.vendor_map, source=f"profile {prof['name']}")
    if plan["refused"]:
        raise BadInput(f"{host}: " + "; ".join(plan["refused"]))
    to_patch = plan["patch"] if patch else {}
    pending = {s["attribute"]: s["value"] for s in plan["steps"] if s["state"] in ("change", "pending")}
    out = {
        "changed": bool(to_patch) or (reboot and bool(pending)),
        "plan": plan,
        "pending": pending,
        "cycles": 0,
        "diff": {"before": {k: facts["attributes"].get(k) for k in pending}, "after": pending},
    }
    if check:
        return out
    if to_patch:
        bmc_apply.write_journal(host, settings.url, {k: facts["attributes"].get(k) for k in to_patch}, run_id)
        bmc_apply.patch(bmc, to_patch, facts["apply_times"])
    if reboot and pending:
        out["steps"] = cycle(bmc, host, pending, bmc_apply.SHUTDOWN_TIMEOUT, lambda _line: None)[0]
        out["cycles"] = 1
    return out


# ----------------------------------------------------------------------------- the plugins' shell

_HOST = {"sysroot": {"type": "str", "default": ""}}
# Each module's options, as ansible's argument_spec: the action plugins validate their task's
# arguments with it, and library/<name>.py declares the same (tests/unit/test_collection_actions.py).
ARG_SPECS: dict[str, dict] = {
    "facts": {**_HOST},
    "plan": {
        "facts": {"type": "dict"},
        "profile": {"type": "str"},
        "overrides": {"type": "dict"},
        "force": {"type": "bool", "default": False},
        "smoke_gate": {"type": "bool", "default": False},
        "reboot": {"type": "bool", "default": False},
        "bios_after": {"type": "dict"},
        "bios_pending": {"type": "dict"},
        "planned_before": {"type": "dict"},
    },
    "smoke": {
        **_HOST,
        "profile": {"type": "str"},
        "options": {"type": "dict", "default": {}},
        "gate": {"type": "bool", "default": True},
    },
    "audit": {
        **_HOST,
        "profile": {"type": "str"},
        "force": {"type": "bool", "default": False},
        "strict": {"type": "bool", "default": False},
    },
    "rollback": {**_HOST, "run_id": {"type": "str"}, "check": {"type": "bool", "default": False}},
    "bios_facts": {},
    "bios": {
        "profile": {"type": "str"},
        "overrides": {"type": "dict"},
        "reboot": {"type": "bool", "default": False},
        "patch": {"type": "bool", "default": True},
        "run_id": {"type": "str"},
        "rollback": {"type": "bool", "default": False},
    },
}


def host_python(task_vars: dict, template=None) -> str:
    """The host's python3 for the agent: the host's ``ansible_python_interpreter`` (rendered by
    ``template``, the action's templar, when it is a template such as the local inventory's
    ``{{ ansible_playbook_python }}``), else the one Ansible discovered there, else ``/usr/bin/python3``."""
    python = task_vars.get("ansible_python_interpreter")
    if template is not None and isinstance(python, str) and "{{" in python:
        python = template(python)
    return str(
        python or (task_vars.get("ansible_facts") or {}).get("discovered_interpreter_python") or "/usr/bin/python3"
    )


def dispatch(name: str, action, args: dict, task_vars: dict) -> dict:
    """Run module ``name`` for an action plugin (``action``: its ``ActionModule``; ``args``: the
    task's arguments validated with :data:`ARG_SPECS`). hostkit's errors become a failed host
    with their one line; nothing has changed on it when the error is bad input."""
    host = task_vars.get("inventory_hostname") or "localhost"
    hostvars = {k: v for k, v in task_vars.items() if k.startswith(("hostkit_", "ansible_"))}
    where = {
        "sysroot": args.get("sysroot") or task_vars.get("hostkit_sysroot") or "/",
        "python": host_python(task_vars, getattr(getattr(action, "_templar", None), "template", None)),
    }
    remote = ActionRemote(action)
    try:
        if name == "facts":
            return facts(remote, **where)
        if name == "plan":
            return plan(
                PlanArgs(
                    host=host,
                    facts=args["facts"] if args.get("facts") is not None else task_vars.get("hostkit_facts"),
                    hostvars=hostvars,
                    profile=args["profile"],
                    overrides=args["overrides"],
                    force=args["force"],
                    smoke_gate=args["smoke_gate"],
                    reboot=args["reboot"],
                    writable=not _check_mode(action),
                    bios_after=args.get("bios_after"),
                    bios_pending=args.get("bios_pending"),
                    planned_before=args.get("planned_before"),
                )
            )
        if name == "smoke":
            return smoke(
                remote,
                host=host,
                hostvars=hostvars,
                options=args["options"],
                profile=args["profile"],
                gate=args["gate"],
                **where,
            )
        if name == "audit":
            return audit(
                remote,
                host=host,
                hostvars=hostvars,
                profile=args["profile"],
                force=args["force"],
                strict=args["strict"],
                **where,
            )
        if name == "bios_facts":
            return bios_facts(host=host, hostvars=hostvars)
        if name == "bios":
            return bios(
                host=host,
                hostvars=hostvars,
                profile=args["profile"],
                overrides=args["overrides"],
                reboot=args["reboot"],
                check=_check_mode(action),
                patch=args["patch"],
                run_id=args.get("run_id"),
                rollback=args["rollback"],
            )
        if name == "rollback":  # Ansible's --check is the rollback's own check
            return rollback(remote, run_id=args["run_id"], check=args["check"] or _check_mode(action), **where)
    except HostkitError as exc:
        # What hostkit apply tells apart: bad input (exit 2; it stops every host before any change)
        # and a plan's refusals (exit 3; that host alone is not applied).
        marks = (
            {"bad_input": True}
            if isinstance(exc, BadInput)
            else {"refusals": exc.reasons}
            if isinstance(exc, PlanRefused)
            else {}
        )
        return {"failed": True, "changed": False, "msg": str(exc), **marks}
    raise ValueError(f"no hostkit.tuning module {name!r}")


def _check_mode(action) -> bool:
    """Whether the task runs under Ansible's --check."""
    return bool(getattr(getattr(action, "_task", None), "check_mode", False))
