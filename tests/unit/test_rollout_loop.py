"""The rollout loop's decisions (hostkit/rollout/driver.py) against a fake of the layer below: an
``api`` whose hosts keep journals in memory, so batches, waves, hooks, gates, rollbacks, resume and
abort are checked in milliseconds, without sshd. The hook scripts are real (they run on this
machine, as they do in a rollout); what needs real SSH and a real controller killed mid-apply stays
in tests/lab/test_rollout.py.

The fleet matches the lab test's: six hosts, ``--batch 3 --canary 1 --max-unavailable 2`` (batches
n1 | n2,n3,n4 | n5,n6; the middle batch in two waves, n2,n3 then n4).
"""

from __future__ import annotations

import itertools
import stat
from types import SimpleNamespace

import pytest
import yaml

from hostkit import api
from hostkit.ansible.agent_call import AgentReply
from hostkit.ansible.apply import HostApply
from hostkit.errors import BadInput
from hostkit.rollout import driver
from hostkit.rollout import state as rollout_state
from hostkit.smoke import metrics
from hostkit.smoke.fleet import HISTOGRAMS
from hostkit.smoke.gate import gate_record

HOSTS = ["n1", "n2", "n3", "n4", "n5", "n6"]
BATCHES = [["n1"], ["n2", "n3", "n4"], ["n5", "n6"]]
WAVES = [["n1"], ["n2", "n3"], ["n4"], ["n5", "n6"]]
HOOK = """#!/bin/sh
d=$(dirname "$0")
echo "$1 $2" >> "$d/calls.log"
if [ -e "$d/fail-$1-$2" ]; then echo "cannot drain $2: node has unevictable pods" >&2; exit 3; fi
exit 0
"""


class Killed(BaseException):
    """The controller dies (SIGKILL: no handler runs) in the middle of an apply."""


