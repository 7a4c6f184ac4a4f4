"""Hardening on the lab: concurrent applies, stale locks, a full journal disk, impostor host keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from hostkit.ansible.apply import ROLES
from tests.conftest import lab_port
from tests.labutil import cli_json, sysroot, trees


@pytest.fixture(scope="module")
def lab(make_lab):
    # Every test leaves x and y as it found them (rolled back, unlocked): no order matters.
    return make_lab([("x", "epyc-9634-nps1"), ("y", "kvm-small")], lab_port(6))


@pytest.fixture
def rolled_back(lab):
    """``rolled_back("x", ...)`` before a test applies: after the test, pass or fail, those hosts are
    rolled back and must be byte for byte as they were (so no other test sees this one's changes)."""
    before = {}

    def watch(*hosts):
        now = trees(lab)
        before.update({h: now[h] for h in hosts})

    yield watch
    if before:
        rc, _, proc = cli_json("rollback", "-i", lab.inventory, "--limit", ",".join(before))
        assert rc == 0, proc.stdout[-2000:]
        assert {h: t for h, t in trees(lab).items() if h in before} == before


def test_second_concurrent_apply_is_refused_naming_the_holder(lab, rolled_back):
    rolled_back("x")
    cmd = [sys.executable, "-m", "hostkit.cli", "apply", "-i", str(lab.inventory), "--limit", "x", "--json"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = sysroot(lab, "x") / "var/lib/hostkit/lock"
    deadline = time.monotonic() + 120
    while not lock.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not lock.exists():
        first.kill()
        pytest.fail(f"the first apply never took the lock: {first.communicate()[1][-2000:]}")
    holder = json.loads(lock.read_text())["run_id"]
    rc2, second, _ = cli_json("apply", "-i", lab.inventory, "--limit", "x")
    out, _ = first.communicate(timeout=300)
    assert first.returncode == 0 and json.loads(out)["hosts"]["x"]["status"] == "changed"
    assert rc2 == 1
    host = second["hosts"]["x"]
    assert host["status"] == "failed" and host["changed"] == 0 and holder in host["msg"]
    assert not lock.exists()  # released by its run


def test_stale_lock_is_detected_and_cleared_explicitly(lab):
    before = trees(lab)["x"]
    lock = sysroot(lab, "x") / "var/lib/hostkit/lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    lock.write_text(
        json.dumps({"run_id": "20200101T000000Z-dead00", "controller": f"{os.uname().nodename}:{dead}", "time": 0})
    )
    try:
        rc, doc, _ = cli_json("apply", "-i", lab.inventory, "--limit", "x")
        assert rc == 1 and "stale: run 20200101T000000Z-dead00 died" in doc["hosts"]["x"]["msg"]
        assert trees(lab)["x"] == before
        rc, unl, _ = cli_json("unlock", "-i", lab.inventory, "--limit", "x")
        assert rc == 0 and unl["hosts"] == {"x": {"status": "ok", "released": True}}
        assert not lock.exists()
    finally:  # whatever failed above, the next test finds x unlocked
        lock.unlink(missing_ok=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tiny tmpfs needs root")
def test_full_journal_disk_is_refused_before_any_change(lab):
    state = sysroot(lab, "x") / "var/lib/hostkit"
    state.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "hostkit-test-full", str(state)], check=True)
    try:
        before = trees(lab)["x"]
        rc, doc, _ = cli_json("apply", "-i", lab.inventory, "--limit", "x")
        assert rc == 1 and "free for the journal" in doc["hosts"]["x"]["msg"]
        assert trees(lab)["x"] == before
    finally:
        subprocess.run(["umount", str(state)], check=True)


@pytest.fixture
def impostor_inventory(lab, tmp_path):
    """The lab inventory with y's known host key replaced by another key: y's real sshd is an impostor."""
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    key = (tmp_path / "other.pub").read_text().split()
    y = next(h for h in lab.hosts() if h.name == "y")
    impostor = tmp_path / "known_hosts"
    impostor.write_text(
        lab.known_hosts.read_text().replace(
            next(line for line in lab.known_hosts.read_text().splitlines() if line.startswith(f"[{y.address}]")),
            f"[{y.address}]:{y.port} {key[0]} {key[1]}",
        )
    )
    inv = tmp_path / "inv.yml"
    inv.write_text(lab.inventory.read_text().replace(str(lab.known_hosts), str(impostor)))
    return inv


