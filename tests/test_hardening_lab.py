"""Hardening on the lab: concurrent applies, stale locks, a full journal disk, impostor host keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.labutil import cli, cli_json, sysroot, trees

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("x", "epyc-9634-nps1"), ("y", "kvm-small")], port=2361)


def test_second_concurrent_apply_is_refused_naming_the_holder(lab):
    cmd = [sys.executable, "-m", "hostkit.cli", "apply", "-i", str(lab.inventory), "--limit", "x", "--json"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = sysroot(lab, "x") / "var/lib/hostkit/lock"
    for _ in range(600):
        if lock.exists():
            break
        __import__("time").sleep(0.05)
    holder = json.loads(lock.read_text())["run_id"]
    rc2, second, _ = cli_json("apply", "-i", lab.inventory, "--limit", "x")
    out, _ = first.communicate(timeout=300)
    assert first.returncode == 0 and json.loads(out)["hosts"]["x"]["status"] == "changed"
    assert rc2 == 1
    host = second["hosts"]["x"]
    assert host["status"] == "failed" and host["changed"] == 0 and holder in host["msg"]
    assert not lock.exists()  # released by its run
    cli_json("rollback", "-i", lab.inventory, "--limit", "x")


def test_stale_lock_is_detected_and_cleared_explicitly(lab):
    before = trees(lab)["x"]
    lock = sysroot(lab, "x") / "var/lib/hostkit/lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    lock.write_text(json.dumps({"run_id": "20200101T000000Z-dead00", "controller": f"{os.uname().nodename}:{dead}",
                                "time": 0}))
    rc, doc, _ = cli_json("apply", "-i", lab.inventory, "--limit", "x")
    assert rc == 1 and "stale: run 20200101T000000Z-dead00 died" in doc["hosts"]["x"]["msg"]
    assert trees(lab)["x"] == before
    rc, unl, _ = cli_json("unlock", "-i", lab.inventory, "--limit", "x")
    assert rc == 0 and unl["released"] == {"x": True}
    assert not lock.exists()


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


def test_impostor_host_key_refused_by_apply_audit_and_smoke(lab, tmp_path):
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    key = (tmp_path / "other.pub").read_text().split()
    y = next(h for h in lab.hosts() if h.name == "y")
    impostor = tmp_path / "known_hosts"
    impostor.write_text(lab.known_hosts.read_text().replace(
        next(line for line in lab.known_hosts.read_text().splitlines() if line.startswith(f"[{y.address}]")),
        f"[{y.address}]:{y.port} {key[0]} {key[1]}"))
    inv = tmp_path / "inv.yml"
    inv.write_text(lab.inventory.read_text().replace(str(lab.known_hosts), str(impostor)))
    before = trees(lab)["y"]
    rc, ap, _ = cli_json("apply", "-i", inv, "--limit", "y", "--profile", "vmware-guest")
    assert rc == 1 and ap["hosts"]["y"]["status"] == "unreachable"
    rc, au, _ = cli_json("audit", "-i", inv, "--limit", "y")
    assert rc == 1 and au["hosts"]["y"]["status"] == "unreachable" and "CHANGED" in au["hosts"]["y"]["error"]
    rc, sm, _ = cli_json("smoke", "-i", inv, "--limit", "y", "--duration", "1")
    assert rc == 1 and sm["hosts"]["y"]["status"] == "unreachable"
    assert trees(lab)["y"] == before
    ok = cli("audit", "-i", lab.inventory, "--limit", "y", "--profile", "vmware-guest")
    assert "unreachable" not in ok.stdout.lower()  # the genuine key still works


def test_a_role_failing_on_one_host_mid_fleet_leaves_the_others_and_a_consistent_journal(lab, tmp_path):
    before = trees(lab)
    inv = tmp_path / "inv.yml"
    inv.write_text(lab.inventory.read_text().replace(
        "hostkit_fixture: epyc-9634-nps1", "hostkit_fixture: epyc-9634-nps1\n          containerd_extra_toml: 'broken = ['"))
    rc, doc, proc = cli_json("apply", "-i", inv, "--force")  # y is a small KVM guest: forced, so both run every role
    assert rc == 1, proc.stderr[-2000:]
    x, y = doc["hosts"]["x"], doc["hosts"]["y"]
    assert x["status"] == "failed" and x["roles"]["containerd"]["failed"] and x["changed"] > 0  # earlier roles ran
    assert "kubelet" not in x["roles"]  # nothing after the failure on that host
    assert y["status"] == "changed" and y["roles"]["kubelet"]["changed"] >= 1  # the other host went on
    assert not (sysroot(lab, "x") / "var/lib/hostkit/lock").exists()  # the failed host's lock was released
    for host in ("x", "y"):
        for j in (sysroot(lab, host) / "var/lib/hostkit/journal").glob("*.json"):
            assert oct(j.stat().st_mode & 0o777) == "0o600", j
    rc, rb, _ = cli_json("rollback", "-i", lab.inventory)
    assert rc == 0 and trees(lab) == before


def test_become_password_never_reaches_artifacts_or_journals(lab, tmp_path):
    import os

    secret = "S3cr3t-become-pw-" + os.urandom(4).hex()
    inv = tmp_path / "inv.yml"
    inv.write_text(lab.inventory.read_text().replace("hostkit_fixture: kvm-small",
                                                     f"hostkit_fixture: kvm-small\n          ansible_become_password: {secret}"))
    rc, doc, proc = cli_json("apply", "-i", inv, "--limit", "y", "--profile", "vmware-guest")
    assert rc == 0, proc.stderr[-2000:]
    state = os.environ["HOSTKIT_STATE_DIR"]  # this test's runs and artifacts
    leaks = subprocess.run(["grep", "-rl", secret, state, str(sysroot(lab, "y") / "var/lib/hostkit")],
                           capture_output=True, text=True).stdout.split()
    assert leaks == [] and secret not in proc.stdout + proc.stderr
    cli_json("rollback", "-i", lab.inventory, "--limit", "y")
