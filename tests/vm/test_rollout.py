"""hostkit rollout on a real-kernel guest: ``--batch 1 --reboot``.

One `small` QEMU guest (2 vCPUs, one NUMA node) with isolation on (one housekeeping CPU), so its
plan changes its kernel arguments and the rollout's apply reboots it: the one real reboot here
(the guest is an overlay, thrown away with the lab, so no rollback reboot is spent on it; rollback
with reboot is proven in test_vm_numa2.py). Smoke runs are 2 s (INCONCLUSIVE, which does not stop
a rollout). What only a real kernel shows: the rollout's apply reboots the guest inside its run and
waits for it (the guest's own journal and boot time), the new arguments are booted once each, and
the apply reboots after every role (playbooks/apply.yml), so that boot is also the one where
hostkit's IRQ boot unit must put the pins back: IRQ numbers are the previous boot's in the plan,
the unit matches them by name.

The order of waves (never more than --max-unavailable hosts out at once) needs no kernel: the
rollout's loop against a fake api (tests/unit/test_rollout_loop.py) and the lab rollout over real SSH
(tests/lab/test_rollout.py, from the hosts' journals) prove it; a second guest rebooting after the
first took this module about 7 minutes of TCG.
"""

from __future__ import annotations

import json
import stat
import time

import pytest
import yaml

from hostkit.core.cpulist import parse_cpulist
from tests.lab.test_rollout import epoch
from tests.labutil import cli
from tests.vmutil import REBOOT_TIMEOUT, device_irqs, read, ssh, vm_lab_fixture

GUESTS = ["g1"]
HOOK = """#!/bin/sh
echo "$1 $2 batch=$HOSTKIT_BATCH" >> "$(dirname "$0")/calls.log"
"""


lab = vm_lab_fixture("vm-rollout", [(g, "small") for g in GUESTS])


def btime(lab, host: str) -> int:
    return next(
        int(line.split()[1]) for line in read(lab, host, "/proc/stat").splitlines() if line.startswith("btime ")
    )


def test_the_image_s_guests_are_tuned_free(lab):
    """The image carries tuned installed but disabled: a plain guest (as this one, before its
    rollout) runs no tuned, and its command line and GRUB config carry nothing of tuned's."""
    g = GUESTS[0]
    state = {
        "enabled": ssh(lab, g, "systemctl is-enabled tuned", check=False).strip(),
        "service": ssh(lab, g, "systemctl is-active tuned", check=False).strip(),
        "procs": ssh(lab, g, "pgrep -x tuned", check=False).strip(),
    }
    assert state == {"enabled": "disabled", "service": "inactive", "procs": ""}, state
    cmdline = read(lab, g, "/proc/cmdline")
    assert "isolcpus" not in cmdline and "nohz" not in cmdline, cmdline
    # Debian's /etc/grub.d/00_tuned sets an empty $tuned_params that no linux line uses.
    grub_cfg = read(lab, g, "/boot/grub/grub.cfg")
    assert 'set tuned_params=""' in grub_cfg and "$tuned_params" not in grub_cfg


@pytest.fixture(scope="module")
def rolled_out(lab, tmp_path_factory):
    d = tmp_path_factory.mktemp("vm-rollout-inv")
    hook = d / "hook.sh"
    hook.write_text(HOOK)
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    inv = yaml.safe_load(lab.inventory.read_text())
    inv["all"]["vars"]["hostkit_pre_batch"] = f"{hook} pre {{{{ inventory_hostname }}}}"
    inv["all"]["vars"]["hostkit_post_batch"] = f"{hook} post {{{{ inventory_hostname }}}}"
    for v in inv["all"]["children"]["lab"]["hosts"].values():
        v["hostkit_overrides"] = {
            "reserve_per_node": 1,
            "allow_virtual": True,
            "containerd": {"enabled": False},
            "kubelet": {"enabled": False},
            "smoke": {"target_p999_ms": 1000.0},
        }
    path = d / "inventory.yml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    plans = cli("plan", "-i", path, "--json")
    assert plans.returncode == 0, plans.stderr[-2000:]
    boots = {g: btime(lab, g) for g in GUESTS}
    cmdlines = {g: read(lab, g, "/proc/cmdline") for g in GUESTS}
    t0 = time.monotonic()
    proc = cli(
        "rollout",
        "-i",
        path,
        "--batch",
        "1",
        "--reboot",
        "--reboot-timeout",
        REBOOT_TIMEOUT,
        "--smoke-duration",
        "2",
        "--json",
        timeout=2 * REBOOT_TIMEOUT + 1800,
    )
    print(f"\nrollout (one guest, one reboot) took {time.monotonic() - t0:.0f} s")
    assert proc.returncode == 0, f"rollout failed: {proc.stdout[-3000:]} {proc.stderr[-3000:]}"
    hist = cli("history", "-i", path, "--json")
    assert hist.returncode == 0, hist.stderr[-2000:]
    return {
        "doc": json.loads(proc.stdout),
        "plans": json.loads(plans.stdout)["hosts"],
        "inventory": path,
        "history": json.loads(hist.stdout)["hosts"],
        "boots_before": boots,
        "cmdlines_before": cmdlines,
        "calls": (d / "calls.log").read_text().split("\n")[:-1],
    }


