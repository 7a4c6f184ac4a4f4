"""The bad-input corpus: every case a clear one-line error naming the input, exit 2 (3 for a guard),
and no byte changed on any lab host (hash and mode of every file of every sysroot)."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
import yaml

from tests.labutil import cli, cli_json, start_apply_and_wait_for_changes, sysroot, trees

pytestmark = pytest.mark.lab

# (id, host variables for host "p" or None, extra CLI args, expected exit, needle in the error)
OVERRIDE_CASES = [
    ("isolated-backwards", {"hostkit_overrides": {"isolated": "3-1"}}, [], 2, "'3-1'"),
    ("isolated-open-range", {"hostkit_overrides": {"isolated": "0-"}}, [], 2, "'0-'"),
    ("isolated-letters", {"hostkit_overrides": {"isolated": "a"}}, [], 2, "'a'"),
    ("isolated-not-online", {"hostkit_overrides": {"isolated": "160-200"}}, [], 2, "not online"),
    ("isolated-shell", {"hostkit_overrides": {"isolated": "0-3; rm -rf /"}}, [], 2, "rm -rf"),
    ("housekeeping-shell", {"hostkit_overrides": {"housekeeping": "$(reboot)"}}, [], 2, "$(reboot)"),
    ("irq-cpus-shell", {"hostkit_overrides": {"irq_cpus": "0`id`"}}, [], 2, "`id`"),
    ("everything-isolated", {"hostkit_overrides": {"isolated": "0-167"}}, [], 3, "CPU 0"),
    ("nothing-isolated", {"hostkit_overrides": {"housekeeping": "0-167"}}, [], 3, "nothing would be isolated"),
    ("node-without-housekeeping", {"hostkit_overrides": {"isolated": "1-83,84-167"}}, [], 3, "no housekeeping"),
    ("reserve-all-cores", {"hostkit_overrides": {"reserve_per_node": 60, "irq_cores": 30}}, [], 2,
     "leaves no isolated core"),
    ("reserve-zero", {"hostkit_overrides": {"reserve_per_node": 0}}, [], 2, "reserve_per_node"),
    ("rt-negative", {"hostkit_overrides": {"sysctl": {"kernel.sched_rt_runtime_us": -5}}}, [], 2,
     "kernel.sched_rt_runtime_us"),
    ("rt-absurd", {"hostkit_overrides": {"sysctl": {"kernel.sched_rt_runtime_us": 10**12}}}, [], 2,
     "kernel.sched_rt_runtime_us"),
    ("rt-string", {"hostkit_overrides": {"sysctl": {"kernel.sched_rt_runtime_us": "lots"}}}, [], 2,
     "must be an integer"),
    ("governor-unknown", {"hostkit_overrides": {"governor": "turbo"}}, [], 2, "governor"),
    ("unknown-override-key", {"hostkit_overrides": {"isolcpu": "8-63"}}, [], 2, "unknown key 'isolcpu'"),
    ("wrong-type-bool", {"hostkit_overrides": {"isolation": "yes"}}, [], 2, "isolation"),
    ("overrides-not-mapping", {"hostkit_overrides": ["isolated", "8-63"]}, [], 2, "must be a mapping"),
    ("kernel-arg-metachar", {"hostkit_overrides": {"cmdline_extra": ["quiet; reboot"]}}, [], 2, "quiet; reboot"),
    ("unknown-profile-var", {"hostkit_profile": "no-such-profile"}, [], 2, "no-such-profile"),
    ("missing-sysroot", {"hostkit_sysroot": "/nonexistent/sysroot"}, [], 2, "/nonexistent/sysroot"),
    ("sysroot-not-linux", {"hostkit_sysroot": "/etc"}, [], 2, "sys/devices/system/cpu"),
    ("unknown-profile-cli", None, ["--profile", "bare-metal-inferense"], 2, "bare-metal-inferense"),
    ("unknown-tag", None, ["--tags", "isolcpus,grub"], 2, "grub"),
    ("revert-without-verify", None, ["--revert-on-fail"], 2, "--verify-smoke"),
    ("limit-matches-nothing", None, ["--limit", "nobody"], 2, "nobody"),
    ("bad-forks-type", None, ["--forks", "many"], 2, "many"),
]

INVENTORY_CASES = [
    ("yaml-syntax", "all:\n  hosts: [unclosed\n", "not valid YAML"),
    ("not-a-mapping", "- just\n- a list\n", "must be a YAML mapping"),
    ("no-hosts", "all:\n  vars: {a: 1}\n", "has no hosts"),
]


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("p", "epyc-9634-nps1"), ("q", "kvm-small")], port=2371)


def _inventory(lab, tmp_path, host_vars):
    inv = yaml.safe_load(lab.inventory.read_text())
    if host_vars:
        inv["all"]["children"]["lab"]["hosts"]["p"].update(host_vars)
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inv))
    return path


def assert_one_line_error(proc, code, needle):
    assert proc.returncode == code, (proc.returncode, proc.stderr[-1500:])
    assert "Traceback" not in proc.stderr
    if code == 2:
        errors = [line for line in proc.stderr.splitlines() if line.startswith("hostkit: error:")]
        assert len(errors) == 1, proc.stderr[-1500:]
        assert needle in errors[0], errors[0]
    elif code == 3:
        assert needle in proc.stdout + proc.stderr


@pytest.mark.parametrize("case", OVERRIDE_CASES, ids=[c[0] for c in OVERRIDE_CASES])
def test_bad_input_changes_no_byte(lab, tmp_path, case):
    name, host_vars, extra, code, needle = case
    before = trees(lab)
    inv = _inventory(lab, tmp_path, host_vars)
    limit = [] if "--limit" in extra else ["--limit", "p"]
    proc = cli("apply", "-i", inv, *limit, *extra)
    assert_one_line_error(proc, code, needle)
    assert trees(lab) == before


@pytest.mark.parametrize("case", INVENTORY_CASES, ids=[c[0] for c in INVENTORY_CASES])
def test_malformed_inventory(lab, tmp_path, case):
    name, text, needle = case
    before = trees(lab)
    inv = tmp_path / "inv.yml"
    inv.write_text(text)
    for command in (["apply"], ["plan"], ["audit"], ["rollback"]):
        assert_one_line_error(cli(*command, "-i", inv), 2, needle)
    assert trees(lab) == before


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="a read-only bind mount needs root")
def test_read_only_sysroot_is_refused_before_anything(lab, tmp_path):
    root = sysroot(lab, "p")
    subprocess.run(["mount", "--bind", str(root), str(root)], check=True)
    subprocess.run(["mount", "-o", "remount,ro,bind", str(root)], check=True)
    try:
        before = trees(lab)
        assert_one_line_error(cli("apply", "-i", lab.inventory, "--limit", "p"), 2, "read-only")
        assert trees(lab) == before
    finally:
        subprocess.run(["umount", str(root)], check=True)


def test_sigint_during_apply_leaves_a_consistent_journal(lab):
    before = trees(lab)["p"]
    proc = start_apply_and_wait_for_changes(lab, "p")
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=180)
    assert proc.returncode != 0
    time.sleep(1)
    orphans = subprocess.run(["pgrep", "-f", f"ansible-playbook.*{lab.inventory}"], capture_output=True, text=True)
    assert orphans.stdout.strip() == "", "ansible-playbook outlived the interrupted apply"
    assert not (sysroot(lab, "p") / "var/lib/hostkit/lock").exists()  # released by the interrupted run
    rc, rb, p = cli_json("rollback", "-i", lab.inventory, "--limit", "p")
    assert rc == 0, p.stdout
    assert trees(lab)["p"] == before