@pytest.mark.parametrize(
    "command,message",
    [
        (["apply", "--profile", "vmware-guest"], "msg"),
        (["audit"], "error"),
        (["smoke", "--duration", "1"], "error"),
    ],
    ids=["apply", "audit", "smoke"],
)
def test_impostor_host_key_is_refused(lab, impostor_inventory, command, message):
    before = trees(lab)["y"]
    rc, doc, _ = cli_json(command[0], "-i", impostor_inventory, "--limit", "y", *command[1:])
    assert rc == 1
    y = doc["hosts"]["y"]
    assert y["status"] == "unreachable"
    assert "host key CHANGED" in y[message] and "refusing to connect" in y[message], y[message]
    assert trees(lab)["y"] == before


def test_a_role_failing_mid_fleet_leaves_its_host_unbooted_the_others_done_and_a_consistent_journal(
    lab, tmp_path, rolled_back
):
    rolled_back("x", "y")  # the consistent journal: both roll back to the byte
    inv = tmp_path / "inv.yml"
    inv.write_text(
        lab.inventory.read_text().replace(
            "hostkit_fixture: epyc-9634-nps1",
            "hostkit_fixture: epyc-9634-nps1\n          containerd_extra_toml: 'broken = ['",
        )
    )
    booted = {h: (sysroot(lab, h) / "proc/cmdline").read_text() for h in ("x", "y")}
    # y is a small KVM guest: forced, so both run every role. --reboot: the reboot comes after the
    # last role (the lab's simulated one too: the sysroot's proc/cmdline rewritten as a boot would).
    rc, doc, proc = cli_json("apply", "-i", inv, "--force", "--reboot")
    assert rc == 1, proc.stderr[-2000:]
    x, y = doc["hosts"]["x"], doc["hosts"]["y"]
    assert x["status"] == "failed"
    # x wrote its kernel arguments for the next boot, then failed: it was not rebooted into them.
    assert x["reboot_required"] and (sysroot(lab, "x") / "proc/cmdline").read_text() == booted["x"], x
    # x ran every role up to containerd, which failed; nothing after it (kubelet) ran there.
    assert [r for r in ROLES if r in x["roles"]] == ROLES[: ROLES.index("containerd") + 1]
    assert [r for r in ROLES if r in x["roles"] and x["roles"][r]["failed"]] == ["containerd"]
    before_failure = ROLES[: ROLES.index("containerd")]
    assert {r for r in before_failure if x["roles"][r]["changed"]} == {
        "isolcpus",
        "irq_affinity",
        "cpu_governor",
        "rt_runtime",
        "numa_sysctl",
    }, x["roles"]
    # y went on to the end: every role ran, none failed; kubelet (after containerd) ran and said why it
    # had nothing to do (y is a plain KVM guest: no kubelet installed).
    assert y["status"] == "changed"
    assert {r: y["roles"][r]["failed"] for r in ROLES} == dict.fromkeys(ROLES, False)
    assert y["roles"]["kubelet"]["not_applicable"] == ["not installed"], y["roles"]["kubelet"]
    # y, every role done, rebooted into its planned arguments.
    assert not y["reboot_required"] and (sysroot(lab, "y") / "proc/cmdline").read_text() != booted["y"]
    assert "isolcpus=" in (sysroot(lab, "y") / "proc/cmdline").read_text()
    assert not (sysroot(lab, "x") / "var/lib/hostkit/lock").exists()  # the failed host's lock was released


def test_journals_are_readable_by_root_only(lab, rolled_back):
    rolled_back("y")
    rc, _, proc = cli_json(
        "apply", "-i", lab.inventory, "--limit", "y", "--profile", "vmware-guest", "--tags", "rt_runtime"
    )
    assert rc == 0, proc.stderr[-2000:]
    journal = sysroot(lab, "y") / "var/lib/hostkit/journal"
    modes = {j.name: oct(j.stat().st_mode & 0o777) for j in journal.glob("*.json")}
    assert modes and set(modes.values()) == {"0o600"}, modes


def test_become_password_never_reaches_artifacts_or_journals(lab, tmp_path, rolled_back):
    rolled_back("y")
    secret = "S3cr3t-become-pw-" + os.urandom(4).hex()
    inv = tmp_path / "inv.yml"
    inv.write_text(
        lab.inventory.read_text().replace(
            "hostkit_fixture: kvm-small", f"hostkit_fixture: kvm-small\n          ansible_become_password: {secret}"
        )
    )
    rc, doc, proc = cli_json("apply", "-i", inv, "--limit", "y", "--profile", "vmware-guest")
    assert rc == 0, proc.stderr[-2000:]
    state = os.environ["HOSTKIT_STATE_DIR"]  # this test's runs and artifacts
    leaks = subprocess.run(
        ["grep", "-rl", secret, state, str(sysroot(lab, "y") / "var/lib/hostkit")], capture_output=True, text=True
    ).stdout.split()
    assert leaks == [] and secret not in proc.stdout + proc.stderr
