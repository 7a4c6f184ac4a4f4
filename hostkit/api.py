"""hostkit as a library: per operation, one typed request in and one result out.

Every function runs its steps downward (facts -> plan -> Ansible -> results) and returns a result
shaped like ansible-runner's: ``.status`` (``successful``, ``failed``, ``refused``), ``.rc``
(hostkit's exit code, see :mod:`hostkit.errors`), and per-host results in ``.hosts``; ``to_dict()``
is the command's JSON document. Bad input raises :class:`~hostkit.errors.BadInput` before any
host is changed. Nothing here prints: the CLI (:mod:`hostkit.cli`) builds a request, calls one
function and prints its result.

``on_event(host, task, status)``, where a function takes it, is called for every per-host task
result of the Ansible run as it arrives (live progress).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hostkit.agent.rollback import restored
from hostkit.ansible.agent_call import SMOKE_OUTPUT, AgentReply, call_agent
from hostkit.ansible.apply import ROLES, HostApply, run_apply, validate_tags
from hostkit.ansible.apply import unlock as unlock_hosts
from hostkit.ansible.inventory import load_inventory
from hostkit.ansible.reboot import DEFAULT_TIMEOUT as REBOOT_TIMEOUT
from hostkit.ansible.reboot import Rebooted, reboot_hosts
from hostkit.ansible.run import RunOptions, RunResult, new_run_id, run_options
from hostkit.errors import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, BadInput
from hostkit.smoke.gaps import GapOptions
from hostkit.smoke.options import SmokeOptions

if TYPE_CHECKING:
    from hostkit.plan.model import Plan

OnEvent = Callable[[str, str, str], None] | None

# The apply's roles in their order: what --tags names, what the progress display counts.
APPLY_ROLES: list[str] = ROLES


@contextmanager
def output_options(
    *, verbosity: int = 0, log: str | None = None, echo: Callable[[str], None] | None = None
) -> Iterator[None]:
    """A command's -v/--log for every operation inside the block: each Ansible run it makes shows
    Ansible's own output (``verbosity``, 0-4, through ``echo``) and logs to ``log`` (default: ansible.log
    in each run's directory); the audit, which runs no Ansible, echoes its steps and logs testinfra's
    commands the same way."""
    with run_options(RunOptions(verbosity=verbosity, log=log, echo=echo)):
        yield


def check_reboot_timeout(seconds: int) -> None:
    if not 30 <= seconds <= 7200:
        raise BadInput(f"--reboot-timeout must be 30-7200 seconds, got {seconds}")


class Result:
    """What every result has: ``rc`` (hostkit's exit code), ``status`` named after it (as
    ansible-runner's: ``successful``, ``failed``; and ``refused`` for a safety guard's exit 3) and
    ``to_dict()``, the command's JSON document."""

    @property
    def rc(self) -> int:
        raise NotImplementedError

    @property
    def status(self) -> str:
        return {EXIT_OK: "successful", EXIT_REFUSED: "refused"}.get(self.rc, "failed")

    def to_dict(self) -> dict:
        raise NotImplementedError


def _replies(replies: dict[str, AgentReply]) -> dict[str, dict]:
    return {h: r.to_dict() for h, r in replies.items()}


def fleet_document(run_id: str | None, hosts: dict[str, dict], **extra) -> dict:
    """The one JSON envelope of every ``-i`` command: the Ansible run it made (null where it ran
    none) and one entry per host, then what the command adds (docs/contracts.md)."""
    return {"run_id": run_id, "hosts": hosts, **extra}


# ----------------------------------------------------------------------------- facts


@dataclass(frozen=True, kw_only=True)
class FactsRequest:
    inventory: str | None = None  # None: the sysroot below, on this machine
    limit: str | None = None
    sysroot: str = "/"
    forks: int | None = None


@dataclass
class FactsResult(Result):
    hosts: dict[str, AgentReply]  # doc: the host's facts
    run: RunResult | None = None  # None for a local sysroot

    @property
    def failed(self) -> list[str]:
        return [h for h, r in self.hosts.items() if not r.ok]

    @property
    def rc(self) -> int:
        return EXIT_FAILED if self.failed else EXIT_OK

    def to_dict(self) -> dict:
        """A local sysroot: the facts document; an inventory: per host ``{"status", "facts"}``."""
        if self.run is None:
            return self.hosts["localhost"].doc
        return fleet_document(
            self.run.run_id,
            {h: {"status": "ok", "facts": r.doc} if r.ok else r.to_dict() for h, r in self.hosts.items()},
        )


def facts(req: FactsRequest, on_event: OnEvent = None) -> FactsResult:
    if req.inventory is None:
        from hostkit.facts import gather

        return FactsResult({"localhost": AgentReply("localhost", "ok", doc=gather(req.sysroot))})
    replies, run = call_agent(req.inventory, ["facts"], req.limit, forks=req.forks, on_event=on_event)
    from hostkit.bmc.facts import add_to_replies

    add_to_replies(req.inventory, req.limit, replies)  # the BIOS of each host with a BMC
    return FactsResult(replies, run)


# ----------------------------------------------------------------------------- plan


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    inventory: str | None = None  # None: the sysroot below, on this machine
    limit: str | None = None
    sysroot: str = "/"
    profile: str | None = None  # default: each host's hostkit_profile, else bare-metal-inference
    force: bool = False  # allow isolation on a VM / deceptive topology
    forks: int | None = None
    writable: bool = False  # refuse a read-only sysroot (nothing could be applied there)


@dataclass
class HostPlan:
    name: str
    status: str  # ok | unreachable | failed
    facts: dict | None = None
    plan: Plan | None = None
    error: str | None = None
    # where the host's BMC has BIOS settings to apply that change its topology: the plan is made
    # for the topology after the power cycle (hostkit.plan.after_bios.facts_after_bios)
    after_bios: dict | None = None

    @property
    def planned(self) -> Plan:
        """The plan of a host whose status is ok."""
        assert self.plan is not None, f"{self.name}: no plan ({self.status})"
        return self.plan

    @property
    def refused(self) -> bool:
        return self.status == "ok" and bool(self.planned.refused)

    def to_dict(self) -> dict:
        if self.status != "ok":
            return {"status": self.status, "error": self.error}
        return {**self.planned.to_dict(), **({"after_bios": self.after_bios} if self.after_bios else {})}


