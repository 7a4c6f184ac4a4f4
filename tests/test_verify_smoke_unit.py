"""apply --verify-smoke --revert-on-fail: which smoke verdicts roll a host back (decided on the
controller; the lab test in test_rollback_lab.py proves the MISSED path end to end)."""

from __future__ import annotations

from types import SimpleNamespace

from hostkit import api
from hostkit.ansible.agent_call import AgentReply
from hostkit.ansible.apply import HostApply


def _slo(verdict: str) -> dict:
    return {"slo": {"passed": verdict == "PASSED", "verdict": verdict, "p999_ms": 0.5, "target_p999_ms": 1.0}}


def bare_metal_and_guest_plans(sysroots) -> api.PlanResult:
    """The plans of two hosts as api.plan gives them: "bm" (the seed's EPYC, bare-metal profile: its
    plan changes kernel arguments) and "vm" (a KVM guest, vmware-guest profile: it changes none)."""
    from hostkit.facts import gather
    from hostkit.plan import build_plan
    from hostkit.profiles import load_profile

    def host_plan(name, fixture, profile):
        facts = gather(str(sysroots[fixture]))
        return api.HostPlan(name, "ok", facts=facts, plan=build_plan(facts, load_profile(profile)))

    return api.PlanResult({"bm": host_plan("bm", "epyc-9634-nps1", "bare-metal-inference"),
                           "vm": host_plan("vm", "kvm-small", "vmware-guest")})


def test_only_missed_or_failed_smoke_reverts(monkeypatch):
    replies = {"pass": AgentReply("pass", "ok", doc=_slo("PASSED")),
               "few": AgentReply("few", "ok", doc=_slo("INCONCLUSIVE")),
               "miss": AgentReply("miss", "ok", doc=_slo("MISSED")),
               "down": AgentReply("down", "unreachable", error="gone")}
    monkeypatch.setattr(api, "smoke", lambda req: SimpleNamespace(hosts=replies))
    rolled = []

    def fake_rollback(req):
        rolled.append(req.limit)
        return SimpleNamespace(hosts={req.limit: AgentReply(req.limit, "ok", doc={"errors": [],
                                                                                  "verify": {"ok": True}})})

    monkeypatch.setattr(api, "rollback", fake_rollback)
    req = api.ApplyRequest(inventory="inv.yml", verify_smoke=True, revert_on_fail=True)
    result = api.ApplyResult("run-1", False, {h: HostApply(h, "changed") for h in replies}, None)
    out = api._verify_smoke(req, result)
    assert sorted(rolled) == ["down", "miss"]
    assert out["miss"].rollback == "run run-1 rolled back"
    assert out["few"].verdict.startswith("INCONCLUSIVE") and out["few"].rollback is None
    assert out["pass"].passed and out["pass"].rollback is None


def test_a_rollback_whose_re_check_finds_something_off_is_a_failed_rollback(monkeypatch):
    """The rollback's own re-check is part of "rolled back" (agent.rollback.restored, the rule the
    agent's exit status and `hostkit rollback` use): no errors but a value still off is a failure."""
    monkeypatch.setattr(api, "smoke", lambda req: SimpleNamespace(hosts={"miss": AgentReply(
        "miss", "ok", doc=_slo("MISSED"))}))
    off = {"errors": [], "verify": {"ok": False, "findings": [{"check": "sysctl kernel.numa_balancing"}]}}
    monkeypatch.setattr(api, "rollback", lambda req: SimpleNamespace(hosts={"miss": AgentReply("miss", "ok",
                                                                                               doc=off)}))
    req = api.ApplyRequest(inventory="inv.yml", verify_smoke=True, revert_on_fail=True)
    out = api._verify_smoke(req, api.ApplyResult("run-1", False, {"miss": HostApply("miss", "changed")}, None))
    assert out["miss"].rollback.startswith("rollback failed: ") and not out["miss"].passed


def test_verify_smoke_without_reboot_refuses_a_plan_that_changes_kernel_arguments(monkeypatch, sysroots):
    """The host whose plan changes kernel arguments is refused before anything runs (its smoke would
    measure the kernel it booted, untuned); the host whose plan does not is applied and measured."""
    plans = bare_metal_and_guest_plans(sysroots)
    monkeypatch.setattr(api, "plan", lambda req, on_event=None: plans)
    applied = []

    def fake_run_apply(runnable, inventory, **kw):
        applied.append(sorted(runnable))
        return {h: HostApply(h, "changed", changed=1) for h in runnable}, SimpleNamespace(run_id=kw["run_id"])

    monkeypatch.setattr(api, "run_apply", fake_run_apply)
    monkeypatch.setattr(api, "smoke", lambda req: SimpleNamespace(hosts={
        h: AgentReply(h, "ok", doc=_slo("PASSED")) for h in req.limit.split(",")}))
    result = api.apply(api.ApplyRequest(inventory="inv.yml", verify_smoke=True, smoke_duration=2))
    assert applied == [["vm"]]  # the refused host was never run
    bm = result.hosts["bm"]
    assert bm.status == "refused" and len(bm.refused) == 1
    assert bm.refused[0].startswith("--verify-smoke would measure the running kernel, booted without "
                                    "isolcpus=managed_irq,2-83,86-167 nohz_full=2-83,86-167 "
                                    "rcu_nocbs=2-83,86-167 ...: add --reboot"), bm.refused
    assert set(result.smoke) == {"vm"} and result.rc == 3
    # with --reboot the new arguments are booted before the smoke: nothing refused
    applied.clear()
    plans.hosts["bm"] = bare_metal_and_guest_plans(sysroots).hosts["bm"]
    result = api.apply(api.ApplyRequest(inventory="inv.yml", verify_smoke=True, smoke_duration=2, reboot=True))
    assert applied == [["bm", "vm"]] and result.hosts["bm"].status == "changed"
