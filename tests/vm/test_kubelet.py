"""The real-kernel lab, a kubelet-profile guest: the shipped default profile (bare-metal-inference,
kubelet's static CPU manager) applied with --reboot to the `numa2` QEMU guest (2 sockets x 2 cores,
one NUMA node per socket, a real irqbalance), proven on the live kernel, then rolled back exactly.

The guest is a plain Debian install: no kubelet, no containerd (the provisioning order: a node is
tuned before Kubernetes is installed). The default profile's whole apply runs; the roles of the
missing components report themselves not applicable and write nothing, the plan is the kubelet
partition all the same (it follows the profile, not what runs yet), and the one reboot comes after
the last role. (That a role failing after isolcpus leaves its host unbooted needs no kernel: the
reboot step is the same task for a guest and a lab host, proven over SSH in tests/lab/test_hardening.py.)

What only a booted kernel shows: ``isolcpus=managed_irq,<cpus>`` without ``domain`` leaves no
domain-isolated CPU (``/sys/devices/system/cpu/isolated`` is empty) while ``nohz_full`` still covers
the isolated CPUs; ``systemd.cpu_affinity`` puts PID 1 and the services it starts on the
housekeeping CPUs; ``kernel.timer_migration`` is 1; irqbalance keeps running and no movable device
IRQ is effective on an isolated CPU.
"""

from __future__ import annotations

import json
import time

import pytest

from hostkit.core.cpulist import parse_cpulist
from tests.lab.test_rollout import epoch
from tests.labutil import cli, cli_json
from tests.vmutil import REBOOT_TIMEOUT, device_irqs, etc_boot_hashes, inventory_for, read, ssh, vm_lab_fixture

HOST = "numa2"
DROPIN = "/etc/kubernetes/kubelet.conf.d/60-hostkit.conf"  # roles/kubelet/defaults/main.yml


lab = vm_lab_fixture("vm-kubelet", [(HOST, "numa2")])


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    # The default profile as shipped (kubelet and containerd enabled); one housekeeping core per node.
    return inventory_for(
        lab,
        tmp_path_factory.mktemp("vm-inv") / "inventory.yml",
        {HOST: {"hostkit_overrides": {"reserve_per_node": 1, "allow_virtual": True}}},
    )


def allowed(lab, path: str) -> str:
    return next(
        line.split(":", 1)[1].strip()
        for line in read(lab, HOST, path).splitlines()
        if line.startswith("Cpus_allowed_list:")
    )


def btime(lab) -> int:
    return next(
        int(line.split()[1]) for line in read(lab, HOST, "/proc/stat").splitlines() if line.startswith("btime ")
    )


@pytest.fixture(scope="module")
def before(lab):
    return {
        "cmdline": read(lab, HOST, "/proc/cmdline"),
        "pid1": allowed(lab, "/proc/1/status"),
        "timer_migration": read(lab, HOST, "/proc/sys/kernel/timer_migration"),
        "hashes": etc_boot_hashes(lab, HOST),
        "btime": btime(lab),
        "boots": lab.guest_boots()[HOST],
    }


@pytest.fixture(scope="module")
def tuned(lab, inventory, before):
    rc, plan_doc, proc = cli_json("plan", "-i", inventory)
    assert rc == 0, proc.stderr
    plan = plan_doc["hosts"][HOST]
    t0 = time.monotonic()
    proc = cli(
        "apply", "-i", inventory, "--reboot", "--reboot-timeout", REBOOT_TIMEOUT, "--json", timeout=REBOOT_TIMEOUT + 900
    )
    assert proc.returncode == 0, f"apply --reboot failed: {proc.stdout[-3000:]} {proc.stderr[-3000:]}"
    print(f"\napply --reboot took {time.monotonic() - t0:.0f} s")
    hist = cli("history", "-i", inventory, "--json")
    assert hist.returncode == 0, hist.stderr[-2000:]
    return {"plan": plan, "apply": json.loads(proc.stdout), "history": json.loads(hist.stdout)["hosts"]}


def test_without_kubelet_and_containerd_their_roles_say_so_and_write_nothing(lab, tuned):
    plan, host = tuned["plan"], tuned["apply"]["hosts"][HOST]
    assert plan["kubelet"] == {"enabled": False, "installed": False}
    assert plan["containerd"]["enabled"] is False
    assert host["roles"]["kubelet"]["not_applicable"] == ["not installed"], host["roles"]
    assert host["roles"]["containerd"]["not_applicable"] == ["containerd is not installed"], host["roles"]
    assert not any(v["failed"] for v in host["roles"].values()), host["roles"]
    assert ssh(lab, HOST, f"test -e {DROPIN} || echo absent").strip() == "absent"
    assert ssh(lab, HOST, "test -e /etc/containerd/config.toml || echo absent").strip() == "absent"


