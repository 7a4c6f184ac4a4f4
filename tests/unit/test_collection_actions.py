"""The collection's action plugins' rules (hostkit.actions), below Ansible and SSH.

The agent runs for real on this machine through a local :class:`Remote` (``sh -c`` with the
command the plugin would send over its connection: tests/modules/runner.py's ``LocalRemote``)
against fixture sysroots; the smoke and rollback verdicts are driven with the agent's documents
through a scripted remote. What needs ``ansible-playbook`` and real SSH (batches, rescue, journals)
is tests/lab/test_collection.py's; hostkit_changes' action plugin is run by real ad hoc
Ansible on this machine here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hostkit import actions
from hostkit.ansible import agent_zipapp
from hostkit.ansible.apply import ROLES
from hostkit.errors import BadInput
from tests.modules.runner import LocalRemote

ROOT = Path(__file__).resolve().parents[2]


class ScriptedRemote:
    """A host whose agent prints ``doc`` (exit ``rc``); records every command."""

    def __init__(self, doc: dict | None, rc: int = 0, stderr: str = "") -> None:
        self.doc, self.rc, self.stderr, self.calls = doc, rc, stderr, []

    def run(self, command: str, stdin: bytes | None = None) -> tuple[int, str, str]:
        self.calls.append(command)
        return self.rc, json.dumps(self.doc) + "\n" if self.doc is not None else "", self.stderr


def test_every_modules_argument_spec_is_the_action_plugins():
    for name, spec in actions.ARG_SPECS.items():
        loaded = importlib.util.spec_from_file_location(f"hostkit_doc_{name}", ROOT / "library" / f"{name}.py")
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
        assert module.ARGUMENT_SPEC == spec, name
        assert (ROOT / "action_plugins" / f"{name}.py").is_file()


def test_the_apply_roles_are_every_tuning_role_once_and_apply_yml_runs_them_through_tune():
    # One list (the tune role's hostkit_apply_roles, ROLES): every role directory but the tune role
    # itself, the smoke role and the drift timer (steps of their own, not apply roles), each once.
    dirs = {d.name for d in (ROOT / "roles").iterdir() if (d / "tasks" / "main.yml").is_file()}
    assert sorted(ROLES) == sorted(dirs - {"tune", "smoke", "drift_timer"}) and len(set(ROLES)) == len(ROLES)
    assert ROLES.index("tuned") < ROLES.index("isolcpus")  # tuned's boot files before isolcpus checks them
    # apply.yml has no role list of its own: its apply is the tune role's step
    play = yaml.safe_load((ROOT / "playbooks" / "apply.yml").read_text())[0]
    assert "roles" not in play
    assert {"name": "hostkit.tuning.tune", "tasks_from": "apply"} in [
        t.get("ansible.builtin.import_role") for t in play["tasks"]
    ]


def test_facts_run_the_cached_agent_and_send_it_once(sysroots, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # a non-root user's cache would be here; root's is shared
    remote = LocalRemote()
    first = actions.facts(remote, sysroot=str(sysroots["kvm-small"]))
    again = actions.facts(remote, sysroot=str(sysroots["kvm-small"]))
    assert first == again and first["ansible_facts"]["hostkit_facts"]["topology"]
    sent = [with_stdin for _, with_stdin in remote.calls]
    assert sent.count(True) <= 1 and sent[-1] is False  # the second call found it in the cache
    assert remote.calls[0][0].startswith(agent_zipapp.agent_command(actions.agent_artifact()))


def test_a_bad_sysroot_is_the_hosts_bad_input(tmp_path):
    with pytest.raises(BadInput, match="sysroot"):  # the agent's exit 2
        actions.facts(LocalRemote(), sysroot=str(tmp_path / "nowhere"))


def _facts(sysroots, fixture: str) -> dict:
    return actions.facts(LocalRemote(), sysroot=str(sysroots[fixture]))["ansible_facts"]["hostkit_facts"]


def test_plan_is_the_clis_plan_and_refusals_fail_with_one_line(sysroots):
    from hostkit.plan import make_plan
    from hostkit.profiles import for_host

    epyc = _facts(sysroots, "epyc-9634-nps1")
    out = actions.plan(actions.PlanArgs(host="n1", facts=epyc, hostvars={}, reboot=True, smoke_gate=True))
    assert out["plan"] == make_plan(epyc, *for_host("n1", {}), host="n1") and out["reboot_needed"] is True
    with pytest.raises(
        actions.PlanRefused,
        match=r"^refused: a smoke gate would measure the running kernel, "
        r"booted without isolcpus=.*: reboot into them first \(--reboot, hostkit_reboot\)$",
    ) as exc:
        actions.plan(actions.PlanArgs(host="n1", facts=epyc, hostvars={}, smoke_gate=True))
    assert len(exc.value.reasons) == 1 and exc.value.exit_code == 3
    with pytest.raises(actions.PlanRefused, match="^refused: isolation asked on a host with deceptive topology"):
        actions.plan(
            actions.PlanArgs(
                host="g", facts=_facts(sysroots, "vmware-88vcpu"), hostvars={}, profile="bare-metal-inference"
            )
        )


def test_after_a_bmc_power_cycle_the_booted_os_must_show_the_topology_the_bios_says(sysroots):
    """The tune role's plan step after hostkit.tuning.bios cycled the host (bios_after): an OS with
    the topology the BIOS says is planned; one with another fails the host, a cross-layer mismatch."""
    from hostkit.bmc.client import BmcError

    epyc = _facts(sysroots, "epyc-9634-nps1")  # 2 sockets, 1 NUMA node per socket
    assert (epyc["topology"]["numa_per_socket"], epyc["topology"]["threads_per_core"]) == (1, 1)
    said = {"sockets": 2, "numa_per_socket": 1, "numa_nodes": 2, "threads_per_core": 1}
    assert actions.plan(actions.PlanArgs(host="n1", facts=epyc, hostvars={}, reboot=True, bios_after=said))["plan"]
    with pytest.raises(
        BmcError,
        match=r"^n1: after the power cycle: cross-layer mismatch: the BIOS says 4 NUMA node\(s\) per socket, "
        r"the booted OS shows 1$",
    ):
        actions.plan(
            actions.PlanArgs(host="n1", facts=epyc, hostvars={}, reboot=True, bios_after={**said, "numa_per_socket": 4})
        )


def test_a_read_only_sysroot_is_bad_input_unless_the_plan_is_only_checked(sysroots):
    facts = dict(_facts(sysroots, "kvm-small"), sysroot_writable=False)
    with pytest.raises(BadInput, match="^n1: sysroot .* is read-only: nothing can be applied there$"):
        actions.plan(actions.PlanArgs(host="n1", facts=facts, hostvars={}, profile="vmware-guest"))
    assert actions.plan(actions.PlanArgs(host="n1", facts=facts, hostvars={}, profile="vmware-guest", writable=False))[
        "plan"
    ]


def test_dispatch_turns_hostkits_errors_into_a_failed_host_marked_for_hostkit_apply(sysroots):
    """A failed host with the one line; hostkit apply tells a host's bad input (exit 2, every host
    stopped) from its plan's refusals (exit 3, that host alone) by the marks on the result; --check
    plans a read-only sysroot."""
    from types import SimpleNamespace

    def run(facts, check=False, **args):
        action = SimpleNamespace(_task=SimpleNamespace(check_mode=check), _connection=None)
        return actions.dispatch(
            "plan",
            action,
            {
                "facts": facts,
                "profile": None,
                "overrides": None,
                "force": False,
                "smoke_gate": False,
                "reboot": False,
                **args,
            },
            {"inventory_hostname": "n1"},
        )

    out = run(None)
    assert out == {"failed": True, "changed": False, "bad_input": True, "msg": out["msg"]}
    assert "hostkit.tuning.facts" in out["msg"]
    read_only = dict(_facts(sysroots, "kvm-small"), sysroot_writable=False)
    assert run(read_only, profile="vmware-guest") == {
        "failed": True,
        "changed": False,
        "bad_input": True,
        "msg": f"n1: sysroot {read_only['sysroot']} is read-only: nothing can be applied there",
    }
    assert "plan" in run(read_only, check=True, profile="vmware-guest")
    refused = run(_facts(sysroots, "vmware-88vcpu"), profile="bare-metal-inference")
    assert refused["failed"] and refused["refusals"] and refused["msg"].startswith("refused: ")
    assert "bad_input" not in refused


@pytest.mark.parametrize(
    "hostvars, why",
    [
        ({"hostkit_profile": "nope"}, "unknown profile 'nope'"),
        ({"hostkit_overrides": {"isolation": "sometimes"}}, "n1: n1: hostkit_overrides"),
        ({"hostkit_overrides": ["isolation"]}, "must be a mapping"),
    ],
)
def test_bad_profiles_and_overrides_are_bad_input(sysroots, hostvars, why):
    with pytest.raises(BadInput, match=why):
        actions.plan(actions.PlanArgs(host="n1", facts=_facts(sysroots, "kvm-small"), hostvars=hostvars))


def test_plan_without_facts_says_which_module_gives_them():
    with pytest.raises(BadInput, match="hostkit.tuning.facts"):
        actions.plan(actions.PlanArgs(host="n1", facts=None, hostvars={}))


def _smoke_doc(verdict: str) -> dict:
    return {
        "samples": 3000,
        "diagnosis": [],
        "slo": {"verdict": verdict, "passed": verdict == "PASSED", "p999_ms": 0.5, "target_p999_ms": 1.0, "basis": "b"},
    }


@pytest.mark.parametrize("verdict, fails", [("PASSED", False), ("INCONCLUSIVE", False), ("MISSED", True)])
def test_the_smoke_gate_fails_on_missed_never_on_inconclusive(verdict, fails):
    remote = ScriptedRemote(_smoke_doc(verdict), rc=0 if verdict == "PASSED" else 1)
    out = actions.smoke(remote, host="n1", hostvars={}, options={"duration": "2"})
    assert out["verdict"] == verdict and bool(out.get("failed")) is fails and out["msg"].startswith(verdict)
    assert "--duration 2.0" in remote.calls[0]
    assert not actions.smoke(remote, host="n1", hostvars={}, options={}, gate=False).get("failed")


def test_a_smoke_run_that_gives_no_report_fails_the_gate():
    out = actions.smoke(ScriptedRemote(None, rc=255, stderr="Connection reset"), host="n1", hostvars={}, options={})
    assert out["failed"] and out["verdict"] == "FAILED" and "Connection reset" in out["msg"]


def test_smoke_settings_not_given_are_the_profiles_and_bad_options_reach_no_host():
    remote = ScriptedRemote(_smoke_doc("PASSED"))
    actions.smoke(remote, host="g", hostvars={"hostkit_profile": "vmware-guest"}, options={"target_p999_ms": None})
    from hostkit.profiles import load_profile

    target = load_profile("vmware-guest")["smoke"]["target_p999_ms"]
    assert f"--target-p999-ms {float(target)!r}" in remote.calls[0] or target == 1.0
    for bad in ({"duration": "soon"}, {"transport": "tcp"}, {"no_such": 1}, {"duration": 2, "requests": 5}):
        quiet = ScriptedRemote(_smoke_doc("PASSED"))
        with pytest.raises(BadInput):
            actions.smoke(quiet, host="n1", hostvars={}, options=bad)
        assert quiet.calls == []


def test_rollback_fails_unless_every_path_is_restored():
    ok = {
        "changed": True,
        "runs": ["r1"],
        "errors": [],
        "reboot_required": True,
        "verify": {"ok": True, "mismatches": []},
    }
    out = actions.rollback(ScriptedRemote(ok), run_id="r1")
    assert not out.get("failed") and out["reboot_required"] and "r1 rolled back" in out["msg"]
    off = dict(ok, verify={"ok": False, "mismatches": [{"path": "/etc/x", "expected": "a", "got": "b"}]})
    out = actions.rollback(ScriptedRemote(off, rc=1), run_id="r1")
    assert out["failed"] and "/etc/x" in out["msg"]
    with pytest.raises(BadInput):
        actions.rollback(ScriptedRemote(ok), run_id="r1; reboot")


def test_audit_runs_the_clis_checks_through_the_remote(sysroots, sysroot_copy):
    root = sysroot_copy("kvm-small")
    out = actions.audit(LocalRemote(), host="g", hostvars={"hostkit_profile": "vmware-guest"}, sysroot=str(root))
    assert out["status"] in ("pass", "drift") and out["audit"]["findings"]
    assert bool(out.get("failed")) is (out["status"] == "drift")


def test_ansibles_check_mode_is_the_rollbacks_check(monkeypatch):
    seen = {}
    monkeypatch.setattr(actions, "rollback", lambda remote, **kw: seen.update(kw) or {"changed": False})

    class Task:
        check_mode = True

    class Action:
        _connection = None
        _task = Task()

    actions.dispatch("rollback", Action(), {"run_id": "r1", "check": False, "sysroot": ""}, {"inventory_hostname": "h"})
    assert seen["check"] is True and seen["run_id"] == "r1"


def _ansible_changes(tmp_path: Path, tree: Path, changes: list, *, hostkit_on_controller: bool, check: bool) -> dict:
    """``hostkit.tuning.hostkit_changes`` run by Ansible (ad hoc, on this machine, the checkout's
    ansible.cfg) against the sysroot ``tree``; the task's result. Without hostkit on the controller:
    a ``hostkit`` package that fails to import comes first on the controller's path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_NOCOLOR="1")
    if not hostkit_on_controller:
        shadow = tmp_path / "no-hostkit"
        (shadow / "hostkit").mkdir(parents=True, exist_ok=True)
        (shadow / "hostkit" / "__init__.py").write_text("raise ImportError('no hostkit on this controller')\n")
        env["PYTHONPATH"] = str(shadow)
    args = json.dumps({"sysroot": str(tree), "run_id": "r1", "role": "numa_sysctl", "changes": changes})
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible"),
            "localhost",
            "-c",
            "local",
            "-i",
            "localhost,",
            "-e",
            "ansible_python_interpreter=/usr/bin/python3",
            "-m",
            "hostkit.tuning.hostkit_changes",
            "-a",
            args,
            "-vvv",
            *(["--check"] if check else []),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # ad hoc's output ends with "localhost | CHANGED => {...}" (a failure has Ansible's error first)
    _before, sep, last = proc.stdout.rpartition("localhost | ")
    assert sep and " => " in last, (proc.stdout[-2000:], proc.stderr[-2000:])
    status, result = last.split(" => ", 1)
    # which way it ran on the host, from -vvv's EXEC lines (none for input refused on the controller)
    route = {"module" for x in proc.stdout.splitlines() if "EXEC" in x and "AnsiballZ_hostkit_changes" in x}
    route |= {"agent" for x in proc.stdout.splitlines() if "EXEC" in x and "hostkit-agent" in x}
    return dict(json.loads(result), status=status.strip(), route=route)  # status: SUCCESS, CHANGED or FAILED!


