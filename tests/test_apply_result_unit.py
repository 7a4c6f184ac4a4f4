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
        TaskResult("Report kubelet not applicable", "ok", False,
                   {"msg": "kubelet: not applicable (not installed)"}, role="kubelet"),
        TaskResult("Report containerd not applicable", "ok", False,
                   {"msg": "containerd: not applicable (containerd is not installed)"}, role="containerd"),
        TaskResult("Write sysctls", "ok", True, {"changed": True}, role="numa_sysctl"))
    assert out.status == "changed" and out.changed == 1
    assert out.roles["kubelet"] == {"changed": 0, "failed": False, "tasks": 1, "not_applicable": ["not installed"]}
    assert out.roles["containerd"]["not_applicable"] == ["containerd is not installed"]
    assert "not_applicable" not in out.roles["numa_sysctl"]


def test_another_role_s_message_or_a_failed_task_is_not_taken_for_not_applicable():
    out = outcome(
        TaskResult("Some debug", "ok", False, {"msg": "kubelet: not applicable (not installed)"}, role="containerd"),
        TaskResult("Write", "failed", False, {"msg": "numa_sysctl: not applicable (x)"}, role="numa_sysctl"),
        status="failed")
    assert "not_applicable" not in out.roles["containerd"]
    assert out.roles["numa_sysctl"] == {"changed": 0, "failed": True, "tasks": 1}
    assert out.status == "failed"