class FakeFleet:
    """The api a rollout drives, over hosts that exist only here. Each host has a journal of runs
    (in order, each rolled back or not); every call is recorded as (op, hosts, detail)."""

    def __init__(self, monkeypatch, miss: tuple[str, ...] = ()):
        self.journal: dict[str, list[dict]] = {h: [] for h in HOSTS}
        self.locks: dict[str, str | None] = dict.fromkeys(HOSTS)
        self.calls: list[tuple] = []
        self.miss = set(miss)  # hosts whose smoke gate says MISSED
        self.drift: set[str] = set()  # hosts whose audit finds drift
        self.kill_in_apply_of: str | None = None  # the controller dies once this host's run is journaled
        self.clock = itertools.count(1)
        # audit and smoke too: the rollout must not call them (its wave's apply run holds the gates)
        for op in ("plan", "apply", "audit", "smoke", "history", "rollback", "unlock"):
            monkeypatch.setattr(api, op, getattr(self, op))

    @staticmethod
    def _hosts(limit: str | None) -> list[str]:
        return limit.split(",") if limit else list(HOSTS)

    def plan(self, req):
        plan = SimpleNamespace(refused=[], boot_changes=lambda args: [])
        return SimpleNamespace(
            hosts={
                h: SimpleNamespace(
                    status="ok", error=None, refused=False, plan=plan, facts={"kernel": {"cmdline_args": {"args": {}}}}
                )
                for h in self._hosts(req.limit)
            }
        )

    def apply(self, req):
        """playbooks/apply.yml with the tune role's gates: per host the "before" smoke, the apply
        (journaled, under the lock), the audit and the smoke gate, as HostApply reports them."""
        assert req.gates and req.smoke_duration == 2, "a rollout's wave runs the tune role's gates"
        hosts = self._hosts(req.limit)
        self.calls.append(("apply", hosts, req.run_id))
        for h in hosts:
            assert self.locks[h] is None, f"{h} is locked by run {self.locks[h]}"
            self.locks[h] = req.run_id
            self.journal[h].append({"run_id": req.run_id, "t": next(self.clock), "rolled_back": None})
            if h == self.kill_in_apply_of:
                self.kill_in_apply_of = None
                raise Killed
        out = {}
        for h in hosts:
            self.locks[h] = None
            ha = out[h] = HostApply(h, "changed", changed=3)
            ha.smoke["before"] = self.smoke_result(h, gate=False)
            drift = h in self.drift
            ha.audit = {
                "status": "drift" if drift else "pass",
                "failed": drift,
                "audit": {
                    "status": "drift" if drift else "pass",
                    "counts": {"pass": 8, "drift": 1} if drift else {"pass": 9},
                    "findings": [
                        {
                            "check": "sysctl kernel.sched_rt_runtime_us",
                            "status": "drift",
                            "expected": "-1",
                            "actual": "950000",
                            "source": "/proc/sys",
                        }
                    ]
                    if drift
                    else [],
                },
            }
            if drift:
                ha.failed_gate = "audit"
                continue
            ha.smoke["after"] = self.smoke_result(h, gate=True)
            if ha.smoke["after"].get("failed"):
                ha.failed_gate = "smoke"
        return SimpleNamespace(run_id=req.run_id, hosts=out)

    def smoke_result(self, h: str, gate: bool) -> dict:
        """``hostkit.tuning.smoke``'s result: the report and the gate's record (MISSED fails the gate)."""
        samples = [0.01 * (i % 50) for i in range(900)] + [2.5]
        missed = h in self.miss
        slo = {
            "verdict": "MISSED" if missed else "INCONCLUSIVE",
            "passed": False,
            "p999_ms": 2.5,
            "target_p999_ms": 0.001 if missed else 1000.0,
        }
        doc = {
            "slo": slo,
            "samples": len(samples),
            "diagnosis": [],
            "histograms": {k: metrics.histogram(samples) for k in HISTOGRAMS},
            **{f"{k}_ms": metrics.summary(samples) for k in HISTOGRAMS},
        }
        rec = gate_record(doc)
        return {"changed": False, "smoke": doc, **rec, **({"failed": True} if gate and missed else {})}

    def audit(self, req):
        self.calls.append(("audit", self._hosts(req.limit), None))
        raise AssertionError("the rollout audits in its apply run (the tune role's gate), not with api.audit")

    def smoke(self, req):
        self.calls.append(("smoke", self._hosts(req.limit), None))
        raise AssertionError("the rollout smoke-tests in its apply run (the tune role's gate), not with api.smoke")

    def history(self, req):
        return SimpleNamespace(
            hosts={
                h: AgentReply(
                    h,
                    "ok",
                    doc={"runs": [{"run_id": r["run_id"], "rolled_back": r["rolled_back"]} for r in self.journal[h]]},
                )
                for h in self._hosts(req.limit)
            }
        )

    def rollback(self, req):
        hosts = self._hosts(req.limit)
        self.calls.append(("rollback", hosts, req.run_id))
        for h in hosts:
            for r in self.journal[h]:
                if r["run_id"] == req.run_id and r["rolled_back"] is None:
                    r["rolled_back"] = next(self.clock)
        return SimpleNamespace(
            hosts={h: AgentReply(h, "ok", doc={"errors": [], "verify": {"ok": True}}) for h in hosts}, reboots={}
        )

    def unlock(self, req):
        hosts = self._hosts(req.limit)
        self.calls.append(("unlock", hosts, req.run_id))
        for h in hosts:
            if self.locks[h] == req.run_id:
                self.locks[h] = None

    # --- what the tests read
    def in_force(self) -> dict[str, list[str]]:
        return {h: [r["run_id"] for r in runs if r["rolled_back"] is None] for h, runs in self.journal.items()}

    def ops(self, op: str) -> list[list[str]]:
        return [hosts for o, hosts, _ in self.calls if o == op]


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    """A fake fleet and an inventory of its hosts with recording hooks (tmp_path/calls.log)."""
    hook = tmp_path / "hook.sh"
    hook.write_text(HOOK)
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    inv = tmp_path / "inventory.yml"
    inv.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {
                        "hostkit_pre_batch": f"{hook} pre {{{{ inventory_hostname }}}}",
                        "hostkit_post_batch": f"{hook} post {{{{ inventory_hostname }}}}",
                    },
                    "children": {"lab": {"hosts": {h: {"ansible_host": "127.0.0.1"} for h in HOSTS}}},
                }
            }
        )
    )
    fake = FakeFleet(monkeypatch)
    fake.inventory = str(inv)
    fake.dir = tmp_path
    fake.hook_calls = lambda: (
        (tmp_path / "calls.log").read_text().splitlines() if (tmp_path / "calls.log").exists() else []
    )
    return fake


