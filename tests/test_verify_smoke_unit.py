"""apply --verify-smoke --revert-on-fail: which smoke verdicts roll a host back (decided on the
controller; the lab test in test_rollback_lab.py proves the MISSED path end to end)."""

from __future__ import annotations

from types import SimpleNamespace

from hostkit import api
from hostkit.ansible.agent_call import AgentReply
from hostkit.ansible.apply import HostApply


def _slo(verdict: str) -> dict:
    return {"slo": {"passed": verdict == "PASSED", "verdict": verdict, "p999_ms": 0.5, "target_p999_ms": 1.0}}


def test_only_missed_or_failed_smoke_reverts(monkeypatch):
    replies = {"pass": AgentReply("pass", "ok", doc=_slo("PASSED")),
               "few": AgentReply("few", "ok", doc=_slo("INCONCLUSIVE")),
               "miss": AgentReply("miss", "ok", doc=_slo("MISSED")),
               "down": AgentReply("down", "unreachable", error="gone")}
    monkeypatch.setattr(api, "smoke", lambda req: SimpleNamespace(hosts=replies))
    rolled = []

    def fake_rollback(req):
        rolled.append(req.limit)
        return SimpleNamespace(hosts={req.limit: AgentReply(req.limit, "ok", doc={"errors": []})})

    monkeypatch.setattr(api, "rollback", fake_rollback)
    req = api.ApplyRequest("inv.yml", verify_smoke=True, revert_on_fail=True)
    result = api.ApplyResult("run-1", False, {h: HostApply(h, "changed") for h in replies}, None)
    out = api._verify_smoke(req, result)
    assert sorted(rolled) == ["down", "miss"]
    assert out["few"].verdict.startswith("INCONCLUSIVE") and out["few"].rollback is None
    assert out["pass"].passed and out["pass"].rollback is None