@dataclass
class PlanResult(Result):
    hosts: dict[str, HostPlan]
    local: bool = False
    run_id: str | None = None  # the facts run the plans were made from (an inventory)

    @property
    def rc(self) -> int:
        if any(h.refused for h in self.hosts.values()):
            return EXIT_REFUSED
        return EXIT_FAILED if any(h.status != "ok" for h in self.hosts.values()) else EXIT_OK

    def to_dict(self) -> dict:
        """A local sysroot: the plan document; an inventory: the fleet envelope, host -> plan (or
        status and error)."""
        doc = {h: p.to_dict() for h, p in self.hosts.items()}
        return doc["localhost"] if self.local else fleet_document(self.run_id, doc)


def profile_names() -> list[str]:
    """The shipped profiles' names, the default first (``hostkit plan --help``)."""
    from hostkit.profiles import DEFAULT_PROFILE, shipped

    return sorted(shipped(), key=lambda n: (n != DEFAULT_PROFILE, n))


def host_profiles(hosts, profile: str | None) -> dict[str, tuple[dict, dict]]:
    """Every inventory host's profile and pinned values (:func:`hostkit.profiles.for_host`), loaded
    before any host is contacted: a bad profile or override anywhere is bad input, and nothing ran."""
    from hostkit.profiles import for_host

    return {h.name: for_host(h.name, h.vars, profile) for h in hosts}


def require_writable(name: str, facts: dict) -> None:
    """The rule of every plan that will be applied (apply, rollout, the collection's
    ``hostkit.tuning.plan`` outside --check): a read-only sysroot is bad input."""
    if not facts.get("sysroot_writable", True):
        raise BadInput(f"{name}: sysroot {facts['sysroot']} is read-only: nothing can be applied there")


def plan(req: PlanRequest, on_event: OnEvent = None) -> PlanResult:
    """Facts, then a plan per host. Profiles and overrides of every host are checked before any
    host is contacted; a host whose sysroot is bad input (the agent's exit 2) is bad input here."""
    from hostkit.plan import build_plan
    from hostkit.plan.after_bios import facts_after_bios
    from hostkit.profiles import load_profile

    if req.inventory is None:
        from hostkit.facts import gather

        local = gather(req.sysroot)
        return PlanResult(
            {
                "localhost": HostPlan(
                    "localhost",
                    "ok",
                    local,
                    build_plan(local, load_profile(req.profile), force=req.force, host="localhost"),
                )
            },
            local=True,
        )
    hosts = load_inventory(req.inventory, req.limit)
    profiles = host_profiles(hosts, req.profile)
    replies, run = call_agent(req.inventory, ["facts"], req.limit, forks=req.forks, on_event=on_event)
    bios = _bios_after_cycle(req, [h for h in hosts if h.vars.get("hostkit_bmc") is not None and h.name in replies])
    out = {}
    for name, r in replies.items():
        if r.exit_code == 2:
            raise BadInput(f"{name}: {r.error}")  # the host's sysroot is bad input, not a host failure
        if not r.ok:
            out[name] = HostPlan(name, r.status, error=r.error)
            continue
        if req.writable:
            require_writable(name, r.doc)
        profile, pinned = profiles[name]
        facts, after_bios = facts_after_bios(r.doc, bios.get(name, {}).get("after_cycle"))
        if "error" in bios.get(name, {}):
            after_bios = {"predicted": False, "why": bios[name]["error"]}
        try:
            p = build_plan(facts, profile, pinned, force=req.force, host=name)
        except BadInput as exc:
            raise BadInput(f"{name}: {exc}") from None
        out[name] = HostPlan(name, "ok", r.doc, p, after_bios=after_bios)
    return PlanResult(out, run_id=run.run_id if run else None)


def _bios_after_cycle(req: PlanRequest, hosts: list) -> dict[str, dict]:
    """Per host with a BMC: what its next power cycle changes of the topology, when the BIOS plan
    changes it (``after_cycle``: the plan's ``cycle_changes``), or why the BIOS could not be planned
    (``error``): the OS is planned for that topology, as hostkit apply plans it."""
    from hostkit.bmc import fleet as bmc_fleet

    if not hosts or req.inventory is None:
        return {}
    docs = bmc_fleet.run("plan", req.inventory, limit=",".join(h.name for h in hosts), profile=req.profile)
    out: dict[str, dict] = {}
    for name, doc in docs.items():
        if doc.get("status") != "ok":
            out[name] = {"error": "the OS planned as the host is now: the BIOS plan: " + str(doc.get("error"))}
        elif doc["plan"]["cycle_changes"]:
            out[name] = {"after_cycle": doc["plan"]["cycle_changes"]}
    return out


# ----------------------------------------------------------------------------- apply


@dataclass(frozen=True, kw_only=True)
class FleetPlanRequest:
    """Which hosts, and how their plans are made: the fields of every request that plans hosts
    before acting on them (apply, adopt, audit). Every request is built with keywords."""

    inventory: str
    limit: str | None = None
    profile: str | None = None  # default: each host's hostkit_profile, else bare-metal-inference
    force: bool = False  # allow isolation on a VM / deceptive topology
    forks: int | None = None  # hosts at a time; default: all of them


@dataclass(frozen=True, kw_only=True)
class ApplyRequest(FleetPlanRequest):
    check: bool = False  # report what would change; change nothing
    diff: bool = False
    tags: str | None = None  # comma-separated roles
    verify_smoke: bool = False  # smoke-test every changed host afterwards
    smoke_duration: float | None = None  # None: the smoke test's default run (a credible p999)
    revert_on_fail: bool = False  # with verify_smoke: roll back a host that misses its SLO
    reboot: bool = False  # reboot hosts whose kernel arguments changed, wait, re-check /proc/cmdline
    reboot_timeout: int = REBOOT_TIMEOUT  # seconds a host may take to come back
    run_id: str | None = None  # default: a new one; a caller that records it before the run starts (rollout)
    # The tune role's gates in the same run (hostkit rollout): a smoke test before the apply, then the
    # audit (strict with reboot) and the smoke gate, with smoke_duration and target_p999_ms (None:
    # the profile's). A failed gate fails its host; nothing is rolled back here.
    gates: bool = False
    target_p999_ms: float | None = None

    def __post_init__(self) -> None:
        if self.revert_on_fail and not self.verify_smoke:
            raise BadInput("--revert-on-fail needs --verify-smoke")
        check_reboot_timeout(self.reboot_timeout)
        validate_tags(self.tags)
        if self.verify_smoke or self.gates:  # the bounds, checked before anything runs
            SmokeOptions(**self.gate_options())

    def gate_options(self) -> dict:
        """The smoke options the gates give (the tune role's hostkit_smoke_duration and
        hostkit_target_p999_ms); an option not given is the profile's."""
        return {
            k: v
            for k, v in (("duration", self.smoke_duration), ("target_p999_ms", self.target_p999_ms))
            if v is not None
        }


