"""Audit over testinfra on lab hosts: pass after apply, three drifts named exactly, pending reboot,
JUnit XML, an unreachable host."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.conftest import lab_port
from tests.labutil import cli, cli_json, sysroot

HOSTS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def tuned(make_lab):
    # Every test leaves the applied hosts as it found them (drifts are put back): no order matters.
    lab = make_lab([("a", "epyc-9634-nps1"), ("b", "xeon-8480-snc2-ht"), ("c", "epyc-9634-nps1")], lab_port(5))
    rc, doc, proc = cli_json("apply", "-i", lab.inventory)
    assert rc == 0, proc.stderr[-2000:]
    return lab


def drifts(doc):
    return {(h, f["check"]) for h, r in doc["hosts"].items() for f in r.get("findings", []) if f["status"] == "drift"}


def test_audit_after_apply_passes_with_reboot_pending(tuned):
    rc, doc, proc = cli_json("audit", "-i", tuned.inventory)
    assert rc == 0, proc.stdout[-3000:]
    assert drifts(doc) == set()
    for h in HOSTS:
        r = doc["hosts"][h]
        assert r["status"] == "pending_reboot"  # isolcpus planned and in the boot config, not booted
        pending = {f["check"] for f in r["findings"] if f["status"] == "pending_reboot"}
        assert "kernel arg isolcpus" in pending
        assert r["counts"]["pass"] > 10


def test_strict_audit_fails_on_a_pending_reboot(tuned):
    rc, doc, proc = cli_json("audit", "-i", tuned.inventory, "--strict")
    assert rc == 1, proc.stdout[-3000:]
    assert drifts(doc) == set()
    assert {h: r["status"] for h, r in doc["hosts"].items()} == dict.fromkeys(HOSTS, "pending_reboot")


def test_audit_as_a_plain_pytest_suite(tuned, tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "hostkit.audit",
            "--hostkit-inventory",
            str(tuned.inventory),
            "-q",
            "-p",
            "no:cacheprovider",
            "--junitxml",
            str(tmp_path / "j.xml"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout
    assert (tmp_path / "j.xml").exists()


@pytest.fixture
def three_drifts(tuned):
    drifted = {
        sysroot(tuned, "a") / "proc/sys/vm/stat_interval": "1\n",
        sysroot(tuned, "b") / "proc/irq/24/smp_affinity_list": "58\n",  # on the NIC's node, off plan
        sysroot(tuned, "c") / "sys/devices/system/cpu/cpu5/cpufreq/scaling_governor": "powersave\n",
    }
    applied = {path: path.read_text() for path in drifted}
    for path, text in drifted.items():
        path.write_text(text)
    yield
    for path, text in applied.items():
        path.write_text(text)


def test_three_drifts_on_three_hosts_named_exactly(tuned, three_drifts):
    rc, doc, proc = cli_json("audit", "-i", tuned.inventory)
    assert rc == 1
    assert drifts(doc) == {
        ("a", "sysctl vm.stat_interval"),
        ("b", "IRQ 24 affinity (ens785f0-TxRx-0)"),
        ("c", "cpufreq governor"),
    }
    by = {(h, f["check"]): f for h, r in doc["hosts"].items() for f in r["findings"]}
    assert (by[("a", "sysctl vm.stat_interval")]["expected"], by[("a", "sysctl vm.stat_interval")]["actual"]) == (10, 1)
    assert by[("b", "IRQ 24 affinity (ens785f0-TxRx-0)")]["actual"] == "58"
    assert "powersave on CPUs 5" in by[("c", "cpufreq governor")]["actual"]


def test_drifts_are_the_failed_testcases_of_the_junit_report(tuned, three_drifts, tmp_path):
    junit = tmp_path / "audit.xml"
    assert cli("audit", "-i", tuned.inventory, "--junit", junit).returncode == 1
    tree = ET.parse(junit).getroot()
    failed = [(c.get("classname"), c.get("name")) for c in tree.iter("testcase") if c.find("failure") is not None]
    assert sorted(failed) == sorted(
        [
            ("hostkit.audit.a", "sysctl vm.stat_interval"),
            ("hostkit.audit.b", "IRQ 24 affinity (ens785f0-TxRx-0)"),
            ("hostkit.audit.c", "cpufreq governor"),
        ]
    )
    assert tree.get("failures") == "3"


def test_human_report_names_the_drift_expected_and_found(tuned, three_drifts):
    human = cli("audit", "-i", tuned.inventory)
    assert human.returncode == 1
    assert "a: DRIFT sysctl vm.stat_interval: expected 10, got 1 (/proc/sys/vm/stat_interval)" in human.stdout


def test_unreachable_host_does_not_stop_the_others(tuned):
    tuned.stop_host("b")
    try:
        rc, doc, _ = cli_json("audit", "-i", tuned.inventory)
    finally:
        tuned.start_host("b")
    assert rc == 1
    assert doc["hosts"]["b"]["status"] == "unreachable"
    assert all("findings" in doc["hosts"][h] and doc["hosts"][h]["findings"] for h in ("a", "c"))
