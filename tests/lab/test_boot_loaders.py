"""Boot loaders on lab hosts (real sshd, real Ansible, the agent over SSH): the five boot fixtures
(RHEL 8 with tuned's cpu-partitioning in grubenv, RHEL 9 BLS, Ubuntu 22.04 cloud image, Debian 12,
systemd-boot) as one fleet: apply -> the facts' next_boot_cmdline holds each planned argument exactly
once and no other isolcpus/nohz_full -> the audit shows no drift (a pending reboot at most) ->
rollback puts every byte back -> a second rollback changes nothing; checked per layout. A host
without boot configuration is refused (exit 3) with nothing changed; a host booted from a unified
kernel image gets everything but its kernel arguments, refused in one line."""

from __future__ import annotations

import pytest

from hostkit.core.kernel_args import arg_name, cmdline_words, format_arg
from tests.conftest import lab_port
from tests.labutil import cli_json, sysroot, trees

BOOT_HOSTS = {
    "boot-rhel8-tuned": "bls",
    "boot-rhel9": "bls",
    "boot-ubuntu2204-cloud": "grub-debian",
    "boot-debian12": "grub-debian",
    "boot-sdboot": "systemd-boot",
}
UKI = "boot-arch-uki"
# What the apply must have written on each (beyond hostkit's own journal), and what it may not touch.
CHANGED = {
    "boot-rhel8-tuned": {"boot/grub2/grubenv"},
    "boot-rhel9": {
        "boot/loader/entries/0c3fb7a2d4e44a3a9e0b9f7d2c6a1e55-5.14.0-427.13.1.el9_4.x86_64.conf",
        "boot/loader/entries/0c3fb7a2d4e44a3a9e0b9f7d2c6a1e55-5.14.0-362.8.1.el9_3.x86_64.conf",
        "etc/kernel/cmdline",
    },
    "boot-ubuntu2204-cloud": {"etc/default/grub.d/50-cloudimg-settings.cfg", "etc/default/grub.d/hostkit.cfg"},
    "boot-debian12": {"etc/default/grub.d/hostkit.cfg"},
    "boot-sdboot": {
        "boot/efi/loader/entries/4f0c9e1b7a2d4c6e8b3a5d7f9e1c2b4a-6.1.0-28-amd64.conf",
        "boot/efi/loader/entries/4f0c9e1b7a2d4c6e8b3a5d7f9e1c2b4a-6.1.0-27-amd64.conf",
        "etc/kernel/cmdline",
    },
}


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([(h, h) for h in [*BOOT_HOSTS, "boot-none", UKI]], lab_port(15))


def boot_files(tree: dict[str, str]) -> set[str]:
    return {p for p in tree if p.startswith(("boot/", "etc/default/grub", "etc/kernel/", "etc/tuned/"))}


@pytest.fixture(scope="module")
def fleet(lab):
    """The five layouts as one fleet: plan, apply, facts, audit, rollback and a second rollback, each
    one run over all of them (as an operator runs them); what each step left, per host."""
    hosts = ",".join(BOOT_HOSTS)
    out = {"before": trees(lab)}
    rc, out["plan"], proc = cli_json("plan", "-i", lab.inventory, "--limit", hosts)
    assert rc == 0, proc.stderr[-2000:]
    out["apply_rc"], out["apply"], proc = cli_json("apply", "-i", lab.inventory, "--limit", hosts)
    try:
        out["applied"] = trees(lab)
        rc, facts, proc = cli_json("facts", "-i", lab.inventory, "--limit", hosts)  # read on the hosts, over SSH
        assert rc == 0, proc.stderr[-2000:]
        out["kernel"] = {h: facts["hosts"][h]["facts"]["kernel"] for h in BOOT_HOSTS}
        out["audit_rc"], out["audit"], proc = cli_json("audit", "-i", lab.inventory, "--limit", hosts)
    finally:
        out["rollback_rc"], out["rollback"], proc = cli_json("rollback", "-i", lab.inventory, "--limit", hosts)
    out["rolled_back"] = trees(lab)
    out["grubenv"] = (sysroot(lab, "boot-rhel8-tuned") / "boot/grub2/grubenv").read_bytes()
    out["again_rc"], out["again"], proc = cli_json("rollback", "-i", lab.inventory, "--limit", hosts)
    out["after_again"] = trees(lab)
    return out