def test_one_reboot_after_the_last_role(lab, before, tuned):
    """The apply's only reboot: one more kernel boot on the guest's console, and the boot is later
    than the run's last journaled change (every role had applied before it)."""
    assert lab.guest_boots()[HOST] == before["boots"] + 1
    run = next(r for r in tuned["history"][HOST]["runs"] if r["run_id"] == tuned["apply"]["run_id"])
    assert epoch(run["last_change"]) < btime(lab)


def test_the_plan_is_the_kubelet_partition(tuned):
    plan = tuned["plan"]
    assert (plan["housekeeping"], plan["isolated"]) == ("0,2", "1,3")
    assert plan["cmdline_set"]["isolcpus"] == "managed_irq,1,3"
    assert plan["cmdline_set"]["systemd.cpu_affinity"] == "0,2"
    assert plan["sysctl"]["kernel.timer_migration"] == 1


def test_the_kernel_boots_without_domain_isolation(lab, tuned):
    tokens = read(lab, HOST, "/proc/cmdline").split()
    for key, value in tuned["plan"]["cmdline_set"].items():
        want = key if value is None else f"{key}={value}"
        assert tokens.count(want) == 1, (want, tokens)
    # No domain flag: the scheduler still balances across the isolated CPUs (none is domain-isolated) ...
    assert read(lab, HOST, "/sys/devices/system/cpu/isolated") == ""
    # ... while the tick is still stopped there.
    assert parse_cpulist(read(lab, HOST, "/sys/devices/system/cpu/nohz_full")) == {1, 3}


def test_systemd_keeps_host_processes_on_housekeeping(lab, tuned, before):
    assert parse_cpulist(before["pid1"]) == {0, 1, 2, 3}
    assert parse_cpulist(allowed(lab, "/proc/1/status")) == {0, 2}
    # A process of a service systemd started (sshd's session shell, this command) inherits it.
    assert parse_cpulist(allowed(lab, "/proc/self/status")) == {0, 2}


def test_timers_may_migrate(lab, tuned):
    assert read(lab, HOST, "/proc/sys/kernel/timer_migration") == "1"


def test_irqbalance_runs_and_no_movable_device_irq_is_on_an_isolated_cpu(lab, tuned):
    # irqbalance runs in the guest: it is the IRQs' one owner, hostkit pins none beside it.
    assert tuned["plan"]["irq"]["owner"] == "irqbalance" and not tuned["plan"]["irq"]["by_name"]
    assert ssh(lab, HOST, "systemctl is-active irqbalance").strip() == "active"
    uptime = float(read(lab, HOST, "/proc/uptime").split()[0])
    if uptime < 60:
        time.sleep(60 - uptime)
    irqs = device_irqs(lab, HOST)
    managed = {n for n, i in irqs.items() if "-req." in i["name"]}  # virtio-blk per-queue: kernel-managed
    on_isolated = {
        n: i["effective"]
        for n, i in irqs.items()
        if n not in managed and i["effective"] and parse_cpulist(i["effective"]) & {1, 3}
    }
    assert on_isolated == {}


@pytest.fixture(scope="module")
def rolled_back(lab, inventory, tuned):
    proc = cli("rollback", "-i", inventory, "--json", timeout=900)
    assert proc.returncode == 0, f"rollback failed: {proc.stdout[-3000:]} {proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


def test_rollback_puts_etc_and_boot_back_and_the_next_boot_is_the_original(lab, inventory, before, rolled_back):
    """Exact rollback of the kubelet partition; the boot it would take is the original one (the reboot
    back through GRUB is numa2's proof, tests/vm/test_numa2.py: not booted a second time here)."""
    now = etc_boot_hashes(lab, HOST)
    changed = {p for p in set(before["hashes"]) | set(now) if before["hashes"].get(p) != now.get(p)}
    assert not changed, sorted(changed)
    rc, doc, proc = cli_json("facts", "-i", inventory)
    assert rc == 0, proc.stderr
    kernel = doc["hosts"][HOST]["facts"]["kernel"]
    assert "isolcpus=managed_irq,1,3" in kernel["cmdline"]  # still booted with the partition ...
    assert kernel["next_boot_cmdline"] == before["cmdline"]  # ... and the next boot is the original
    assert read(lab, HOST, "/proc/sys/kernel/timer_migration") == before["timer_migration"]
