"""tuned coexistence on lab hosts (real sshd, real Ansible, the agent over SSH): RHEL 8.9's layout
(boot-rhel8-tuned: BLS with $kernelopts $tuned_params, tuned's cpu-partitioning active, its
isolcpus/nohz_full in grubenv tuned_params) with tuned installed as the package lays it out
(tests/tuned_util.py: tuned v2.21.0's own profiles, a running tuned, the unit enabled).

drive (the default where tuned is active): apply -> tuned's active profile is hostkit's, the next
boot's command line holds each planned argument exactly once (isolcpus equal to the plan), tuned's
/etc/tuned/bootcmdline and grubenv tuned_params agree and hold none of hostkit's arguments, the audit
finds no drift -> rollback puts every byte back (hostkit's state directory aside) and switches tuned
back with `tuned-adm profile cpu-partitioning` (recorded as would-run on a sysroot) -> a second
rollback changes nothing. neutralize: profile hostkit-neutral. `rollback --adopt` records tuned's
files. The real tuned daemon is not run here (lab hosts share this machine's kernel and services)."""

from __future__ import annotations

import pytest

from hostkit.core.boot_loader import parse_grubenv
from hostkit.core.kernel_args import arg_name, cmdline_words, format_arg
from tests.conftest import lab_port
from tests.labutil import cli_json, inventory_with, sysroot, trees
from tests.tuned_util import install_tuned

TUNED_FILES = ("etc/tuned/", "boot/grub2/grubenv")


@pytest.fixture(scope="module")
def lab(make_lab):
    # One host per test; each test rolls its host back and checks it to the byte: any order.
    lab = make_lab(
        [("drive", "boot-rhel8-tuned"), ("neutral", "boot-rhel8-tuned"), ("adopt", "boot-rhel8-tuned")], lab_port(14)
    )
    for h in ("drive", "neutral", "adopt"):
        install_tuned(sysroot(lab, h))
    return lab


def facts_of(lab, host: str, inventory=None) -> dict:
    rc, doc, proc = cli_json("facts", "-i", inventory or lab.inventory, "--limit", host)
    assert rc == 0, proc.stderr[-2000:]
    return doc["hosts"][host]["facts"]


def plan_of(lab, host: str, inventory=None) -> dict:
    rc, doc, proc = cli_json("plan", "-i", inventory or lab.inventory, "--limit", host)
    assert rc == 0, proc.stderr[-2000:]
    return doc["hosts"][host]


def changed_files(before: dict, after: dict) -> set[str]:
    return {p for p in set(before) | set(after) if p.startswith(TUNED_FILES) and before.get(p) != after.get(p)}


def rollback_twice(lab, host: str, before: dict) -> dict:
    rc, rb, proc = cli_json("rollback", "-i", lab.inventory, "--limit", host)
    assert rc == 0, proc.stdout[-3000:]
    assert rb["hosts"][host]["verify"]["ok"]
    assert trees(lab)[host] == before
    rc, again, proc = cli_json("rollback", "-i", lab.inventory, "--limit", host)
    assert rc == 0 and again["hosts"][host]["changed"] is False, proc.stdout[-2000:]
    assert again["hosts"][host]["would_run"] == []
    assert trees(lab)[host] == before
    return rb["hosts"][host]