@dataclass
class SmokeVerdict:
    passed: bool
    verdict: str
    rollback: str | None = None  # what --revert-on-fail did

    def to_dict(self) -> dict:
        out = {"passed": self.passed, "verdict": self.verdict}
        if self.rollback:
            out["rollback"] = self.rollback
        return out


@dataclass
class ApplyResult(Result):
    run_id: str
    check: bool
    hosts: dict[str, HostApply]
    run: RunResult | None  # None when no host could be run
    smoke: dict[str, SmokeVerdict] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(h.status in ("failed", "unreachable") for h in self.hosts.values()) or any(
            not v.passed for v in self.smoke.values()
        )

    @property
    def refused(self) -> bool:
        return any(h.status == "refused" for h in self.hosts.values())

    @property
    def rc(self) -> int:
        return EXIT_FAILED if self.failed else EXIT_REFUSED if self.refused else EXIT_OK

    def to_dict(self) -> dict:
        return fleet_document(
            self.run_id,
            {n: h.to_dict() for n, h in self.hosts.items()},
            check=self.check,
            artifacts=self.run.private_data_dir if self.run else None,
            verify_smoke={h: v.to_dict() for h, v in self.smoke.items()},
        )


def apply(req: ApplyRequest, on_event: OnEvent = None) -> ApplyResult:
    """Profiles checked on the controller, then one playbook run (playbooks/apply.yml): facts and
    plan per host, then every role on each host whose plan is not refused, then (with
    ``verify_smoke``) a smoke test of each changed host. Bad input that a host's facts reveal stops
    every host before any change; a refused or unreachable host is reported, not applied."""
    hosts = load_inventory(req.inventory, req.limit)
    host_profiles(hosts, req.profile)
    run_id = req.run_id or new_run_id()
    ran, run = run_apply(
        [h.name for h in hosts],
        req.inventory,
        force=req.force,
        profiles={h.name: req.profile or h.vars.get("hostkit_profile") for h in hosts},
        smoke_gate=req.verify_smoke and not req.check,
        check=req.check,
        diff=req.diff,
        tags=req.tags,
        forks=req.forks,
        run_id=run_id,
        on_event=on_event,
        reboot=req.reboot,
        reboot_timeout=req.reboot_timeout,
        gates=req.gate_options() if req.gates else None,
    )
    bad = [h for h in ran.values() if h.bad_input]
    if bad:
        msg = bad[0].msg or "bad input"
        raise BadInput(msg if msg.startswith(f"{bad[0].name}: ") else f"{bad[0].name}: {msg}")
    result = ApplyResult(run_id, req.check, ran, run)
    if req.verify_smoke and not req.check:
        result.smoke = _verify_smoke(req, result)
    return result


def _apply_plans(
    plans: PlanResult, inventory: str, *, check: bool, diff: bool, forks: int | None = None, on_event: OnEvent = None
) -> ApplyResult:
    """apply.yml with plans made before the run (adopt: planned before its baseline is recorded);
    hosts not planned or refused are reported, not run."""
    run_id = new_run_id()
    hosts: dict[str, HostApply] = {}
    runnable: dict[str, dict] = {}
    for name, p in plans.hosts.items():
        if p.status != "ok":
            hosts[name] = HostApply(name, p.status, msg=p.error)
        elif p.refused:
            hosts[name] = HostApply(name, "refused", refused=list(p.planned.refused))
        else:
            runnable[name] = p.planned.to_dict()
    run = None
    if runnable:
        ran, run = run_apply(
            list(runnable),
            inventory,
            plans=runnable,
            check=check,
            diff=diff,
            forks=forks,
            run_id=run_id,
            on_event=on_event,
        )
        for name, h in ran.items():
            h.refused_parts = list(runnable[name]["refused_parts"])
        hosts.update(ran)
    return ApplyResult(run_id, check, hosts, run)


def unbooted_arguments(plan: Plan, facts: dict) -> str | None:
    """The kernel arguments the plan changes that the running kernel was not booted with, as a
    short text; None when there are none."""
    changes = plan.boot_changes(facts["kernel"]["cmdline_args"]["args"])
    return " ".join(changes[:3]) + (" ..." if len(changes) > 3 else "") if changes else None


def smoke_before_reboot(plan: Plan, facts: dict) -> str | None:
    """The one rule of every smoke gate (apply --verify-smoke, hostkit rollout, the collection's
    ``hostkit.tuning.plan``): a smoke run before the reboot the plan's kernel arguments need would
    measure the kernel the host booted, untuned. The refusal, or None when nothing is unbooted."""
    changes = unbooted_arguments(plan, facts)
    return (
        (
            f"a smoke gate would measure the running kernel, booted without {changes}: reboot into them "
            "first (--reboot, hostkit_reboot)"
        )
        if changes
        else None
    )


def _verify_smoke(req: ApplyRequest, result: ApplyResult) -> dict[str, SmokeVerdict]:
    """Smoke-test each changed host; with ``revert_on_fail``, roll back the run on hosts that miss the SLO."""
    changed = [h for h, r in result.hosts.items() if r.status == "changed"]
    if not changed:
        return {}
    fleet = smoke(
        SmokeRequest(
            inventory=req.inventory,
            limit=",".join(changed),
            profile=req.profile,
            options=SmokeOptions(duration=req.smoke_duration),
            given=frozenset({"duration"} if req.smoke_duration else ()),
        )
    )
    from hostkit.smoke import gate as smoke_gate

    out = {}
    for host, r in fleet.hosts.items():
        # The smoke gate's one rule (the rollout's, hostkit.tuning.smoke's): MISSED or a run that
        # failed fails; too few samples (INCONCLUSIVE) is not a failed host.
        rec = smoke_gate.gate_record(r.doc if r.ok else None, None if r.ok else f"{r.status}: {r.error}")
        out[host] = SmokeVerdict(rec["verdict"] == "PASSED", rec["why"])
        if req.revert_on_fail and rec["verdict"] in smoke_gate.GATE_FAILS:
            rb = rollback(RollbackRequest(inventory=req.inventory, limit=host, run_id=result.run_id)).hosts[host]
            out[host].rollback = (
                f"run {result.run_id} rolled back" if rb.ok and restored(rb.doc) else f"rollback failed: {rb.to_dict()}"
            )
    return out


# ----------------------------------------------------------------------------- adopt