def request(fleet, **kw) -> driver.RolloutRequest:
    return driver.RolloutRequest(
        inventory=fleet.inventory, batch="3", canary=1, max_unavailable=2, reboot=True, smoke_duration=2, **kw
    )


def waves(fleet) -> list[list[str]]:
    return fleet.ops("apply")


def test_batches_go_out_in_waves_each_gated_by_audit_and_smoke(fleet):
    res = driver.start(request(fleet))
    assert res.rc == 0 and res.state["status"] == "completed"
    assert [b["hosts"] for b in res.state["batches"]] == BATCHES
    assert waves(fleet) == WAVES
    # each wave: one apply run holding the "before" smoke, the apply, the audit and the smoke gate
    assert [op for op, hosts, _ in fleet.calls if hosts == ["n2", "n3"]] == ["apply"]
    assert not fleet.ops("audit") and not fleet.ops("smoke")
    assert {h: r["before"]["verdict"] for h, r in res.state["hosts"].items()} == dict.fromkeys(HOSTS, "INCONCLUSIVE")
    assert {h: r["audit"]["status"] for h, r in res.state["hosts"].items()} == dict.fromkeys(HOSTS, "pass")
    smoke_dir = rollout_state.run_dir(res.state["rollout_id"]) / "smoke"
    assert sorted(p.name for p in smoke_dir.iterdir()) == sorted(
        f"{ph}-{h}.json" for h in HOSTS for ph in ("before", "after")
    )
    assert fleet.in_force() == {h: [r["run_id"] for r in fleet.journal[h]] for h in HOSTS}
    assert all(len(runs) == 1 for runs in fleet.in_force().values())
    assert {h: (r["status"], r["after"]["verdict"]) for h, r in res.state["hosts"].items()} == dict.fromkeys(
        HOSTS, ("done", "INCONCLUSIVE")
    )  # INCONCLUSIVE does not stop a rollout
    assert fleet.hook_calls() == [
        "pre n1",
        "post n1",
        "pre n2",
        "pre n3",
        "post n2",
        "post n3",
        "pre n4",
        "post n4",
        "pre n5",
        "pre n6",
        "post n5",
        "post n6",
    ]


def test_a_host_missing_its_slo_stops_the_rollout_and_its_whole_batch_is_rolled_back(fleet):
    fleet.miss = {"n4"}
    res = driver.start(request(fleet))
    doc = res.state
    assert res.rc == 1
    f = doc["failure"]
    assert (f["batch"], f["host"], f["gate"]) == (1, "n4", "smoke")
    assert f["why"].startswith("MISSED: p999 2.5 ms") and "vs target 0.001 ms" in f["why"]
    assert {h: doc["hosts"][h]["status"] for h in HOSTS} == {
        "n1": "done",
        "n2": "rolled_back",
        "n3": "rolled_back",
        "n4": "rolled_back",
        "n5": "pending",
        "n6": "pending",
    }
    assert fleet.in_force() == {"n1": [doc["hosts"]["n1"]["apply"]["run_id"]], **{h: [] for h in HOSTS[1:]}}
    assert fleet.ops("rollback") == [["n4"], ["n2", "n3"]]  # n4's wave, then the wave that had passed
    # n4 back in service, then the passed wave taken out again (2 at a time) and rolled back; n5, n6 untouched
    assert fleet.hook_calls() == [
        "pre n1",
        "post n1",
        "pre n2",
        "pre n3",
        "post n2",
        "post n3",
        "pre n4",
        "post n4",
        "pre n2",
        "pre n3",
        "post n2",
        "post n3",
    ]
    report = (rollout_state.run_dir(doc["rollout_id"]) / "report.md").read_text()
    assert "**n4** failed the **smoke** gate: MISSED" in report