def test_hostkit_changes_makes_the_same_changes_as_the_module_and_through_the_agent(tmp_path):
    """The action plugin of hostkit_changes: without hostkit on the controller, Ansible's module
    (the payload compiled on the host); with it, the agent; the same result and the same files. Bad
    input fails on the controller and reaches no host."""
    changes = [
        {
            "name": "conf",
            "file": {"path": "/etc/sysctl.d/61-hostkit-numa.conf", "content": "kernel.numa_balancing = 0\n"},
        },
        {"values": {"items": [{"path": "/proc/sys/kernel/numa_balancing", "value": 0, "kind": "int"}]}},
        {"run": {"argv": ["sysctl", "--system"], "if_changed": ["conf"]}},
    ]
    seen = {}
    for on_controller in (False, True):
        tree = tmp_path / f"tree-{on_controller}"
        (tree / "proc/sys/kernel").mkdir(parents=True)
        (tree / "proc/sys/kernel/numa_balancing").write_text("1\n")
        (tree / "etc").mkdir()
        checked = _ansible_changes(tmp_path, tree, changes, hostkit_on_controller=on_controller, check=True)
        assert checked["status"] == "CHANGED" and not (tree / "etc/sysctl.d").exists(), checked
        done = _ansible_changes(tmp_path, tree, changes, hostkit_on_controller=on_controller, check=False)
        again = _ansible_changes(tmp_path, tree, changes, hostkit_on_controller=on_controller, check=False)
        assert (done["status"], again["status"]) == ("CHANGED", "SUCCESS"), (done, again)
        assert checked["route"] == done["route"] == {"agent" if on_controller else "module"}
        assert (tree / "proc/sys/kernel/numa_balancing").read_text() == "0\n"
        assert (tree / "var/lib/hostkit/journal/r1.json").is_file()
        seen[on_controller] = [{k: v for k, v in r.items() if k != "full_path"} for r in done["results"]]
        bad = _ansible_changes(
            tmp_path, tree, [{"file": {"content": "no path"}}], hostkit_on_controller=on_controller, check=False
        )
        assert bad["status"] == "FAILED!" and "change 1 (file)" in bad["msg"] and "nothing changed" in bad["msg"], bad
        assert bad["route"] == (set() if on_controller else {"module"})  # with hostkit: refused before the host
    assert seen[False] == seen[True]
    assert [r["kind"] for r in seen[True]] == ["file", "values", "run"] and seen[True][2]["would_run"]
