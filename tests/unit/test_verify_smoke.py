"""apply --verify-smoke --revert-on-fail: which smoke verdicts roll a host back (decided on the
controller; the lab test in test_rollback_lab.py proves the MISSED path end to end)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hostkit import api
from hostkit.ansible.agent_call import AgentReply
from hostkit.ansible.apply import HostApply
from hostkit.errors import BadInput


def _slo(verdict: str) -> dict:
    return {
        "slo": {"passed": verdict == "PASSED", "verdict": verdict, "p999_ms": 0.5, "target_p999_ms": 1.0},
        "samples": 20000,
    }


def bare_metal_and_guest_plans(sysroots) -> api.PlanResult:
    """The plans of two hosts as api.plan gives them: "bm" (the seed's EPYC, bare-metal profile: its
    plan changes kernel arguments) and "vm" (a KVM guest, vmware-guest profile: it changes none)."""
    from hostkit.facts import gather
    from hostkit.plan import build_plan
    from hostkit.profiles import load_profile

    def host_plan(name, fixture, profile):
        facts = gather(str(sysroots[fixture]))
        return api.HostPlan(name, "ok", facts=facts, plan=build_plan(facts, load_profile(profile)))

    return api.PlanResult(
        {
            "bm": host_plan("bm", "epyc-9634-nps1", "bare-metal-inference"),
            "vm": host_plan("vm", "kvm-small", "vmware-guest"),
        }
    )


def test_only_missed_or_failed_smoke_reverts(monkeypatch):
    replies = {
        "pass": AgentReply("pass", "ok", doc=_slo("PASSED")),
        "few": AgentReply("few", "ok", doc=_slo("INCONCLUSIVE")),
        "miss": AgentReply("miss", "ok", doc=_slo("MISSED")),
        "down": AgentReply("down", "unreachable", error="gone"),
    }
    monkeypatch.setattr(api, "smoke", lambda req: SimpleNamespace(hosts=replies))
    rolled = []

    def fake_rollback(req):
        rolled.append(req.limit)
        return SimpleNamespace(
            hosts={req.limit: AgentReply(req.limit, "ok", doc={"errors": [], "verify": {"ok": True}})}
        )

    monkeypatch.setattr(api, "rollback", fake_rollback)
    req = api.ApplyRequest(inventory="inv.yml", verify_smoke=True, revert_on_fail=True)
    result = api.ApplyResult("run-1", False, {h: HostApply(h, "changed") for h in replies}, None)
    out = api._verify_smoke(req, result)
    assert sorted(rolled) == ["down", "miss"]
    assert out["miss"].rollback == "run run-1 rolled back"
    assert out["few"].verdict.startswith("INCONCLUSIVE") and out["few"].rollback is None
    assert out["pass"].passed and out["pass"].rollback is None
    # the verdicts in the gate's words (smoke.gate.gate_record), as hostkit rollout reports them
    assert out["miss"].verdict == "MISSED: p999 0.5 ms vs target 1.0 ms (20000 samples)" and not out["miss"].passed
    assert out["down"].verdict == "smoke run failed: unreachable: gone" and not out["down"].passed


def test_a_rollback_whose_re_check_finds_something_off_is_a_failed_rollback(monkeypatch):
    """The rollback's own re-check is part of "rolled back" (agent.rollback.restored, the rule the
    agent's exit status and `hostkit rollback` use): no errors but a value still off is a failure."""
    monkeypatch.setattr(
        api, "smoke", lambda req: SimpleNamespace(hosts={"miss": AgentReply("miss", "ok", doc=_slo("MISSED"))})
    )
    off = {"errors": [], "verify": {"ok": False, "findings": [{"check": "sysctl kernel.numa_balancing"}]}}
    monkeypatch.setattr(api, "rollback", lambda req: SimpleNamespace(hosts={"miss": AgentReply("miss", "ok", doc=off)}))
    req = api.ApplyRequest(inventory="inv.yml", verify_smoke=True, revert_on_fail=True)
    out = api._verify_smoke(req, api.ApplyResult("run-1", False, {"miss": HostApply("miss", "changed")}, None))
    assert out["miss"].rollback.startswith("rollback failed: ") and not out["miss"].passed


def test_verify_smoke_asks_the_plan_for_its_gate_and_measures_only_changed_hosts(monkeypatch, tmp_path):
    """apply --verify-smoke plans every host for a smoke gate (the plan refuses unbooted kernel
    arguments without --reboot: tests/unit/test_collection_actions.py); a refused host is never smoke-tested
    and the command exits 3. Bad input on any host is the command's bad input."""
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    bm: {hostkit_profile: bare-metal-inference}\n    vm: {}\n")
    asked = []

    def fake_run_apply(hosts, inventory, **kw):
        asked.append((sorted(hosts), kw["smoke_gate"], kw["reboot"], kw["profiles"]))
        bm = (
            HostApply("bm", "changed", changed=1)
            if kw["reboot"]
            else HostApply("bm", "refused", refused=["a smoke gate would measure the running kernel, ..."])
        )
        return {"bm": bm, "vm": HostApply("vm", "changed", changed=1)}, SimpleNamespace(private_data_dir="x")

    monkeypatch.setattr(api, "run_apply", fake_run_apply)
    monkeypatch.setattr(
        api,
        "smoke",
        lambda req: SimpleNamespace(hosts={h: AgentReply(h, "ok", doc=_slo("PASSED")) for h in req.limit.split(",")}),
    )
    result = api.apply(api.ApplyRequest(inventory=str(inv), verify_smoke=True, smoke_duration=2))
    assert asked == [(["bm", "vm"], True, False, {"bm": "bare-metal-inference", "vm": None})]
    assert set(result.smoke) == {"vm"} and result.rc == 3
    result = api.apply(api.ApplyRequest(inventory=str(inv), verify_smoke=True, smoke_duration=2, reboot=True))
    assert asked[-1][1:3] == (True, True) and set(result.smoke) == {"bm", "vm"} and result.rc == 0
    # --check measures nothing, so it asks for no gate; --profile wins over the inventory's
    api.apply(api.ApplyRequest(inventory=str(inv), check=True, profile="vmware-guest"))
    assert asked[-1][1] is False and asked[-1][3] == {"bm": "vmware-guest", "vm": "vmware-guest"}

    def bad_input_on_vm(hosts, inventory, **kw):
        return {
            "bm": HostApply("bm", "ok"),
            "vm": HostApply("vm", "failed", msg="vm: hostkit_overrides: not online", bad_input=True),
        }, SimpleNamespace(private_data_dir="x")

    monkeypatch.setattr(api, "run_apply", bad_input_on_vm)
    with pytest.raises(BadInput, match="^vm: hostkit_overrides: not online$"):
        api.apply(api.ApplyRequest(inventory=str(inv)))