@dataclass(frozen=True, kw_only=True)
class AdoptRequest(FleetPlanRequest):
    check: bool = False
    diff: bool = False


@dataclass
class HostAdopt:
    adopted_run: str | None
    adopted_files: list[str]
    apply_status: str  # the apply's status for this host, or "not run"
    apply_run: str
    reboot_required: bool

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class AdoptResult(Result):
    hosts: dict[str, HostAdopt]
    adopt: dict[str, AgentReply]
    apply: ApplyResult

    @property
    def rc(self) -> int:
        if any(not r.ok for r in self.adopt.values()) or self.apply.failed:
            return EXIT_FAILED
        return EXIT_REFUSED if self.apply.refused else EXIT_OK

    def to_dict(self) -> dict:
        return fleet_document(self.apply.run_id, {h: a.to_dict() for h, a in self.hosts.items()})


def adopt(req: AdoptRequest, on_event: OnEvent = None) -> AdoptResult:
    """Record each host's current tuning as a baseline run (its own journal entries), then apply the
    profile: a host tuned by another tool can then be rolled back to exactly how it was found."""
    plans = plan(
        PlanRequest(inventory=req.inventory, limit=req.limit, profile=req.profile, force=req.force, forks=req.forks)
    )  # before any write
    replies, _ = call_agent(req.inventory, ["adopt"], req.limit, forks=req.forks)
    for h, r in replies.items():
        if not r.ok:
            plans.hosts[h] = HostPlan(h, r.status, error=r.error)
    applied = _apply_plans(plans, req.inventory, check=req.check, diff=req.diff, forks=req.forks, on_event=on_event)
    hosts = {
        h: HostAdopt(
            adopted_run=r.doc["run_id"] if r.ok else None,
            adopted_files=r.doc["files"] if r.ok else [],
            apply_status=applied.hosts[h].status if h in applied.hosts else "not run",
            apply_run=applied.run_id,
            reboot_required=applied.hosts[h].reboot_required if h in applied.hosts else False,
        )
        for h, r in replies.items()
    }
    return AdoptResult(hosts, replies, applied)


# ----------------------------------------------------------------------------- history / rollback


@dataclass(frozen=True, kw_only=True)
class HistoryRequest:
    inventory: str
    limit: str | None = None
    forks: int | None = None


@dataclass
class HistoryResult(Result):
    hosts: dict[str, AgentReply]  # doc: {"runs": [...]}
    run: RunResult | None = None

    @property
    def rc(self) -> int:
        return EXIT_FAILED if any(not r.ok for r in self.hosts.values()) else EXIT_OK

    def to_dict(self) -> dict:
        return fleet_document(self.run.run_id if self.run else None, _replies(self.hosts))


def history(req: HistoryRequest) -> HistoryResult:
    replies, run = call_agent(req.inventory, ["history"], req.limit, forks=req.forks)
    return HistoryResult(replies, run)


@dataclass(frozen=True, kw_only=True)
class RollbackRequest:
    inventory: str
    limit: str | None = None
    run_id: str | None = None  # default: the latest run
    all: bool = False  # every run, newest first
    check: bool = False
    diff: bool = False
    reboot: bool = False  # reboot hosts whose boot configuration was restored, wait, report /proc/cmdline
    reboot_timeout: int = REBOOT_TIMEOUT
    forks: int | None = None

    def __post_init__(self) -> None:
        if self.run_id and self.all:
            raise BadInput("--run-id and --all exclude each other")
        if self.reboot and self.check:
            raise BadInput("--reboot and --check exclude each other (--check changes nothing)")
        check_reboot_timeout(self.reboot_timeout)
        if self.run_id and not all(c.isalnum() or c in "-_T" for c in self.run_id):
            raise BadInput(f"--run-id {self.run_id!r} is not a hostkit run id")

    def agent_args(self) -> list[str]:
        return (
            ["rollback"]
            + (["--run-id", self.run_id] if self.run_id else [])
            + (["--all"] if self.all else [])
            + (["--check"] if self.check else [])
            + (["--diff"] if self.diff else [])
        )


@dataclass
class RollbackResult(Result):
    check: bool
    hosts: dict[str, AgentReply]  # doc: the agent's rollback report
    run: RunResult
    reboots: dict[str, Rebooted] = field(default_factory=dict)  # with reboot: hosts rebooted
    # hosts with a BMC and a BIOS journal: hostkit bios rollback's document (restore, cycles, os)
    bios: dict[str, dict] = field(default_factory=dict)

    def restored(self, host: str) -> bool:
        """The host answered and everything its rollback meant to restore was restored."""
        r = self.hosts[host]
        return r.ok and restored(r.doc) and self.bios.get(host, {}).get("status", "ok") == "ok"

    @property
    def rc(self) -> int:
        if any(r.status not in ("ok", "would_run") for r in self.reboots.values()):
            return EXIT_FAILED
        return EXIT_OK if all(self.restored(h) for h in self.hosts) else EXIT_FAILED

    def to_dict(self) -> dict:
        return fleet_document(
            self.run.run_id if self.run else None,
            _replies(self.hosts),
            check=self.check,
            reboots={h: r.__dict__ for h, r in self.reboots.items()},
            bios=self.bios,
        )


def rollback(req: RollbackRequest, on_event: OnEvent = None) -> RollbackResult:
    """The agent restores every journaled change, newest first; then a host with a BMC and a BIOS
    journal (the controller's) gets its journaled BIOS attributes PATCHed back: every one, or with
    ``run_id`` those that run changed. With ``reboot``, such a host is power-cycled once through its
    BMC (which also boots its restored boot configuration) and its OS checked against the BIOS; the
    other hosts whose boot configuration came back are rebooted (bounded) and their booted command
    line reported."""
    replies, run = call_agent(req.inventory, req.agent_args(), req.limit, forks=req.forks, on_event=on_event)
    result = RollbackResult(req.check, replies, run)
    result.bios = _bios_rollback(req, [h for h, r in replies.items() if r.ok])
    if req.reboot:
        cycled = {h for h, doc in result.bios.items() if doc.get("cycles")}
        result.reboots = {
            h: Rebooted(h, "ok", msg="power-cycled once through the BMC with the BIOS rollback") for h in cycled
        }
        due = [h for h, r in replies.items() if r.ok and r.doc.get("reboot_required") and h not in cycled]
        result.reboots.update(
            reboot_hosts(req.inventory, due, timeout=req.reboot_timeout, forks=req.forks, on_event=on_event)
        )
    return result