def test_drive_makes_tuned_and_the_next_boot_agree_with_the_plan_and_rollback_restores_tuned(lab):
    before = trees(lab)["drive"]
    tuned = facts_of(lab, "drive")["tuned"]
    assert (tuned["active"], tuned["active_profile"], tuned["isolated_cores"]) == (True, "cpu-partitioning", "2-7")
    plan = plan_of(lab, "drive")
    assert plan["tuned"]["mode"] == "drive" and plan["tuned"]["profile_dir"] == "/etc/tuned/hostkit"
    planned = plan["cmdline_set"]

    rc, doc, proc = cli_json("apply", "-i", lab.inventory, "--limit", "drive")
    try:
        assert rc == 0, proc.stderr[-3000:]
        assert ["tuned-adm", "profile", "hostkit"] in doc["hosts"]["drive"]["would_run"]
        after = trees(lab)["drive"]
        # profile_mode was manual already: tuned-adm profile would leave it so.
        assert changed_files(before, after) == {
            "boot/grub2/grubenv",
            "etc/tuned/active_profile",
            "etc/tuned/bootcmdline",
            "etc/tuned/hostkit",
            "etc/tuned/hostkit/tuned.conf",
        }
        facts = facts_of(lab, "drive")
        tuned = facts["tuned"]
        assert tuned["active_profile"] == "hostkit" and tuned["profile_mode"] == "manual"
        assert [p["name"] for p in tuned["profiles"]] == [
            "latency-performance",
            "network-latency",
            "cpu-partitioning",
            "hostkit",
        ]
        assert tuned["isolated_cores"] == plan["isolated"]

        words = cmdline_words(facts["kernel"]["next_boot_cmdline"])
        for arg, value in planned.items():
            assert [w for w in words if arg_name(w) == arg] == [format_arg(arg, value)], (arg, words)
        assert [w for w in words if arg_name(w) == "isolcpus"] == [f"isolcpus={planned['isolcpus']}"]

        # What tuned will write at its next start is what the next boot already reads.
        env = dict(parse_grubenv((sysroot(lab, "drive") / "boot/grub2/grubenv").read_text()))
        assert (
            tuned["boot_cmdline"]
            == env["tuned_params"]
            == plan["tuned"]["boot_cmdline"]
            == ("rcupdate.rcu_normal_after_boot=1 nohz=on tuned.non_isolcpus=00000003 intel_pstate=disable")
        )
        assert not {arg_name(w) for w in cmdline_words(env["tuned_params"])} & set(planned)

        rc, audit, proc = cli_json("audit", "-i", lab.inventory, "--limit", "drive")
        findings = audit["hosts"]["drive"]["findings"]
        assert [f for f in findings if f["status"] == "drift"] == [], proc.stdout[-3000:]

        rc, again, proc = cli_json("apply", "-i", lab.inventory, "--limit", "drive")  # nothing left to do
        assert rc == 0 and again["hosts"]["drive"]["status"] == "ok", proc.stdout[-2000:] + proc.stderr[-2000:]
        assert trees(lab)["drive"] == after

        rc, dry, proc = cli_json("rollback", "-i", lab.inventory, "--limit", "drive", "--check")
        assert rc == 0, proc.stdout[-2000:]
        assert [a for a in dry["hosts"]["drive"]["would_run"] if a[0] == "tuned-adm"] == [
            ["tuned-adm", "profile", "cpu-partitioning"]
        ]
        assert trees(lab)["drive"] == after
    finally:
        rb = rollback_twice(lab, "drive", before)
    assert [a for a in rb["would_run"] if a[0] == "tuned-adm"] == [["tuned-adm", "profile", "cpu-partitioning"]]


def test_neutralize_switches_tuned_to_a_profile_without_plugins(lab, tmp_path):
    before = trees(lab)["neutral"]
    inv = inventory_with(lab, tmp_path / "inv.yml", {"neutral": {"hostkit_overrides": {"tuned": "neutralize"}}})
    assert plan_of(lab, "neutral", inv)["tuned"]["mode"] == "neutralize"
    rc, doc, proc = cli_json("apply", "-i", inv, "--limit", "neutral")
    try:
        assert rc == 0, proc.stderr[-3000:]
        assert ["tuned-adm", "profile", "hostkit-neutral"] in doc["hosts"]["neutral"]["would_run"]
        root = sysroot(lab, "neutral")
        assert (root / "etc/tuned/active_profile").read_text() == "hostkit-neutral\n"
        conf = (root / "etc/tuned/hostkit-neutral/tuned.conf").read_text()
        assert [line for line in conf.splitlines() if line.startswith("[")] == ["[main]"]
        assert (root / "etc/tuned/bootcmdline").read_text() == 'TUNED_BOOT_CMDLINE=""\nTUNED_BOOT_INITRD_ADD=""\n'
        tuned = facts_of(lab, "neutral", inv)["tuned"]
        assert tuned["active_profile"] == "hostkit-neutral" and tuned["bootloader_cmdline"] == {}
    finally:
        rb = rollback_twice(lab, "neutral", before)
    assert [a for a in rb["would_run"] if a[0] == "tuned-adm"] == [["tuned-adm", "profile", "cpu-partitioning"]]


def test_adopt_records_tuned_s_state_and_rollback_returns_to_it(lab):
    before = trees(lab)["adopt"]
    rc, doc, proc = cli_json("rollback", "-i", lab.inventory, "--limit", "adopt", "--adopt")
    assert rc == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    host = doc["hosts"]["adopt"]
    assert {
        "/etc/tuned/active_profile",
        "/etc/tuned/profile_mode",
        "/etc/tuned/bootcmdline",
        "/boot/grub2/grubenv",
    } <= set(host["adopted_files"])
    assert host["apply_status"] == "changed"
    assert (sysroot(lab, "adopt") / "etc/tuned/active_profile").read_text() == "hostkit\n"
    rb = rollback_twice(lab, "adopt", before)
    assert [a for a in rb["would_run"] if a[0] == "tuned-adm"] == [["tuned-adm", "profile", "cpu-partitioning"]]
