"""One host's apply outcome from its task results (hostkit/ansible/apply.py ``_host_result``), against
task results shaped as ansible-runner's events give them: no Ansible run."""

from __future__ import annotations

from hostkit.ansible.apply import _host_result
from hostkit.ansible.run import HostResult, RunResult, TaskResult


def outcome(*tasks: TaskResult, status: str = "ok"):
    host = HostResult("h", status=status, changed=sum(t.changed for t in tasks), tasks=list(tasks))
    return _host_result("h", RunResult("r", "successful", 0, {}, {"h": host}, "/nonexistent", 1.0))


def test_a_role_with_nothing_to_do_says_why_in_the_report():
    out = outcome(
        TaskResult(
            "Report kubelet not applicable",
            "ok",
            False,
            {"msg": "kubelet: not applicable (not installed)"},
            role="kubelet",
        ),
        TaskResult(
            "Report containerd not applicable",
            "ok",
            False,
            {"msg": "containerd: not applicable (containerd is not installed)"},
            role="containerd",
        ),
        TaskResult("Write sysctls", "ok", True, {"changed": True}, role="numa_sysctl"),
    )
    assert out.status == "changed" and out.changed == 1
    assert out.roles["kubelet"] == {"changed": 0, "failed": False, "tasks": 1, "not_applicable": ["not installed"]}
    assert out.roles["containerd"]["not_applicable"] == ["containerd is not installed"]
    assert "not_applicable" not in out.roles["numa_sysctl"]


def test_another_role_s_message_or_a_failed_task_is_not_taken_for_not_applicable():
    out = outcome(
        TaskResult("Some debug", "ok", False, {"msg": "kubelet: not applicable (not installed)"}, role="containerd"),
        TaskResult("Write", "failed", False, {"msg": "numa_sysctl: not applicable (x)"}, role="numa_sysctl"),
        status="failed",
    )
    assert "not_applicable" not in out.roles["containerd"]
    assert out.roles["numa_sysctl"] == {"changed": 0, "failed": True, "tasks": 1}
    assert out.status == "failed"


# The tune role's gates in an apply run (hostkit rollout's wave): the "before" smoke, the apply's
# tasks, the audit, the smoke gate, told apart by their module.
SMOKE, AUDIT = "hostkit.tuning.smoke", "hostkit.tuning.audit"
BEFORE = TaskResult(
    "Smoke test before the change (evidence, not a gate)",
    "ok",
    False,
    {"verdict": "PASSED", "why": "PASSED: ...", "smoke": {"slo": {}}},
    role="tune",
    action=SMOKE,
)
APPLIED = TaskResult(
    "Apply numa_sysctl", "ok", True, {"changed": True}, role="numa_sysctl", action="hostkit.tuning.hostkit_changes"
)


def test_gates_that_pass_are_kept_by_phase_and_leave_the_apply_s_status():
    out = outcome(
        BEFORE,
        APPLIED,
        TaskResult(
            "Audit the host against its plan", "ok", False, {"status": "pass", "audit": {}}, role="tune", action=AUDIT
        ),
        TaskResult("Smoke gate", "ok", False, {"verdict": "INCONCLUSIVE", "smoke": {}}, role="tune", action=SMOKE),
    )
    assert (out.status, out.changed, out.failed_gate) == ("changed", 1, None)
    assert out.smoke["before"]["verdict"] == "PASSED" and out.smoke["after"]["verdict"] == "INCONCLUSIVE"
    assert out.audit["status"] == "pass" and "tune" not in out.roles  # the gates are not a role's tasks


def test_a_failed_gate_is_named_and_the_apply_keeps_its_status():
    drift = TaskResult(
        "Audit the host against its plan",
        "failed",
        False,
        {"failed": True, "status": "drift", "msg": "audit drift: ..."},
        role="tune",
        action=AUDIT,
    )
    out = outcome(BEFORE, APPLIED, drift, status="failed")
    assert (out.status, out.failed_gate, out.audit["status"]) == ("changed", "audit", "drift")
    assert "after" not in out.smoke  # a host failed by its audit gets no smoke gate
    lost = TaskResult("Smoke gate", "unreachable", False, {"msg": "Failed to connect"}, role="tune", action=SMOKE)
    out = outcome(
        BEFORE, APPLIED, TaskResult("Audit", "ok", False, {"status": "pass"}, action=AUDIT), lost, status="unreachable"
    )
    assert (out.status, out.failed_gate) == ("changed", "smoke")
    assert out.smoke["after"] == {"msg": "Failed to connect", "failed": True}


def test_a_host_lost_in_the_before_smoke_failed_before_its_apply_not_a_gate():
    lost = TaskResult(
        "Smoke test before the change (evidence, not a gate)",
        "unreachable",
        False,
        {"msg": "Failed to connect"},
        role="tune",
        action=SMOKE,
    )
    out = outcome(lost, status="unreachable")
    assert (out.status, out.failed_gate, out.smoke["before"]["failed"]) == ("unreachable", None, True)
    skipped = TaskResult("Smoke gate", "skipped", False, {"skip_reason": "Conditional result was False"}, action=SMOKE)
    assert outcome(APPLIED, skipped).smoke == {}


def test_the_bios_step_is_reported_as_the_host_s_bios_not_as_its_plan():
    """hostkit.tuning.bios's result carries a plan too: it is the host's BIOS step (PATCH, power
    cycle), not the OS plan's refusals; a host without a BMC skips it and has no bios."""
    bios = {
        "changed": True,
        "plan": {"steps": [{"attribute": "NumaMemoryDomainsPerSocket", "state": "change"}], "refused": []},
        "pending": {"NumaMemoryDomainsPerSocket": "TwoMemoryDomainsPerSocket"},
        "cycles": 1,
        "steps": [{"step": "graceful shutdown", "seconds": 9.1, "ok": True}],
    }
    out = outcome(
        TaskResult("BIOS settings through the BMC", "ok", True, bios, role="tune", action="hostkit.tuning.bios"),
        TaskResult("Plan the host", "ok", False, {"plan": {"refused_parts": ["x"]}}, role="tune"),
    )
    assert out.bios == {k: bios[k] for k in ("plan", "pending", "cycles", "steps")}
    assert out.to_dict()["bios"]["cycles"] == 1 and out.refused_parts == ["x"] and out.status == "changed"
    skipped = outcome(TaskResult("BIOS", "skipped", False, {}, role="tune", action="hostkit.tuning.bios"))
    assert skipped.bios is None and "bios" not in skipped.to_dict()
