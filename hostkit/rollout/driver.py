"""The rollout loop: batches strictly in order, the hosts of one batch in parallel (one Ansible run
per step with ``limit``), every step through :mod:`hostkit.api`.

Per batch, in waves of at most ``max_unavailable`` hosts (default: the whole batch), each wave back
in service before the next starts: pre-batch hooks -> one Ansible run of the tune role's steps, the
tasks of the collection's rollout.yml (playbooks/apply.yml with ``gates``: smoke "before" -> apply
(``reboot``: the plan's reboot, bounded) -> audit -> smoke "after" against the SLO, each gate the
module's rule) -> post-batch hooks. Rollbacks, resume and abort stay here: they need the state
file and the hosts' journals, which a playbook does not keep. A host is
out of service from its pre-batch hooks until its post-batch hooks pass; hosts left out (a failed
rollback or post-batch hook) count against ``max_unavailable``. The gates:

* ``pre_hook``: a hook that fails or times out stops the rollout before anything changed on the
  batch (hosts of the batch whose pre-batch hooks already ran get their post-batch hooks, so a
  drained node is put back in service);
* ``apply``: a host the apply failed, could not reach, or refused (a guard: the rollout's exit 3);
* ``audit``: drift, or a pending reboot when the rollout reboots (``--reboot``);
* ``smoke``: the smoke verdict MISSED, or a smoke run that failed. INCONCLUSIVE (too few samples
  for a credible p999) is recorded and does not stop the rollout, as ``apply --verify-smoke``;
* ``post_hook``: a failing post-batch hook stops the rollout; the batch keeps its tuning.

More failed hosts than ``max_failures`` (default 0: the first one) stop the rollout and roll the
whole batch back (this rollout's apply run, with ``reboot`` where the boot configuration came
back), then run its post-batch hooks when the rollback succeeded; hosts of the batch's earlier
waves, back in service, are taken out again (at most ``max_unavailable`` at a time) for that. Within ``max_failures`` only the
failed hosts are rolled back and the rollout goes on.

The state is saved after every step (:mod:`hostkit.rollout.state`), an apply's run id before the
apply starts; ``resume`` releases the lock of a run cut off by a killed controller, rolls back
what unfinished hosts still carry of the rollout, and goes on from the first batch not done,
skipping finished hosts; ``abort`` rolls back every apply run of the rollout still in the hosts'
journals, newest batch first.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields

from hostkit import api
from hostkit.agent.rollback import restored
from hostkit.ansible.inventory import load_inventory
from hostkit.ansible.reboot import DEFAULT_TIMEOUT as REBOOT_TIMEOUT
from hostkit.ansible.run import new_run_id
from hostkit.errors import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, BadInput, HostkitError, Refused
from hostkit.rollout import hooks as rollout_hooks
from hostkit.rollout import state as rollout_state
from hostkit.rollout.batches import check_max_unavailable, next_wave, plan_batches
from hostkit.smoke import gate as smoke_gate

OnStep = Callable[[str], None] | None


@dataclass(frozen=True, kw_only=True)
class RolloutRequest:
    inventory: str
    batch: str
    limit: str | None = None
    canary: int = 0
    max_failures: int = 0
    max_unavailable: int | None = None  # hosts out of service at once; None: a whole batch
    reboot: bool = False
    reboot_timeout: int = REBOOT_TIMEOUT
    target_p999_ms: float | None = None  # None: each host's profile
    smoke_duration: float | None = None  # None: the smoke test's default run (a credible p999)
    profile: str | None = None
    force: bool = False
    hook_timeout: float = rollout_hooks.DEFAULT_TIMEOUT
    # After each wave's pre-batch hooks (an upgrade, say), before hostkit changes anything on it:
    # hostkit drift against the baseline ``drift_against`` (None: each host's newest); a host whose
    # state drifted (a planned value undone, a change the plan does not name) or whose tail MOVED
    # stops the rollout, the drift named.
    drift_gate: bool = False
    drift_against: str | None = None

    def __post_init__(self) -> None:
        api.check_reboot_timeout(self.reboot_timeout)
        rollout_hooks.check_timeout(self.hook_timeout)
        if self.max_failures < 0:
            raise BadInput(f"--max-failures must be 0 or more, got {self.max_failures}")
        check_max_unavailable(self.max_unavailable)
        self.apply_request("-")  # the smoke options' bounds, checked before anything runs

    def apply_request(self, limit: str, run_id: str | None = None) -> api.ApplyRequest:
        """A wave's apply: the tune role's steps with its gates (smoke before, audit, smoke gate)."""
        return api.ApplyRequest(
            inventory=self.inventory,
            limit=limit,
            profile=self.profile,
            force=self.force,
            reboot=self.reboot,
            reboot_timeout=self.reboot_timeout,
            run_id=run_id,
            gates=True,
            smoke_duration=self.smoke_duration,
            target_p999_ms=self.target_p999_ms,
        )

    @classmethod
    def from_dict(cls, d: dict) -> RolloutRequest:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


@dataclass
class RolloutResult(api.Result):
    state: dict
    report: str | None = None  # the Markdown report's path

    @property
    def rc(self) -> int:
        s = self.state
        if s["status"] == "completed":
            return EXIT_OK if all(h["status"] == "done" for h in s["hosts"].values()) else EXIT_FAILED
        if s["status"] == "aborted" and not s.get("abort", {}).get("errors"):
            return EXIT_OK
        failure = s.get("failure") or {}
        return EXIT_REFUSED if failure.get("refused") else EXIT_FAILED

    def to_dict(self) -> dict:
        return {**self.state, "report": self.report}


# ----------------------------------------------------------------------------- entry points


def start(req: RolloutRequest, on_step: OnStep = None) -> RolloutResult:
    """Validate everything (inventory, profiles, hooks, batches), then run the rollout."""
    hosts, _ = _prepare(req)
    batches = plan_batches([h.name for h in hosts], req.batch, req.canary)
    if on_step:
        on_step(
            f"{len(hosts)} host(s) in {len(batches)} batch(es): "
            + " | ".join(",".join(b) for b in batches)
            + "; planning every host first..."
        )
    if req.drift_gate:  # a missing or bad baseline is bad input before any hook runs
        from hostkit.drift.store import read as read_baseline

        for h in hosts:
            read_baseline(h.name, req.drift_against, None, time.time())
    refused = refusals(req)
    if refused:
        raise Refused("; ".join(refused))
    rid = new_run_id()
    state = {
        "version": rollout_state.VERSION,
        "rollout_id": rid,
        "status": "running",
        "created": rollout_state.now(),
        "updated": None,
        "request": {**asdict(req), "inventory": os.path.abspath(req.inventory)},
        "controller": _controller(),
        "batches": [
            {
                "index": i,
                "canary": bool(req.canary) and i == 0,
                "hosts": b,
                "status": "pending",
                "apply_runs": [],
                "started": None,
                "finished": None,
            }
            for i, b in enumerate(batches)
        ],
        "hosts": {h: _new_host(i) for i, b in enumerate(batches) for h in b},
        "failed_hosts": 0,
        "failure": None,
        "events": [],
    }
    rollout_state.save(state)
    return Driver(state, on_step).run()


def drift_why(doc: dict | None) -> str:
    """One line of why a host fails the drift gate: its verdict and what drifted first (hostkit
    drift ranks an undone planned value first), or why it could not be judged."""
    if not doc:
        return "no drift result"
    if "verdict" not in doc:
        return f"not judged: {doc.get('error')}"
    from hostkit.drift.verdict import counted as drift_counted

    counted = drift_counted(doc)
    what = [f"{d['layer']} {d['key']}: {d['before']} -> {d['now']} ({d['plan']})" for d in counted[:3]]
    if doc["latency"]["verdict"] == "MOVED":
        what.append(f"latency MOVED: {doc['latency']['basis']}")
    more = f" and {len(counted) - 3} more" if len(counted) > 3 else ""
    return f"{doc['verdict']} against baseline {doc['against']}: " + "; ".join(what) + more


def _load_idle(rollout_id: str, refused: dict[str, str]) -> dict:
    """The rollout's state, when no process runs it and its status is not one of ``refused``
    (status -> why, as bad input)."""
    state = rollout_state.load(rollout_id)
    if state["status"] in refused:
        raise BadInput(f"rollout {rollout_id} {refused[state['status']]}")
    _check_not_running(state)
    return state


def resume(rollout_id: str, on_step: OnStep = None) -> RolloutResult:
    state = _load_idle(
        rollout_id, {"completed": "has finished: nothing to resume", "aborted": "was aborted: start a new rollout"}
    )
    req = RolloutRequest.from_dict(state["request"])
    hosts, _ = _prepare(req)
    missing = sorted(set(state["hosts"]) - {h.name for h in hosts})
    if missing:
        raise BadInput(f"rollout {rollout_id}: {', '.join(missing)} no longer in inventory {req.inventory}")
    state["status"], state["failure"], state["controller"] = "running", None, _controller()
    state.setdefault("resumed", []).append(rollout_state.now())
    rollout_state.save(state)
    return Driver(state, on_step).resume()


def abort(rollout_id: str, on_step: OnStep = None) -> RolloutResult:
    state = _load_idle(rollout_id, {"aborted": "was already aborted"})
    state["status_before_abort"], state["status"], state["controller"] = state["status"], "aborting", _controller()
    rollout_state.save(state)
    return Driver(state, on_step).abort()


def refusals(req: RolloutRequest) -> list[str]:
    """Every host planned before anything changes (one facts round): a host whose plan a guard
    refuses, or (without ``reboot``) whose plan changes kernel arguments, refuses the whole rollout
    (exit 3, nothing changed): its smoke gate would measure the kernel it booted, untuned, as
    ``apply --verify-smoke`` refuses. A host that cannot be planned (unreachable) is bad input for a
    rollout that must not start half-blind."""
    plans = api.plan(
        api.PlanRequest(inventory=req.inventory, limit=req.limit, profile=req.profile, force=req.force, writable=True)
    )
    out = []
    for name, p in plans.hosts.items():
        if p.status != "ok":
            raise HostkitError(f"{name}: cannot be planned before the rollout ({p.status}: {p.error}); nothing changed")
        if p.refused:
            out.append(f"{name}: " + "; ".join(p.plan.refused))
        elif not req.reboot and api.smoke_before_reboot(p.plan, p.facts):
            out.append(f"{name}: {api.smoke_before_reboot(p.plan, p.facts)}")
    return out


def _prepare(req: RolloutRequest):
    """The hosts and their rendered hooks; bad inventories, profiles and hooks raise here."""
    from hostkit.profiles import for_host

    hosts = load_inventory(req.inventory, req.limit)
    hooks = {}
    for h in hosts:
        for_host(h.name, h.vars, req.profile)
        hooks[h.name] = rollout_hooks.render(h.name, h.vars)
    return hosts, hooks


def _controller() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _check_not_running(state: dict) -> None:
    c = state.get("controller") or {}
    if (
        state["status"] in ("running", "aborting")
        and c.get("host") == socket.gethostname()
        and c.get("pid")
        and c["pid"] != os.getpid()
        and os.path.exists(f"/proc/{c['pid']}")
    ):
        raise BadInput(f"rollout {state['rollout_id']} is still running (pid {c['pid']})")


def _new_host(batch: int) -> dict:
    return {
        "batch": batch,
        "status": "pending",
        "step": "pending",
        "gate": None,
        "runs": [],
        "apply_started": None,
        "out": False,
        "apply": None,
        "audit": None,
        "before": None,
        "after": None,
        "hooks": [],
        "rollback": None,
    }


# ----------------------------------------------------------------------------- the loop


class Driver:
    def __init__(self, state: dict, on_step: OnStep = None) -> None:
        self.state, self.on_step = state, on_step
        self.req = RolloutRequest.from_dict(state["request"])
        self.hooks: dict[str, dict] = {}

    # --- bookkeeping
    def save(self) -> None:
        rollout_state.save(self.state)

    def event(self, batch: int, hosts: list[str], step: str, status: str, note: str = "") -> None:
        self.state["events"].append(
            {
                "t": round(time.time(), 3),
                "batch": batch,
                "hosts": hosts,
                "step": step,
                "status": status,
                **({"note": note} if note else {}),
            }
        )
        self.save()
        if self.on_step:
            self.on_step(
                f"batch {batch + 1}/{len(self.state['batches'])} [{','.join(hosts)}] {step}: {status}"
                + (f" ({note})" if note else "")
            )

    def host(self, name: str) -> dict:
        return self.state["hosts"][name]

    def set_step(self, hosts: list[str], step: str) -> None:
        for h in hosts:
            self.host(h)["step"], self.host(h)["status"] = step, "running"
        self.save()

    def fail(self, host: str, gate: str, why: str, refused: bool = False) -> None:
        self.host(host)["gate"] = {"gate": gate, "why": why, **({"refused": True} if refused else {})}

    def run(self) -> RolloutResult:
        if not self.hooks:
            _, self.hooks = _prepare(self.req)
        try:
            for b in self.state["batches"]:
                if b["status"] == "done":
                    continue
                if not self.run_batch(b):
                    self.state["status"] = "failed"
                    break
            else:
                self.state["status"] = "completed"
        except KeyboardInterrupt:
            self.state["status"] = "interrupted"
            self.save()
            raise
        self.save()
        return RolloutResult(self.state, self.write_report())

    def out_of_service(self, besides: list[str] = ()) -> list[str]:
        """Hosts taken out of service (pre-batch hook begun) and not put back (post-batch hooks
        passed), apart from ``besides``: they count against ``--max-unavailable``."""
        return [h for h, r in self.state["hosts"].items() if r.get("out") and h not in besides]

    def run_batch(self, b: dict) -> bool:
        """The batch's hosts in waves of at most ``--max-unavailable`` (default: all at once); a wave
        starts when the previous one is back in service. A stop rolls back the whole batch."""
        i = b["index"]
        todo = [h for h in b["hosts"] if self.host(h)["status"] != "done"]
        todo.sort(key=lambda h: not self.host(h).get("out"))  # hosts still out (resume) go first
        b["status"], b["started"] = "running", b["started"] or rollout_state.now()
        b.setdefault("apply_runs", [])
        self.event(i, todo, "batch", "started")
        passed: list[str] = []  # hosts of earlier waves of this batch, back in service with their tuning
        while todo:
            out = self.out_of_service(besides=todo)
            wave = next_wave(todo, self.req.max_unavailable, len(out))
            if not wave:
                return self.stop(
                    b,
                    out[0],
                    "max_unavailable",
                    f"{len(out)} host(s) still out of service ({', '.join(out)}) leave no room "
                    f"under --max-unavailable {self.req.max_unavailable}",
                )
            todo = todo[len(wave) :]
            if not self.run_wave(b, wave, passed):
                return False
            passed += [h for h in wave if self.host(h)["status"] == "done"]
        b["status"] = "done"  # within --max-failures, its failed hosts stay rolled back
        b["finished"] = rollout_state.now()
        self.event(i, b["hosts"], "batch", "done")
        return True

    def run_wave(self, b: dict, todo: list[str], passed: list[str]) -> bool:
        """One wave: pre-batch hooks, then one Ansible run of the tune role's steps (the "before"
        smoke, apply, audit, the "after" smoke: :meth:`apply_wave`); then the gates' outcome
        (:meth:`settle_wave`). False: the rollout stops."""
        i = b["index"]
        self.event(i, todo, "wave", "started")
        if not self.drain(b, todo):
            return False
        if self.req.drift_gate and not self.drift_gate(b, todo):
            return False
        failed = self.apply_wave(b, todo)
        if failed is None:
            return False
        return self.settle_wave(b, todo, failed, passed)

    def drain(self, b: dict, todo: list[str]) -> bool:
        """Pre-batch hooks, host by host (nothing has changed on the wave yet). A failing hook stops
        the rollout: the hosts drained so far get their post-batch hooks."""
        i = b["index"]
        drained = []
        for h in todo:
            self.host(h)["out"] = True
            self.set_step([h], "pre_hook")
            drained.append(h)
            bad = self.run_hooks("pre_batch", h, i)
            if bad:
                self.fail(h, "pre_hook", bad)
                for other in todo:
                    self.host(other)["status"] = "failed" if other == h else "pending"
                    if other != h:
                        self.host(other)["step"] = "pending"
                self.event(i, [h], "pre_hook", "failed", bad)
                self.post_hooks(drained, i, after="a failed pre-batch hook")
                self.stop(b, h, "pre_hook", bad)
                return False
            self.event(i, [h], "pre_hook", "ok")
        return True

    def drift_gate(self, b: dict, todo: list[str]) -> bool:
        """hostkit drift on the drained wave (its pre-batch hooks ran, hostkit changed nothing yet)
        against its baselines, with the rollout's smoke duration. A host that drifted or could not
        be judged stops the rollout; the wave gets its post-batch hooks (it keeps what its hooks did)."""
        i = b["index"]
        self.set_step(todo, "drift")
        judged = api.drift(
            api.DriftRequest(
                inventory=self.req.inventory,
                limit=",".join(todo),
                against=self.req.drift_against,
                smoke=True,
                smoke_duration=self.req.smoke_duration,
            )
        ).hosts
        bad = {h: drift_why(judged.get(h)) for h in todo if (judged.get(h) or {}).get("status") != "ok"}
        for h in todo:
            self.host(h)["drift"] = {k: v for k, v in (judged.get(h) or {}).items() if k != "differences"}
        if not bad:
            self.event(i, todo, "drift", "ok")
            return True
        for h in todo:
            if h in bad:
                self.fail(h, "drift", bad[h])
            self.host(h)["status"] = "failed" if h in bad else "pending"
            self.host(h)["step"] = "drift" if h in bad else "pending"
        first = next(h for h in todo if h in bad)
        self.event(i, list(bad), "drift", "failed", bad[first])
        self.post_hooks(todo, i, after="a failed drift gate")
        return self.stop(b, first, "drift", bad[first])

    def apply_wave(self, b: dict, todo: list[str]) -> list[str] | None:
        """The tune role's steps in one run (playbooks/apply.yml with its gates, the tasks of the
        collection's rollout.yml): the "before" smoke (evidence), the apply, the audit (strict with
        ``reboot``) and the smoke gate, each gate the module's own rule. The run id is in the state
        before the run starts (resume and abort find a cut-off run). The hosts that failed their
        apply or a gate; None when the run could not start (the rollout stops)."""
        i = b["index"]
        run_id = new_run_id()
        b["apply_runs"].append(run_id)
        for h in todo:
            self.host(h)["apply_started"] = rollout_state.now()
            self.host(h)["runs"].append(run_id)
        self.set_step(todo, "apply")
        try:
            res = api.apply(self.req.apply_request(",".join(todo), run_id))
        except BadInput as exc:  # a host's facts or plan: raised before the apply changed anything
            for h in todo:
                self.fail(h, "apply", f"bad input: {exc}")
                self.host(h)["status"] = "failed"
            self.post_hooks(todo, i, after="an apply that could not start")
            self.stop(b, todo[0], "apply", f"bad input: {exc}")
            return None
        self.record_smoke(i, todo, "before", res)
        failed: list[str] = []
        for h in todo:
            ha = res.hosts.get(h)
            self.host(h)["apply"] = {
                "run_id": res.run_id,
                "status": ha.status if ha else "failed",
                "changed": ha.changed if ha else 0,
                "reboot_required": ha.reboot_required if ha else None,
            }
            if ha is None or ha.status not in ("ok", "changed"):
                why = (f"{ha.status}: " + ("; ".join(ha.refused) or ha.msg or "")) if ha else "no result from the apply"
                self.fail(h, "apply", why, refused=bool(ha and ha.status == "refused"))
                failed.append(h)
        self.event(i, todo, "apply", "failed" if failed else "ok", f"run {res.run_id}")
        applied = [h for h in todo if h not in failed]
        self.audit_gate(i, applied, res, failed)
        self.smoke_gate(i, [h for h in applied if h not in failed], res, failed)
        return failed

    def audit_gate(self, i: int, live: list[str], res, failed: list[str]) -> None:
        """The audit of the hosts the apply left standing (the run's ``hostkit.tuning.audit``: drift,
        and a pending reboot with ``reboot``, fail it); a host that fails it joins ``failed``."""
        if not live:
            return
        for h in live:
            ha = res.hosts[h]
            r = ha.audit or {"status": "failed", "msg": "no audit result"}
            doc = r.get("audit") or {"status": r.get("status") or "failed", "error": r.get("msg")}
            self.host(h)["audit"] = {"status": doc["status"], "counts": doc.get("counts")}
            if ha.failed_gate == "audit" or ha.audit is None:
                self.fail(h, "audit", api.audit_failure(doc))
                failed.append(h)
        self.event(i, live, "audit", "failed" if set(live) & set(failed) else "ok")

    def smoke_gate(self, i: int, live: list[str], res, failed: list[str]) -> None:
        """The "after" smoke against the SLO (the run's ``hostkit.tuning.smoke``); a host that misses
        it joins ``failed``."""
        if not live:
            return
        verdicts = self.record_smoke(i, live, "after", res)
        for h in live:
            if h not in verdicts:  # the run ended before this host's smoke gate: a run that gave nothing
                verdicts[h] = self.host(h)["after"] = smoke_gate.gate_record(None, "no result from the smoke gate")
            elif res.hosts[h].failed_gate != "smoke":  # the module's verdict (smoke.gate.GATE_FAILS)
                continue
            self.fail(h, "smoke", verdicts[h]["why"])
            failed.append(h)
        self.event(i, live, "smoke_after", "failed" if set(live) & set(failed) else "ok")

    def settle_wave(self, b: dict, todo: list[str], failed: list[str], passed: list[str]) -> bool:
        """The gates decided: roll back (a stop: the whole wave and the batch's earlier waves; within
        --max-failures: the failed hosts), then post-batch hooks for the hosts that passed and the
        hosts put back as they were. False: the rollout stops."""
        i = b["index"]
        self.state["failed_hosts"] += len(failed)
        stop = self.state["failed_hosts"] > self.req.max_failures
        back = todo if stop else failed
        brought_back = self.roll_back(back, i) if back else []
        for h in back:
            self.host(h)["status"] = "rolled_back" if h in brought_back else "failed"
            if h not in failed and h not in brought_back:
                self.fail(h, "rollback", (self.host(h)["rollback"] or {}).get("why") or "rollback failed")
        ok = [h for h in todo if h not in back]
        after = self.post_hooks(ok + [h for h in back if h in brought_back], i)
        for h in ok:
            if self.host(h)["gate"] is None:
                self.host(h)["status"], self.host(h)["step"] = "done", "done"
        self.event(i, todo, "wave", "done")
        if failed and stop:
            self.redrain_and_roll_back(passed, i)  # the batch's earlier waves, back in service
            first = failed[0]
            return self.stop(
                b,
                first,
                self.host(first)["gate"]["gate"],
                self.host(first)["gate"]["why"],
                refused=bool(self.host(first)["gate"].get("refused")),
            )
        if after:
            return self.stop(b, after[0], "post_hook", self.host(after[0])["gate"]["why"])
        return True

    def redrain_and_roll_back(self, hosts: list[str], batch: int) -> None:
        """Roll back hosts of the stopped batch that passed in an earlier wave and are back in
        service: taken out again under ``--max-unavailable`` (pre-batch hooks, rollback, post-batch
        hooks). A host whose pre-batch hook fails keeps its tuning (its post-batch hooks run)."""
        todo = list(hosts)
        while todo:
            wave = next_wave(todo, self.req.max_unavailable, len(self.out_of_service(besides=todo)))
            if not wave:
                for h in todo:
                    self.host(h)["rollback"] = {"runs": [], "ok": False, "why": "no room under --max-unavailable"}
                self.event(batch, todo, "rollback", "skipped", "no room under --max-unavailable")
                return
            todo = todo[len(wave) :]
            drained = []
            for h in wave:
                self.host(h)["out"] = True
                bad = self.run_hooks("pre_batch", h, batch)
                if bad:
                    self.host(h)["rollback"] = {"runs": [], "ok": False, "why": f"kept its tuning: {bad}"}
                    self.event(batch, [h], "pre_hook", "failed", bad)
                else:
                    drained.append(h)
            brought_back = self.roll_back(drained, batch) if drained else []
            for h in drained:
                self.host(h)["status"] = "rolled_back" if h in brought_back else "failed"
                self.host(h)["step"] = "rollback"
                if h not in brought_back:
                    self.fail(h, "rollback", (self.host(h)["rollback"] or {}).get("why") or "rollback failed")
            self.post_hooks(
                [h for h in wave if h not in drained or h in brought_back],
                batch,
                after="a rollback of the stopped batch",
            )

    def stop(self, b: dict, host: str, gate: str, why: str, refused: bool = False) -> bool:
        b["status"], b["finished"] = "failed", rollout_state.now()
        self.state["failure"] = {
            "batch": b["index"],
            "host": host,
            "gate": gate,
            "why": why,
            **({"refused": True} if refused else {}),
        }
        self.event(b["index"], [host], "rollout", "stopped", f"{gate}: {why}")
        return False

    # --- steps
    def run_hooks(self, hook: str, host: str, batch: int) -> str | None:
        """Run the host's hooks of one kind in order; the first failure's reason, or None."""
        for cmd in self.hooks.get(host, {}).get(hook, []):
            r = rollout_hooks.run_hook(
                hook, host, cmd, timeout=self.req.hook_timeout, rollout_id=self.state["rollout_id"], batch=batch
            )
            self.host(host)["hooks"].append({**r.to_dict(), "batch": batch, "at": rollout_state.now()})
            self.save()
            if not r.ok:
                return r.why()
        return None

    def post_hooks(self, hosts: list[str], batch: int, after: str = "") -> list[str]:
        """Post-batch hooks of ``hosts``; the hosts whose hook failed (their gate is set)."""
        bad = []
        for h in hosts:
            if self.host(h)["gate"] is None:
                self.host(h)["step"] = "post_hook"
            why = self.run_hooks("post_batch", h, batch)
            if why:
                bad.append(h)
                if self.host(h)["gate"] is None:
                    self.fail(h, "post_hook", why)
                    self.host(h)["status"] = "failed"
                self.event(batch, [h], "post_hook", "failed", why)
                continue
            self.host(h)["out"] = False  # back in service
            if self.hooks.get(h, {}).get("post_batch"):
                self.event(batch, [h], "post_hook", "ok", after)
        return bad

    def record_smoke(self, batch: int, hosts: list[str], phase: str, res) -> dict[str, dict]:
        """Each host's smoke run of ``phase`` in the apply run ``res``: a short record in the state,
        the full report in the run dir (the fleet report's plots)."""
        out = {}
        d = rollout_state.run_dir(self.state["rollout_id"]) / "smoke"
        d.mkdir(parents=True, exist_ok=True)
        for h in hosts:
            r = res.hosts[h].smoke.get(phase) if h in res.hosts else None
            if r is None:
                continue  # the host did not get that far (its apply's record says why)
            doc = r.get("smoke")
            rec = smoke_gate.gate_record(doc, None if doc else r.get("msg") or "no smoke result")
            if doc:
                (d / f"{phase}-{h}.json").write_text(json.dumps(doc))
            rec["run_id"] = res.run_id
            self.host(h)[phase] = rec
            out[h] = rec
        if out:
            self.event(batch, list(out), f"smoke_{phase}", ", ".join(f"{h} {out[h]['verdict']}" for h in out))
        return out

    def journaled(self, hosts: list[str]) -> dict[str, dict[str, object]]:
        """Per host, the runs in its journal: run id -> rolled_back (None: not rolled back)."""
        if not hosts:
            return {}
        res = api.history(api.HistoryRequest(inventory=self.req.inventory, limit=",".join(hosts)))
        return {
            h: {r["run_id"]: r.get("rolled_back") for r in res.hosts[h].doc["runs"]}
            for h in hosts
            if h in res.hosts and res.hosts[h].ok
        }

    def run_order(self, run_id: str) -> int:
        """Where a run of this rollout comes in the order its applies started (the batches' apply runs,
        recorded before each starts): run ids alone name the second, and two waves can share one."""
        order = [r for b in self.state["batches"] for r in b.get("apply_runs", [])]
        return order.index(run_id) if run_id in order else -1

    def runs_to_undo(self, hosts: list[str]) -> dict[str, list[str]]:
        """Per host, this rollout's apply runs still in force in its journal, newest first (a run id
        is recorded before its apply starts: a run cut off by a killed controller is among them)."""
        journals = self.journaled(hosts)
        return {
            h: sorted(
                (r for r in journals[h] if r in set(self.host(h)["runs"]) and journals[h][r] is None),
                key=self.run_order,
                reverse=True,
            )
            for h in hosts
            if h in journals
        }

    def roll_back(self, hosts: list[str], batch: int) -> list[str]:
        """Roll back this rollout's runs on ``hosts`` (newest first); the hosts restored."""
        todo = self.runs_to_undo(hosts)
        by_run: dict[str, list[str]] = {}
        for h, runs in todo.items():
            for r in runs:
                by_run.setdefault(r, []).append(h)
        ok = {h for h in hosts if h in todo}  # hosts with no journaled run: nothing to restore
        reasons: dict[str, str] = {}
        for run_id in sorted(by_run, key=self.run_order, reverse=True):
            group = by_run[run_id]
            self.set_step(group, "rollback")
            rb = api.rollback(
                api.RollbackRequest(
                    inventory=self.req.inventory,
                    limit=",".join(group),
                    run_id=run_id,
                    reboot=self.req.reboot,
                    reboot_timeout=self.req.reboot_timeout,
                )
            )
            for h in group:
                r = rb.hosts.get(h)
                good = bool(r and r.ok and restored(r.doc))
                reboot = rb.reboots.get(h)
                if reboot and reboot.status not in ("ok", "would_run"):
                    good, reasons[h] = False, f"reboot after rollback {reboot.status}: {reboot.msg}"
                elif not good:
                    reasons[h] = f"rollback of run {run_id}: " + (
                        r.error if r and not r.ok else str((r.doc if r else {}).get("errors") or "re-check failed")
                    )
                if not good:
                    ok.discard(h)
            self.event(batch, group, "rollback", "ok" if all(h in ok for h in group) else "failed", f"run {run_id}")
        for h in hosts:
            self.host(h)["rollback"] = {
                "runs": todo.get(h, []),
                "ok": h in ok,
                **({"why": reasons[h]} if h in reasons else {}),
                **({} if h in todo else {"why": "history unavailable"}),
            }
            if h not in todo:
                ok.discard(h)
        self.save()
        return sorted(ok)

    # --- resume and abort
    def release_cut_off(self) -> None:
        """A controller killed during an apply leaves that run's host-side lock: release it (only
        that run's; the lock of any other run is left alone)."""
        by_run: dict[str, list[str]] = {}
        for h, rec in self.state["hosts"].items():
            if rec["step"] == "apply" and rec["status"] == "running" and rec["runs"]:
                by_run.setdefault(rec["runs"][-1], []).append(h)
        for run_id, group in by_run.items():
            api.unlock(api.UnlockRequest(inventory=self.req.inventory, limit=",".join(group), run_id=run_id))
            self.event(self.host(group[0])["batch"], group, "unlock", "ok", f"run {run_id} was cut off")

    def resume(self) -> RolloutResult:
        """Hosts not done with this rollout's runs still in force (cut off mid-batch, or a failed
        rollback) are rolled back first, so that each host ends with one apply of this rollout;
        then the loop goes on from the first batch not done."""
        _, self.hooks = _prepare(self.req)
        self.release_cut_off()
        undone = [h for h, r in self.state["hosts"].items() if r["status"] != "done" and r["runs"]]
        for bi in sorted({self.host(h)["batch"] for h in undone}, reverse=True):
            group = [h for h in undone if self.host(h)["batch"] == bi]
            brought_back = self.roll_back(group, bi)
            bad = [h for h in group if h not in brought_back]
            if bad:
                self.state["status"] = "failed"
                self.state["failure"] = {
                    "batch": bi,
                    "host": bad[0],
                    "gate": "rollback",
                    "why": "resume: " + (self.host(bad[0])["rollback"] or {}).get("why", ""),
                }
                self.save()
                return RolloutResult(self.state, self.write_report())
        for rec in self.state["hosts"].values():
            if rec["status"] != "done":
                rec["status"], rec["step"], rec["gate"] = "pending", "pending", None
        self.save()
        return self.run()

    def abort(self) -> RolloutResult:
        errors = []
        self.release_cut_off()
        touched = [h for h, rec in self.state["hosts"].items() if rec["runs"]]
        for b in reversed(self.state["batches"]):
            hosts = [h for h in b["hosts"] if h in touched]
            if not hosts:
                continue
            brought_back = self.roll_back(hosts, b["index"])
            for h in hosts:
                self.host(h)["status"] = "aborted" if h in brought_back else "failed"
                if h not in brought_back:
                    errors.append(f"{h}: {self.host(h)['rollback'].get('why', 'rollback failed')}")
            b["status"] = "aborted"
        self.state["abort"] = {"at": rollout_state.now(), "errors": errors}
        self.state["status"] = "aborted"
        self.save()
        return RolloutResult(self.state, self.write_report())

    def write_report(self) -> str:
        from hostkit.rollout.report import write_report

        return str(write_report(self.state))
