"""Bad input only a host can reveal, end to end through the lab: a value that is wrong for the topology
the host's facts show, a host sysroot that is missing, not Linux or read-only. Each case a clear one-line
error naming the input, exit 2 (3 for a guard), and no byte changed (hash and mode of every file).

Everything the controller decides before contacting a host (cpulist syntax, profile and override
validation, unknown tags and keys, wrong types, shell metacharacters, malformed inventories) is in
test_bad_input_unit.py, without sshd.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from tests.conftest import lab_port
from tests.labutil import cli, cli_json, inventory_with, start_apply_and_wait_for_changes, sysroot, trees

# (id, host variables for host "p" (an EPYC 9634: CPUs 0-167, one NUMA node per 84 cores), expected exit,
# needle in the error). Exit 2: the plan cannot be made for these facts; exit 3: a guard refuses it.
HOST_CASES = [
    ("isolated-not-online", {"hostkit_overrides": {"isolated": "160-200"}}, 2, "not online"),
    (
        "reserve-all-cores",
        {"hostkit_overrides": {"reserve_per_node": 60, "irq_cores": 30}},
        2,
        "leaves no isolated core",
    ),
    ("everything-isolated", {"hostkit_overrides": {"isolated": "0-167"}}, 3, "CPU 0"),
    ("nothing-isolated", {"hostkit_overrides": {"housekeeping": "0-167"}}, 3, "nothing would be isolated"),
    ("node-without-housekeeping", {"hostkit_overrides": {"isolated": "1-83,84-167"}}, 3, "no housekeeping"),
    ("missing-sysroot", {"hostkit_sysroot": "/nonexistent/sysroot"}, 2, "/nonexistent/sysroot"),
    ("sysroot-not-linux", {"hostkit_sysroot": "/etc"}, 2, "sys/devices/system/cpu"),
]


@pytest.fixture(scope="module")
def lab(make_lab):
    # Every test leaves p as it found it: any test runs alone or in any order.
    return make_lab([("p", "epyc-9634-nps1"), ("q", "epyc-9634-nps1")], lab_port(7))


def assert_one_line_error(proc, code, needle):
    assert proc.returncode == code, (proc.returncode, proc.stderr[-1500:])
    assert "Traceback" not in proc.stderr
    if code == 2:
        errors = [line for line in proc.stderr.splitlines() if line.startswith("hostkit: error:")]
        assert len(errors) == 1, proc.stderr[-1500:]
        assert needle in errors[0], errors[0]
    else:  # a guard's refusal is a host status in the report, not an error line
        assert needle in proc.stdout, proc.stdout[-1500:]


@pytest.mark.parametrize("case", HOST_CASES, ids=[c[0] for c in HOST_CASES])
def test_bad_input_found_in_the_hosts_facts_changes_no_byte(lab, tmp_path, case):
    name, host_vars, code, needle = case
    before = trees(lab)
    inv = inventory_with(lab, tmp_path / "inventory.yml", {"p": host_vars})
    assert_one_line_error(cli("apply", "-i", inv, "--limit", "p"), code, needle)
    assert trees(lab) == before


def test_bad_input_on_one_host_changes_no_host(lab, tmp_path):
    """Facts and plans come in apply's one run (playbooks/apply.yml): every host is planned before any
    is locked, and one host's bad input stops them all (exit 2, no byte changed on either)."""
    before = trees(lab)
    inv = inventory_with(lab, tmp_path / "inventory.yml", {"p": {"hostkit_overrides": {"isolated": "160-200"}}})
    assert_one_line_error(cli("apply", "-i", inv), 2, "not online")
    assert trees(lab) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount needs root")
def test_read_only_sysroot_is_refused_before_anything(lab):
    root = sysroot(lab, "p")
    subprocess.run(["mount", "--bind", str(root), str(root)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(root)], check=True)
        before = trees(lab)
        assert_one_line_error(cli("apply", "-i", lab.inventory, "--limit", "p"), 2, "read-only")
        assert trees(lab) == before
    finally:
        subprocess.run(["umount", str(root)], check=True)


def test_sigint_during_apply_leaves_a_consistent_journal(lab):
    before = trees(lab)["p"]
    proc = start_apply_and_wait_for_changes(lab, "p")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=180)
    # The signal lands while ansible-runner runs the playbook (changes are being journaled): the
    # run is canceled, and the host is reported failed, not a crash of hostkit (exit 130).
    assert proc.returncode == 1, err[-2000:]
    host = json.loads(out)["hosts"]["p"]
    assert (host["status"], host["msg"]) == ("failed", "run canceled before this host finished")
    # At once: hostkit stops the workers ansible-core put in sessions of their own before it exits.
    orphans = subprocess.run(["pgrep", "-f", f"ansible-playbook.*{lab.inventory}"], capture_output=True, text=True)
    assert orphans.stdout.strip() == "", "ansible-playbook outlived the interrupted apply"
    assert not (sysroot(lab, "p") / "var/lib/hostkit/lock").exists()  # released by the interrupted run
    rc, rb, p = cli_json("rollback", "-i", lab.inventory, "--limit", "p")
    assert rc == 0, p.stdout
    assert trees(lab)["p"] == before