def test_the_batch_goes_out_with_its_hooks_and_passes_its_audit(rolled_out):
    doc = rolled_out["doc"]
    assert doc["status"] == "completed" and [b["hosts"] for b in doc["batches"]] == [GUESTS]
    assert {g: (r["status"], r["audit"]["status"]) for g, r in doc["hosts"].items()} == dict.fromkeys(
        GUESTS, ("done", "pass")
    )
    assert [(e["hosts"], e["status"]) for e in doc["events"] if e["step"] == "wave"] == [
        (["g1"], "started"),
        (["g1"], "done"),
    ]
    assert rolled_out["calls"] == ["pre g1 batch=0", "post g1 batch=0"]


def test_each_guest_booted_its_new_kernel_arguments_once(lab, rolled_out):
    for g in GUESTS:
        booted = read(lab, g, "/proc/cmdline")
        assert booted != rolled_out["cmdlines_before"][g]
        plan = rolled_out["plans"][g]
        assert plan["isolated"] == "1", plan["isolated"]
        for key, value in plan["cmdline_set"].items():
            want = key if value is None else f"{key}={value}"
            assert booted.split().count(want) == 1, (want, booted)
        assert btime(lab, g) > rolled_out["boots_before"][g]


def test_the_guest_rebooted_inside_its_apply_run(lab, rolled_out):
    """The guest's own journal and boot time: the boot it runs now came after its apply run's last
    change (the rollout rebooted it inside the run, after every role, and waited for it to come
    back before the audit)."""
    doc, hist = rolled_out["doc"], rolled_out["history"]
    for g in GUESTS:
        runs = [r for r in hist[g]["runs"] if not r["rolled_back"]]
        assert [r["run_id"] for r in runs] == [doc["hosts"][g]["apply"]["run_id"]]
        assert epoch(runs[0]["started"]) <= epoch(runs[0]["last_change"]) < btime(lab, g), runs[0]


def test_the_reboot_gets_hostkits_irq_pins_back_from_the_boot_unit(lab, rolled_out):
    """hostkit owns this guest's IRQs: irqbalance is installed, but banned from all CPUs but the one IRQ
    CPU it does not stay running here (the VM runs found it inactive after the rollout), the case
    where its IRQBALANCE_BANNED_CPULIST keeps nothing in place. The apply set the pins live and then
    rebooted (the reboot comes after every role): a fresh boot puts every IRQ back on the kernel's
    default affinity, so the pins of this boot come from hostkit-irq-affinity.service: it ran in this
    boot and moved the IRQs of its rules, and each of them is on its rule's CPUs. (The audit passes:
    the rollout's own, in this boot after the reboot, checked by the first test.)"""
    g = "g1"
    irq = rolled_out["plans"][g]["irq"]
    assert irq["owner"] == "hostkit" and irq["by_name"] and irq["irqbalance_config"], irq
    assert btime(lab, g) > rolled_out["boots_before"][g]  # this boot is the rollout's
    print("\n" + ssh(lab, g, "systemctl status --no-pager -n 5 irqbalance", check=False))  # for the record
    state = ssh(lab, g, "systemctl show -p ActiveState -p Result -p ExecMainStatus hostkit-irq-affinity.service")
    assert sorted(state.split()) == ["ActiveState=active", "ExecMainStatus=0", "Result=success"], state
    log = ssh(lab, g, "journalctl -b -o cat -u hostkit-irq-affinity.service")
    moved = [line for line in log.splitlines() if " -> " in line and line.startswith("IRQ ")]
    assert moved and "IRQ(s) moved" in log, log
    live = device_irqs(lab, g)
    named = {n: i for n, i in live.items() if i["name"] in irq["by_name"]}
    assert named, (irq["by_name"], live)
    for n, i in named.items():
        if f"IRQ {n} ({i['name']}): the kernel refuses" in log:
            continue  # managed: the kernel's own placement
        assert parse_cpulist(i["affinity"]) == parse_cpulist(irq["by_name"][i["name"]]), (n, i, log)