def test_within_max_failures_only_the_failed_host_is_rolled_back_and_the_rollout_goes_on(fleet):
    fleet.miss = {"n3"}
    res = driver.start(request(fleet, max_failures=1))
    assert res.state["status"] == "completed" and res.rc == 1  # completed, with a host not done
    assert {h: r["status"] for h, r in res.state["hosts"].items()} == {
        **dict.fromkeys(HOSTS, "done"),
        "n3": "rolled_back",
    }
    assert fleet.ops("rollback") == [["n3"]] and waves(fleet) == WAVES
    assert fleet.in_force()["n3"] == [] and all(len(fleet.in_force()[h]) == 1 for h in HOSTS if h != "n3")


def test_a_failing_pre_batch_hook_stops_the_rollout_before_any_change(fleet):
    (fleet.dir / "fail-pre-n2").touch()
    res = driver.start(driver.RolloutRequest(inventory=fleet.inventory, batch="3", max_unavailable=2, smoke_duration=2))
    assert res.rc == 1
    assert (res.state["failure"]["host"], res.state["failure"]["gate"]) == ("n2", "pre_hook")
    assert res.state["failure"]["why"].endswith("exit 3: cannot drain n2: node has unevictable pods")
    assert fleet.calls == [] and fleet.in_force() == {h: [] for h in HOSTS}  # nothing applied, nothing measured
    assert all(r["apply"] is None and r["before"] is None for r in res.state["hosts"].values())
    assert fleet.hook_calls() == ["pre n1", "pre n2", "post n1", "post n2"]  # drained nodes put back, nothing else


def test_a_rollout_killed_mid_apply_resumes_each_host_applied_once_in_order_then_aborts(fleet):
    fleet.kill_in_apply_of = "n3"
    with pytest.raises(Killed):
        driver.start(request(fleet))
    rid = next(rollout_state.runs_dir().glob("*/rollout.json")).parent.name
    s = rollout_state.load(rid)
    assert [b["status"] for b in s["batches"]] == ["done", "running", "pending"]
    assert {h: r["step"] for h, r in s["hosts"].items()} == {
        "n1": "done",
        "n2": "apply",
        "n3": "apply",
        "n4": "pending",
        "n5": "pending",
        "n6": "pending",
    }
    cut = s["batches"][1]["apply_runs"][0]
    assert fleet.in_force()["n2"] == [cut] and fleet.locks["n2"] == cut  # cut off with changes and its lock

    fleet.calls.clear()
    res = driver.resume(rid)
    assert res.rc == 0 and res.state["status"] == "completed"
    # first the cut-off run's lock released and the run rolled back; then the loop goes on from that wave
    assert fleet.calls[:2] == [("unlock", ["n2", "n3"], cut), ("rollback", ["n2", "n3"], cut)]
    assert waves(fleet) == WAVES[1:]
    assert all(len(runs) == 1 for runs in fleet.in_force().values())  # every host applied exactly once
    assert fleet.locks == dict.fromkeys(HOSTS)
    assert fleet.hook_calls() == [
        "pre n1",
        "post n1",
        "pre n2",
        "pre n3",  # killed in n2/n3's apply
        "pre n2",
        "pre n3",
        "post n2",
        "post n3",
        "pre n4",
        "post n4",
        "pre n5",
        "pre n6",
        "post n5",
        "post n6",
    ]
    with pytest.raises(BadInput, match="has finished: nothing to resume"):
        driver.resume(rid)

    fleet.calls.clear()
    aborted = driver.abort(rid)
    assert aborted.rc == 0 and aborted.state["status"] == "aborted" and aborted.state["abort"]["errors"] == []
    assert fleet.ops("rollback") == [["n5", "n6"], ["n4"], ["n2", "n3"], ["n1"]]  # newest batch and wave first
    assert fleet.in_force() == {h: [] for h in HOSTS}