def _bios_rollback(req: RollbackRequest, answered: list[str]) -> dict[str, dict]:
    """hostkit bios rollback on the hosts that answered, have a BMC and a BIOS journal (with entries
    of ``req.run_id`` when given)."""
    from hostkit.bmc import fleet as bmc_fleet
    from hostkit.bmc.apply import journaled, read_journal

    hosts = [
        h.name
        for h in load_inventory(req.inventory, req.limit)
        if h.name in answered
        and h.vars.get("hostkit_bmc") is not None
        and read_journal(h.name) is not None
        and (req.run_id is None or journaled(h.name, req.run_id))
    ]
    if not hosts:
        return {}
    return bmc_fleet.run(
        "rollback",
        req.inventory,
        limit=",".join(hosts),
        reboot=req.reboot,
        forks=req.forks,
        boot_timeout=req.reboot_timeout,
        check=req.check,
        run_id=req.run_id,
    )


# ----------------------------------------------------------------------------- smoke on a fleet


@dataclass(frozen=True, kw_only=True)
class SmokeRequest:
    """The smoke test on inventory hosts through the smoke role. Per host, a setting not in
    ``given`` is taken from the host's profile (``smoke.transport``, ``smoke.target_p999_ms``)."""

    inventory: str
    limit: str | None = None
    forks: int | None = None  # default: all hosts at once; lab hosts (one machine) one at a time
    profile: str | None = None
    options: SmokeOptions = field(default_factory=SmokeOptions)
    given: frozenset[str] = frozenset()  # the options set explicitly (e.g. on the command line)


PROFILE_SMOKE_SETTINGS = ("transport", "target_p999_ms")


@dataclass
class SmokeResult(Result):
    hosts: dict[str, AgentReply]  # doc: the host's smoke report
    run: RunResult
    forks: int
    settings: dict[str, dict]  # per host, what the role was given

    @property
    def rc(self) -> int:
        return EXIT_OK if all(r.ok and r.doc["slo"]["passed"] for r in self.hosts.values()) else EXIT_FAILED

    def to_dict(self) -> dict:
        return fleet_document(self.run.run_id, _replies(self.hosts))


def smoke_plan(req: SmokeRequest) -> tuple[dict[str, dict], int]:
    """Per host, the smoke role's settings; and how many hosts run at once. Bad input raises here."""
    from hostkit.profiles import for_host

    hosts = load_inventory(req.inventory, req.limit)
    settings = {}
    for h in hosts:
        profile, _ = for_host(h.name, h.vars, req.profile)
        opts = with_profile_smoke(req.options, profile, req.given)
        # Every option reaches the host agent, as the agent's own command line; a run without
        # --duration is the smoke test's default request count (a credible p999), not a short one.
        settings[h.name] = {
            "args": opts.to_agent_args(),
            "run": f"{opts.duration:g} s" if opts.duration else f"{opts.total_requests:,} requests",
        }
    return settings, req.forks or measuring_forks(hosts)


def measuring_forks(hosts) -> int:
    """How many hosts a measurement (smoke, gap probe) runs on at once: all of them, but lab hosts
    one at a time, since they share this machine and would measure each other."""
    return 1 if any(h.vars.get("hostkit_lab") for h in hosts) else len(hosts)


def smoke(req: SmokeRequest, on_event: OnEvent = None) -> SmokeResult:
    settings, forks = smoke_plan(req)
    replies, run = call_agent(
        req.inventory,
        [],
        req.limit,
        forks=forks,
        playbook="smoke.yml",
        output=SMOKE_OUTPUT,
        extravars={"hostkit_smoke_settings": settings},
        on_event=on_event,
    )
    return SmokeResult(replies, run, forks, settings)


def with_profile_smoke(options: SmokeOptions, profile: dict, given: frozenset[str]) -> SmokeOptions:
    """The one rule of both smoke runs (a fleet's, this machine's): a setting not given explicitly is the
    profile's (``smoke.transport``, ``smoke.target_p999_ms``)."""
    return options.replace(**{k: profile["smoke"][k] for k in PROFILE_SMOKE_SETTINGS if k not in given})


# ----------------------------------------------------------------------------- smoke on this machine


@dataclass(frozen=True, kw_only=True)
class LocalSmokeRequest:
    """The smoke test on this machine. With ``profile``, a setting not in ``given`` is the profile's."""

    options: SmokeOptions = field(default_factory=SmokeOptions)
    profile: str | None = None
    given: frozenset[str] = frozenset()


@dataclass
class LocalSmokeResult(Result):
    report: dict  # the smoke report (the JSON document)
    deschedule_ms: list[float]  # every sample, for plots
    hostname: str

    @property
    def rc(self) -> int:
        return EXIT_OK if self.report["slo"]["passed"] else EXIT_FAILED

    def to_dict(self) -> dict:
        return self.report


def local_smoke_options(req: LocalSmokeRequest) -> SmokeOptions:
    """The options the run uses. Bad input (a profile that does not load, a bound) raises here."""
    if req.profile is None:
        return req.options
    from hostkit.profiles import load_profile

    return with_profile_smoke(req.options, load_profile(req.profile), req.given)


def smoke_here(req: LocalSmokeRequest, progress=None) -> LocalSmokeResult:
    """The smoke test on this machine (``progress``: see :func:`hostkit.smoke.session.measure`)."""
    from hostkit.facts import gather
    from hostkit.smoke.session import measure

    opts = local_smoke_options(req)
    facts = gather("/")
    run = measure(opts, progress=progress, facts=facts)
    return LocalSmokeResult(run.report, run.deschedule_ms, facts.get("hostname") or "localhost")


# ----------------------------------------------------------------------------- migration evidence


def migration_pairs(before: str, after: str) -> list[tuple[str, dict, dict]]:
    """Two smoke result files (``hostkit smoke --json``, one host or a fleet's) paired by host:
    (host, before, after). Files that are not smoke results, or share no host, are bad input."""
    from hostkit.smoke import migration

    return migration.pair(migration.load_results(before), migration.load_results(after))


# ----------------------------------------------------------------------------- gaps


@dataclass(frozen=True, kw_only=True)
class GapsRequest:
    """The vCPU-gap probe (:mod:`hostkit.smoke.gaps`) on this machine or on inventory hosts."""

    inventory: str | None = None  # None: this machine
    limit: str | None = None
    forks: int | None = None  # default: all hosts at once; lab hosts (one machine) one at a time
    options: GapOptions = field(default_factory=GapOptions)