@pytest.mark.parametrize("host", list(BOOT_HOSTS))
def test_apply_sets_the_next_boot_once_audit_passes_rollback_is_exact(fleet, host):
    before, planned = fleet["before"][host], fleet["plan"]["hosts"][host]["cmdline_set"]
    assert planned["isolcpus"] and planned["nohz_full"]
    assert fleet["apply_rc"] == 0 and fleet["apply"]["hosts"][host]["status"] == "changed", fleet["apply"]["hosts"][
        host
    ]
    # update-grub is Debian GRUB's only: BLS and systemd-boot entries are read by the loader itself.
    assert (["update-grub"] in fleet["apply"]["hosts"][host]["would_run"]) is (BOOT_HOSTS[host] == "grub-debian")
    after = fleet["applied"][host]
    changed = {p for p in boot_files(before) | boot_files(after) if before.get(p) != after.get(p)}
    assert changed == CHANGED[host]

    kernel = fleet["kernel"][host]
    assert kernel["boot_loader"]["backend"] == BOOT_HOSTS[host]
    words = cmdline_words(kernel["next_boot_cmdline"])
    for arg, value in planned.items():
        assert [w for w in words if arg_name(w) == arg] == [format_arg(arg, value)], (arg, words)

    findings = fleet["audit"]["hosts"][host]["findings"]
    assert [f for f in findings if f["status"] == "drift"] == [], fleet["audit"]["hosts"][host]
    kernel_args = {f["check"]: f["status"] for f in findings if f["check"].startswith("kernel arg ")}
    assert set(kernel_args) == {f"kernel arg {a}" for a in planned}
    assert set(kernel_args.values()) <= {"pass", "pending_reboot"}
    assert fleet["audit"]["hosts"][host]["status"] == "pending_reboot" and fleet["audit_rc"] == 0

    assert fleet["rollback_rc"] == 0 and fleet["rollback"]["hosts"][host]["verify"]["ok"]
    assert fleet["rolled_back"][host] == before
    if host == "boot-rhel8-tuned":  # the tuned host's grubenv is its block again: 1024 bytes, tuned's values
        assert len(fleet["grubenv"]) == 1024 and b"tuned_params=skew_tick=1 tsc=reliable" in fleet["grubenv"]
    assert fleet["again_rc"] == 0 and fleet["again"]["hosts"][host]["changed"] is False
    assert fleet["after_again"][host] == before


def test_a_host_without_boot_configuration_is_refused_and_untouched(lab):
    before = trees(lab)["boot-none"]
    rc, doc, proc = cli_json("apply", "-i", lab.inventory, "--limit", "boot-none")
    assert rc == 3, proc.stderr[-2000:]
    host = doc["hosts"]["boot-none"]
    assert host["status"] == "refused"
    assert host["refused"] == [
        "no supported boot configuration (found: none of /etc/default/grub, /boot/loader/entries/*.conf, "
        "<esp>/loader/entries/*.conf; supported: Debian/Ubuntu GRUB (/etc/default/grub), BLS entries with GRUB "
        "(/boot/loader/entries + /boot/grub2), systemd-boot (<esp>/loader/entries))"
    ]
    assert trees(lab)["boot-none"] == before


def test_a_uki_host_gets_all_but_its_kernel_arguments_and_rolls_back_exactly(lab):
    """The command line is inside the image: the apply says so in one line, writes no boot file (nor
    anything else of the kernel arguments), applies the rest, needs no reboot; rollback is exact."""
    before = trees(lab)[UKI]
    rc, doc, proc = cli_json("apply", "-i", lab.inventory, "--limit", UKI)
    assert rc == 0, proc.stderr[-2000:]
    host = doc["hosts"][UKI]
    assert host["status"] == "changed" and not host["reboot_required"] and host["refused"] == [], host
    assert len(host["refused_parts"]) == 1 and host["refused_parts"][0].startswith(
        "kernel arguments refused: booted from a unified kernel image (systemd-stub's StubInfo EFI variable"
    ), host
    after = trees(lab)[UKI]
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    assert any(p.startswith("etc/sysctl.d/") for p in changed), sorted(changed)  # the rest applied
    assert not [
        p for p in changed if p.startswith(("efi/", "boot/", "etc/kernel/", "etc/default/grub", "sys/firmware/"))
    ], sorted(changed)
    rc, rb, proc = cli_json("rollback", "-i", lab.inventory, "--limit", UKI)
    assert rc == 0 and rb["hosts"][UKI]["verify"]["ok"], proc.stdout[-2000:]
    assert trees(lab)[UKI] == before