def test_abort_of_a_rollout_killed_in_the_canary_s_apply_leaves_every_host_as_before(fleet):
    fleet.kill_in_apply_of = "n1"
    with pytest.raises(Killed):
        driver.start(request(fleet))
    rid = next(rollout_state.runs_dir().glob("*/rollout.json")).parent.name
    assert {h: r["step"] for h, r in rollout_state.load(rid)["hosts"].items() if r["step"] != "pending"} == {
        "n1": "apply"
    }
    cut = fleet.in_force()["n1"][0]
    fleet.calls.clear()
    res = driver.abort(rid)
    assert res.state["status"] == "aborted" and res.state["abort"]["errors"] == []
    assert fleet.calls == [("unlock", ["n1"], cut), ("rollback", ["n1"], cut)]
    assert fleet.in_force() == {h: [] for h in HOSTS} and fleet.locks == dict.fromkeys(HOSTS)
    assert fleet.hook_calls() == ["pre n1"]  # abort runs no hooks


def test_a_host_whose_audit_drifts_fails_the_audit_gate_and_gets_no_smoke_gate(fleet):
    fleet.drift = {"n1"}
    res = driver.start(request(fleet))
    f = res.state["failure"]
    assert res.rc == 1 and (f["batch"], f["host"], f["gate"]) == (0, "n1", "audit")
    assert f["why"] == ("drift: sysctl kernel.sched_rt_runtime_us drift: expected -1, found 950000 (/proc/sys)")
    n1 = res.state["hosts"]["n1"]
    assert (n1["status"], n1["audit"]["status"], n1["after"]) == ("rolled_back", "drift", None)
    assert n1["before"]["verdict"] == "INCONCLUSIVE"  # the "before" run is evidence, taken before the apply
    assert fleet.ops("rollback") == [["n1"]] and fleet.in_force()["n1"] == []


def test_the_drift_gate_stops_a_wave_whose_upgrade_hook_undid_tuning_before_any_change(fleet, monkeypatch):
    """--drift-gate: after each wave's pre-batch hooks (the operator's upgrade), hostkit drift
    against the hosts' baselines; n2's upgrade undid a planned value, so the rollout stops at its
    wave with the drift named, before any apply of that wave; the wave's hosts are put back."""
    with pytest.raises(BadInput, match="^n1: no baseline 'accepted'"):  # no baseline: nothing runs at all
        driver.start(request(fleet, drift_gate=True, drift_against="accepted"))
    assert fleet.calls == [] and fleet.hook_calls() == []

    from hostkit.drift import store
    from hostkit.drift import verdict as drift_verdict

    monkeypatch.setattr(store, "read", lambda host, name, hostname, now: {"name": name})
    undone = {
        "layer": "kernel",
        "key": "kernel.sched_rt_runtime_us",
        "before": 950000,
        "now": 500000,
        "plan": "undoing a planned value",
    }
    judged = []

    def drift(req):
        assert (req.against, req.smoke, req.smoke_duration) == ("accepted", True, 2)
        hosts = fleet._hosts(req.limit)
        judged.append(hosts)
        lat = {"verdict": "INCONCLUSIVE", "basis": "2,000 samples in a run, 10,000 needed for a p999: no verdict"}
        return SimpleNamespace(
            hosts={
                h: drift_verdict.verdict("accepted", [undone] if h == "n2" else [], [undone] if h == "n2" else [], lat)
                for h in hosts
            }
        )

    monkeypatch.setattr(api, "drift", drift)
    res = driver.start(request(fleet, drift_gate=True, drift_against="accepted"))
    assert res.rc == 1 and judged == [["n1"], ["n2", "n3"]]
    failure = res.state["failure"]
    assert (failure["host"], failure["gate"]) == ("n2", "drift")
    assert failure["why"] == (
        "state drifted against baseline accepted: kernel kernel.sched_rt_runtime_us: 950000 -> 500000 "
        "(undoing a planned value)"
    )
    assert waves(fleet) == [["n1"]]  # the canary applied; n2,n3's wave stopped before its apply
    assert {h: (r["status"], r["step"]) for h, r in res.state["hosts"].items() if h in ("n2", "n3")} == {
        "n2": ("failed", "drift"),
        "n3": ("pending", "post_hook"),  # put back in service, not applied: a resume takes it
    }
    assert res.state["hosts"]["n2"]["drift"]["verdict"] == "state drifted"
    assert fleet.hook_calls() == ["pre n1", "post n1", "pre n2", "pre n3", "post n2", "post n3"]