@dataclass
class GapsResult(Result):
    hosts: dict[str, AgentReply]  # doc: the host's probe report
    run: RunResult | None = None  # None on this machine

    @property
    def rc(self) -> int:
        return EXIT_OK if all(r.ok for r in self.hosts.values()) else EXIT_FAILED

    def to_dict(self) -> dict:
        if self.run is None:
            return self.hosts["localhost"].doc
        return fleet_document(self.run.run_id, _replies(self.hosts))


def gaps(req: GapsRequest, on_event: OnEvent = None) -> GapsResult:
    if req.inventory is None:
        from hostkit.smoke.gaps import public, run_probe

        doc = public(run_probe(req.options))
        return GapsResult({"localhost": AgentReply("localhost", "ok", doc=doc)})
    forks = req.forks or measuring_forks(load_inventory(req.inventory, req.limit))
    replies, run = call_agent(
        req.inventory, ["gaps", *req.options.to_agent_args()], req.limit, forks=forks, on_event=on_event
    )
    return GapsResult(replies, run)


# ----------------------------------------------------------------------------- unlock / audit


@dataclass(frozen=True, kw_only=True)
class UnlockRequest:
    inventory: str
    limit: str | None = None
    forks: int | None = None
    run_id: str | None = None  # only release the lock this run holds; None: whoever holds it


@dataclass
class UnlockResult(Result):
    released: dict[str, bool]
    failed: dict[str, str]
    run_id: str | None = None

    @property
    def rc(self) -> int:
        return EXIT_FAILED if self.failed else EXIT_OK

    def to_dict(self) -> dict:
        return fleet_document(
            self.run_id,
            {
                h: {"status": "failed", "error": self.failed[h]}
                if h in self.failed
                else {"status": "ok", "released": r}
                for h, r in self.released.items()
            },
        )


def unlock(req: UnlockRequest) -> UnlockResult:
    run = unlock_hosts(req.inventory, req.limit, run_id=req.run_id, force=req.run_id is None, forks=req.forks)
    return UnlockResult(
        released={h: any((t.res or {}).get("released") for t in r.tasks) for h, r in run.hosts.items()},
        failed={h: r.msg or r.status for h, r in run.hosts.items() if r.status != "ok"},
        run_id=run.run_id,
    )


@dataclass(frozen=True, kw_only=True)
class AuditRequest(FleetPlanRequest):  # force: plan isolation on VMs as apply --force did
    strict: bool = False  # a pending reboot is a failure


# Audit statuses that fail a host: the one rule of `hostkit audit`'s exit status and the rollout's gate.
AUDIT_FAILED = ("drift", "unreachable", "failed", "refused")


def audit_failed(status: str, strict: bool) -> bool:
    """A host's audit status fails it; a pending reboot only when ``strict`` (--strict, rollout --reboot)."""
    return status in AUDIT_FAILED or (strict and status == "pending_reboot")


def audit_failure(result: dict) -> str:
    """Why a host's audit fails, in one line: its status, then each check off the plan (drift or a
    pending reboot, with where it was read), else the host's error. The rollout's audit gate and the
    collection's ``hostkit.tuning.audit`` say it the same way."""
    off = [
        f"{f['check']} {f['status']}: expected {f['expected']}, found {f['actual']} ({f['source']})"
        + (f", {f['note']}" if f.get("note") else "")
        for f in result.get("findings") or []
        if f["status"] in ("drift", "pending_reboot")
    ]
    return f"{result['status']}: " + ("; ".join(off)[:400] or result.get("error") or "")


@dataclass
class AuditResult(Result):
    hosts: dict[str, dict]  # {"status", "counts", "findings", "error"?}
    strict: bool

    @property
    def pending_reboot(self) -> bool:
        return any(r["status"] == "pending_reboot" for r in self.hosts.values())

    @property
    def rc(self) -> int:
        return EXIT_FAILED if any(audit_failed(r["status"], self.strict) for r in self.hosts.values()) else EXIT_OK

    def to_dict(self) -> dict:
        return fleet_document(None, self.hosts)  # testinfra over SSH: no Ansible run

    def junit_xml(self) -> str:
        """JUnit XML: one testcase per host x check (drift a failure, unreachable an error, n/a a skip)."""
        from hostkit.audit.runner import junit_xml

        return junit_xml(self.hosts)


def audit_steps() -> tuple[str, ...]:
    """What the audit does on each host, in order (the progress display counts them)."""
    from hostkit.audit.runner import STEPS

    return STEPS


def audit(req: AuditRequest, on_event: OnEvent = None) -> AuditResult:
    from hostkit.audit.runner import audit as audit_hosts

    return AuditResult(
        audit_hosts(req.inventory, req.limit, profile=req.profile, force=req.force, forks=req.forks, on_event=on_event),
        req.strict,
    )


# ----------------------------------------------------------------------------- the collection


@dataclass(frozen=True, kw_only=True)
class CollectionInstallRequest:
    path: str | None = None  # a collections root; default ~/.ansible/collections


@dataclass
class CollectionInstallResult(Result):
    installed: dict  # {"collection", "version", "path", "collections_path", "found_by_default"}

    @property
    def rc(self) -> int:
        return EXIT_OK

    def to_dict(self) -> dict:
        return dict(self.installed)


def install_collection(req: CollectionInstallRequest) -> CollectionInstallResult:
    """The collection hostkit.tuning this hostkit carries, built and installed under ``req.path``."""
    from hostkit.ansible.collection import install

    return CollectionInstallResult(install(req.path))


# ----------------------------------------------------------------------------- the lab and its fixtures
# (`hostkit lab` and `hostkit fixtures`: sshd hosts and QEMU guests on loopback, and the sysroot
# fixtures that stand in for other machines; hostkit.lab does the work)


@dataclass(frozen=True, kw_only=True)
class LabRequest:
    dir: str | None = None  # the lab's directory: its state, keys, inventory.yml, ssh_config (None: .hostkit/lab)


@dataclass(frozen=True, kw_only=True)
class LabUpRequest(LabRequest):
    hosts: int | None = None  # N fixture hosts, round-robin (None: one per fixture, unless hosts or guests are named)
    host_specs: tuple[tuple[str, str], ...] = ()  # (name, fixture or sysroot directory)
    vm_specs: tuple[tuple[str, str], ...] = ()  # (name, VM spec or preset): QEMU guests
    port: int | None = None  # sshd's port on every loopback address (None: the lab's, 2222)
    boot_timeout: float | None = None  # seconds per guest boot (None: the lab's default)
    resume: bool = True  # a preset's guest resumes from its saved state; False: every guest boots
    bmc: bool = False  # a lab BMC (Redfish) in front of every host, hostkit_bmc in the inventory


