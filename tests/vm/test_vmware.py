"""The real-kernel lab, `vmware-like` guest: the seed's deceptive VMware guest, shrunk.

4 sockets x 1 core x 1 thread, one NUMA node, SMBIOS "VMware, Inc." / "VMware Virtual
Platform", booted through its own GRUB, next to one sysroot lab host (`bm`, an EPYC
fixture served by sshd) so fleet behaviour is visible: a guest that does not come back
after a reboot fails alone, in bounded time, while the other host finishes.

Module fixtures run in a fixed order (each boot costs minutes under TCG): ``lab`` ->
``vmware_applied`` (the vmware-guest profile applied, then a reboot) -> ``rolled_back``;
the killed reboot comes last, since it leaves the guest down.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from hostkit.lab.lab import _wait_port
from tests.labutil import cli, cli_json
from tests.vmutil import BOOT_TIMEOUT, OWN_CONNECTION, SYSCTL_PATHS, etc_boot_hashes, read, ssh, vm_lab_fixture

VM = "vmw"
BM = "bm"


lab = vm_lab_fixture("vm-vmware", [(VM, "vmware-like")], hosts=[(BM, "epyc-9634-nps1")])


def live_sysctls(lab) -> dict[str, str]:
    return {k: read(lab, VM, p) for k, p in SYSCTL_PATHS.items()}


@pytest.fixture(scope="module")
def original(lab):
    return {"hashes": etc_boot_hashes(lab, VM), "sysctl": live_sysctls(lab), "cmdline": read(lab, VM, "/proc/cmdline")}


def test_facts_name_vmware_and_the_deceptive_topology(lab):
    rc, doc, proc = cli_json("facts", "-i", lab.inventory, "--limit", VM)
    assert rc == 0, proc.stderr
    facts = doc["hosts"][VM]["facts"]
    assert facts["virtualization"]["hypervisor"] == "vmware"
    assert facts["virtualization"]["deceptive_topology"] is True
    topo = facts["topology"]
    assert (topo["sockets"], topo["cores_per_socket"], topo["threads_per_core"]) == (4, 1, 1)
    assert len(topo["numa_nodes"]) == 1


def test_bare_metal_profile_refused_and_nothing_changed(lab, original):
    proc = cli("apply", "-i", lab.inventory, "--limit", VM, "--profile", "bare-metal-inference")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "deceptive topology" in proc.stdout + proc.stderr
    assert etc_boot_hashes(lab, VM) == original["hashes"]
    assert live_sysctls(lab) == original["sysctl"]


@pytest.fixture(scope="module")
def vmware_applied(lab, original):
    rc, doc, proc = cli_json("apply", "-i", lab.inventory, "--profile", "vmware-guest")
    assert rc == 0, json.dumps(doc)[-3000:]
    rc, plan_doc, _ = cli_json("plan", "-i", lab.inventory, "--limit", VM, "--profile", "vmware-guest")
    plan = plan_doc["hosts"][VM]
    guest = next(h for h in lab.hosts() if h.name == VM)
    ssh(lab, VM, "systemctl reboot", check=False, options=OWN_CONNECTION)
    deadline = time.monotonic() + 120
    while _wait_port(guest.address, guest.port, 1.0, banner_timeout=2.0) and time.monotonic() < deadline:
        time.sleep(1)  # until the old sshd is gone
    lab.wait_ssh(guest, timeout=BOOT_TIMEOUT)
    return {"apply": doc, "plan": plan}


def test_vmware_guest_profile_survives_a_reboot(lab, vmware_applied):
    assert vmware_applied["apply"]["hosts"][VM]["status"] == "changed", vmware_applied["apply"]["hosts"][VM]
    for key, value in vmware_applied["plan"]["sysctl"].items():
        assert read(lab, VM, SYSCTL_PATHS[key]) == str(value), key
    assert "isolcpus" not in read(lab, VM, "/proc/cmdline")
    assert ssh(lab, VM, "systemctl is-active irqbalance").strip() == "active"


def test_rollback_restores_the_guest_exactly(lab, original, vmware_applied):
    rc, doc, proc = cli_json("rollback", "-i", lab.inventory)
    assert rc == 0, json.dumps(doc)[-3000:]
    assert live_sysctls(lab) == original["sysctl"]
    assert etc_boot_hashes(lab, VM) == original["hashes"]


def test_a_guest_that_does_not_come_back_fails_alone_in_bounded_time(lab, original):
    """`apply --force --reboot --tags isolcpus` of the bare-metal profile on both hosts; QEMU is killed
    while the guest reboots. The guest is reported failed within the reboot timeout; `bm` finishes."""
    timeout = 60  # hostkit's bound on a reboot here (--reboot-timeout): the killed guest fails after it
    console = lab.console_log(VM)
    seen = console.stat().st_size
    killed = threading.Event()

    def kill_when_rebooting():
        # The guest is rebooting once its console, written since the apply started, shows systemd's
        # last shutdown step: the reboot command was delivered and its reboot task is waiting for the
        # guest. (A slow sshd banner is no sign: under load the guest answered late while still
        # regenerating its GRUB config, was killed there, and Ansible said unreachable.)
        deadline = time.monotonic() + 1500
        while time.monotonic() < deadline:
            with console.open("rb") as f:
                f.seek(seen)
                if b"systemd-shutdown[1]: " in f.read():
                    lab.kill_host(VM)
                    killed.set()
                    return
            time.sleep(0.5)

    watcher = threading.Thread(target=kill_when_rebooting, daemon=True)
    t0 = time.monotonic()
    watcher.start()
    # Only the role that changes kernel arguments and reboots: the rest is not what this test is about.
    proc = cli(
        "apply",
        "-i",
        lab.inventory,
        "--profile",
        "bare-metal-inference",
        "--force",
        "--reboot",
        "--reboot-timeout",
        timeout,
        "--tags",
        "isolcpus",
        "--json",
        timeout=1800,
    )
    elapsed = time.monotonic() - t0
    assert killed.is_set(), "the guest never went down for its reboot"
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    # The whole record of a host in the wrong state (its msg says why), not pytest's shortened repr.
    assert doc["hosts"][VM]["status"] == "failed", json.dumps(doc["hosts"][VM])
    assert doc["hosts"][BM]["status"] == "changed", json.dumps(doc["hosts"][BM])
    assert elapsed < 1500, elapsed