@dataclass
class LabUpResult(Result):
    dir: str
    inventory: str
    ssh_config: str
    hosts: list[dict]  # per host: name, address, port, sysroot, source, pid, kind, vm, started

    @property
    def rc(self) -> int:
        return EXIT_OK

    def to_dict(self) -> dict:
        return {"dir": self.dir, "inventory": self.inventory, "hosts": self.hosts}


@dataclass
class LabDownResult(Result):
    stopped: list[str]  # the hosts whose sshd or QEMU was running and is stopped

    @property
    def rc(self) -> int:
        return EXIT_OK

    def to_dict(self) -> dict:
        return {"stopped": self.stopped}


@dataclass
class LabStatusResult(Result):
    dir: str
    hosts: list[dict]  # per host: what lab up recorded, and "running", "answering"

    @property
    def down(self) -> list[str]:
        return [h["name"] for h in self.hosts if not h["answering"]]

    @property
    def rc(self) -> int:
        return EXIT_FAILED if self.down else EXIT_OK

    def to_dict(self) -> dict:
        return {"dir": self.dir, "hosts": self.hosts}


def _lab(req: LabRequest):
    from hostkit.lab.lab import Lab

    return Lab() if req.dir is None else Lab(req.dir)


def lab_vm_presets() -> dict[str, str]:
    """The lab's guest topologies by name (``--vm g1=numa2``) and the spec each stands for."""
    from hostkit.lab.vm import PRESETS

    return dict(PRESETS)


def lab_vm_setups() -> dict[str, str]:
    """The named setups a guest can be booted into (``setup=NAME``) and what each does."""
    from hostkit.lab.vm_setup import SETUPS

    return {name: s.about for name, s in SETUPS.items()}


def lab_up(
    req: LabUpRequest, say: Callable[[str], None] | None = None, progress: Callable[[dict], None] | None = None
) -> LabUpResult:
    """Start the lab (:meth:`hostkit.lab.lab.Lab.up`). ``say(line)``: what the guests' start is
    doing; ``progress(host)``: each host as it answers (the host's entry of the result)."""
    from dataclasses import asdict

    lab = _lab(req)
    hosts = lab.up(
        n_hosts=req.hosts,
        host_specs=list(req.host_specs),
        **({} if req.port is None else {"port": req.port}),
        vm_specs=list(req.vm_specs),
        boot_timeout=req.boot_timeout,
        resume=req.resume,
        bmc=req.bmc,
        say=say,
        progress=None if progress is None else (lambda h: progress(asdict(h))),
    )
    return LabUpResult(str(lab.dir), str(lab.inventory), str(lab.ssh_config), [asdict(h) for h in hosts])


def lab_down(req: LabRequest) -> LabDownResult:
    """Stop exactly the processes the lab started and remove its directory."""
    return LabDownResult(_lab(req).down())


def lab_status(req: LabRequest) -> LabStatusResult:
    """The lab's hosts, each with whether its process runs and its sshd answers (rc 1 when one does not)."""
    lab = _lab(req)
    return LabStatusResult(str(lab.dir), lab.status())


@dataclass
class FixtureListResult(Result):
    fixtures: list[dict]  # {"name", "description"}: generated fixtures, then captures, each by name

    @property
    def rc(self) -> int:
        return EXIT_OK

    def to_dict(self) -> dict:
        return {"fixtures": self.fixtures}


def fixture_list() -> FixtureListResult:
    """The sysroot fixtures this hostkit carries: generated ones, then captures of real machines."""
    from hostkit.lab import fixtures

    return FixtureListResult([{"name": n, "description": fixtures.describe(n)} for n in fixtures.fixture_names()])


@dataclass(frozen=True, kw_only=True)
class FixtureMakeRequest:
    name: str  # a fixture (fixture_list())
    dest: str  # a directory to create, or an empty one


@dataclass
class FixtureMakeResult(Result):
    name: str
    dest: str

    @property
    def rc(self) -> int:
        return EXIT_OK

    def to_dict(self) -> dict:
        return {"name": self.name, "dest": self.dest}


def fixture_make(req: FixtureMakeRequest) -> FixtureMakeResult:
    """Write fixture ``name``'s sysroot tree to ``dest``; bad input (nothing written) when ``dest``
    is a file, a directory that is not empty, or has no parent directory, or the name is unknown."""
    from pathlib import Path

    from hostkit.lab import fixtures

    dest = Path(req.dest)
    if dest.exists() and not dest.is_dir():
        raise BadInput(f"{dest} exists and is not a directory")
    if dest.is_dir() and any(dest.iterdir()):
        raise BadInput(f"{dest} exists and is not empty")
    if not dest.parent.is_dir():
        raise BadInput(f"{dest.parent} is not a directory: nowhere to write {dest.name}")
    fixtures.materialize(req.name, dest)
    return FixtureMakeResult(req.name, str(dest))


@dataclass(frozen=True, kw_only=True)
class FixtureCaptureRequest:
    out: str  # the JSON file to write
    sysroot: str = "/"  # the root whose files hostkit reads are captured


@dataclass
class FixtureCaptureResult(Result):
    out: str
    sysroot: str
    files: int  # files captured

    @property
    def rc(self) -> int:
        return EXIT_OK

    def to_dict(self) -> dict:
        return {"out": self.out, "sysroot": self.sysroot, "files": self.files}


def fixture_capture(req: FixtureCaptureRequest) -> FixtureCaptureResult:
    """Capture the files hostkit reads from ``sysroot`` into a fixture JSON (``hostkit.lab``'s
    captures are such files); bad input when ``out`` is a directory or has no parent directory."""
    import json
    from pathlib import Path

    from hostkit.facts.capture import capture

    out = Path(req.out)
    if out.is_dir():
        raise BadInput(f"{out} is a directory: name the JSON file to write")
    if not out.parent.is_dir():
        raise BadInput(f"{out.parent} is not a directory: nowhere to write {out.name}")
    doc = capture(req.sysroot)
    out.write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")
    return FixtureCaptureResult(str(out), req.sysroot, len(doc["files"]))


# ----------------------------------------------------------------------------- bios (the BMC)


@dataclass(frozen=True, kw_only=True)
class BiosRequest:
    action: str  # facts, plan, apply, rollback (hostkit.bmc.fleet.ACTIONS)
    inventory: str
    limit: str | None = None
    profile: str | None = None
    reboot: bool = False  # apply/rollback: power-cycle through the BMC and check the result
    shutdown_timeout: int = 120  # seconds of GracefulShutdown before ForceOff
    forks: int | None = None  # BMCs at a time; None: all
    os_check: bool = True  # after a cycle: the booted OS's topology (facts over SSH) against the BIOS's
    boot_timeout: int = REBOOT_TIMEOUT  # seconds for the OS to answer after the power-on


@dataclass
class BiosResult(Result):
    hosts: dict[str, dict]  # doc: per host {"status", "bios" | "plan" | "restore", "cycles", "steps", "requests"}
    action: str = "facts"

    @property
    def rc(self) -> int:
        from hostkit.bmc.fleet import exit_code

        return exit_code(self.hosts)

    def to_dict(self) -> dict:
        return fleet_document(None, self.hosts, action=self.action)


def bios(req: BiosRequest, progress: Callable[[str], None] | None = None) -> BiosResult:
    """BIOS facts, plan, apply or rollback through each host's BMC (``hostkit_bmc``)."""
    from hostkit.bmc.fleet import run

    if not 10 <= req.shutdown_timeout <= 3600:
        raise BadInput(f"--shutdown-timeout must be 10-3600 seconds, got {req.shutdown_timeout}")
    check_reboot_timeout(req.boot_timeout)
    hosts = run(
        req.action,
        req.inventory,
        req.limit,
        req.profile,
        reboot=req.reboot,
        shutdown_timeout=req.shutdown_timeout,
        progress=progress,
        forks=req.forks,
        os_check=req.os_check,
        boot_timeout=req.boot_timeout,
    )
    return BiosResult(hosts, req.action)


# ----------------------------------------------------------------------------- baselines and drift


@dataclass(frozen=True, kw_only=True)
class BaselineRequest:
    inventory: str
    limit: str | None = None
    forks: int | None = None
    name: str | None = None  # None: the time, YYYYmmddTHHMMSSZ
    why: str = ""  # journaled with who and when
    profile: str | None = None
    smoke: bool = True  # the latency signature: one smoke run per host
    smoke_duration: float | None = None  # seconds; None (and no smoke_requests): the smoke's default run
    smoke_requests: int | None = None  # requests instead of seconds


@dataclass(frozen=True, kw_only=True)
class DriftRequest:
    inventory: str
    limit: str | None = None
    forks: int | None = None
    against: str | None = None  # a baseline's name; None: each host's newest
    smoke: bool = True
    smoke_duration: float | None = None  # seconds; None (and no smoke_requests): the smoke's default run
    smoke_requests: int | None = None  # requests instead of seconds
    inject_stall: str | None = None  # calibration: MS@EVERY_S, the smoke's --inject-stall


@dataclass
class DriftResult(Result):
    hosts: dict[str, dict]  # doc: per host {"status", ...}: a baseline taken, or a drift verdict

    @property
    def rc(self) -> int:
        return EXIT_OK if all(h["status"] == "ok" for h in self.hosts.values()) else EXIT_FAILED

    def to_dict(self) -> dict:
        return fleet_document(None, self.hosts)


def baseline(req: BaselineRequest, on_event: OnEvent = None) -> DriftResult:
    """Each host's effective state, plan and latency signature, kept as a new baseline."""
    from hostkit.drift.fleet import take

    options = _signature_options(req)
    return DriftResult(
        take(
            req.inventory,
            req.limit,
            req.name,
            req.why,
            req.profile,
            options,
            _measure(req.inventory, req.limit, on_event) if req.smoke else None,
            req.forks,
            on_event,
        )
    )


def drift(req: DriftRequest, on_event: OnEvent = None) -> DriftResult:
    """Each host re-read and re-measured against its baseline: differences, latency, verdict."""
    from hostkit.drift.fleet import judge

    options = _signature_options(req)
    measure = _measure(req.inventory, req.limit, on_event) if req.smoke else None
    return DriftResult(judge(req.inventory, req.limit, req.against, options, measure, req.forks, on_event))


@dataclass(frozen=True, kw_only=True)
class DriftTimerRequest:
    """Each host's own scheduled drift run (role drift_timer): a systemd timer on ``on_calendar``
    ("off" removes it), judging the host against ``against`` (None: its newest baseline)."""

    inventory: str
    on_calendar: str
    limit: str | None = None
    forks: int | None = None
    against: str | None = None
    textfile: str | None = None  # None: node_exporter's textfile directory on Debian
    smoke: bool = True
    smoke_duration: float | None = None
    smoke_requests: int | None = None


def drift_timer(req: DriftTimerRequest, on_event: OnEvent = None) -> DriftResult:
    """Install (or remove) each host's drift timer; its smoke run is the one ``drift`` would make
    (the host's profile's transport and target, this request's length)."""
    from hostkit.drift import timer
    from hostkit.profiles import for_host

    options = _signature_options(req)

    def agent_args(host) -> list[str]:
        if not req.smoke:
            return ["--no-smoke"]
        profile, _ = for_host(host.name, host.vars, None)
        return with_profile_smoke(options, profile, frozenset({"duration"})).to_agent_args()

    per_host = timer.settings(
        req.inventory, req.limit, req.against, req.on_calendar, req.textfile or timer.DEFAULT_TEXTFILE, agent_args
    )
    return DriftResult(timer.install(req.inventory, req.limit, per_host, req.forks, on_event))


def _signature_options(req: BaselineRequest | DriftRequest | DriftTimerRequest) -> SmokeOptions:
    """The smoke run of a latency signature. Bad input (a duration and a count, a run asked of with
    --no-smoke) is raised here, before any host is contacted."""
    from hostkit.smoke.options import parse_stall

    stall = getattr(req, "inject_stall", None)
    if not req.smoke:
        given = [
            flag
            for flag, value in (
                ("--smoke-duration", req.smoke_duration),
                ("--smoke-requests", req.smoke_requests),
                ("--inject-stall", stall),
            )
            if value is not None
        ]
        if given:
            raise BadInput(f"--no-smoke with {', '.join(given)}: there is no smoke run for it to shape")
    ms, every = parse_stall(stall) if stall is not None else (None, None)
    return SmokeOptions(
        duration=req.smoke_duration, requests=req.smoke_requests, inject_stall_ms=ms, inject_every_s=every
    )


def _measure(inventory: str, limit: str | None, on_event: OnEvent):
    """The smoke run of a baseline or a drift: the smoke role with these options, host -> reply."""

    def run(options: SmokeOptions) -> dict[str, AgentReply]:
        req = SmokeRequest(inventory=inventory, limit=limit, options=options, given=frozenset({"duration"}))
        return smoke(req, on_event).hosts

    return run
