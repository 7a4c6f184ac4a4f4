"""hostkit rollout on two real-kernel guests (issue 15): `--batch 2 --max-unavailable 1 --reboot`.

Two `small` QEMU guests (2 vCPUs, one NUMA node) form one batch that may have one host out of
service at a time: the rollout takes them out in two waves, g1 then g2. Isolation is on (one
housekeeping CPU), so each guest's plan changes its kernel arguments and the apply reboots it:
one real reboot per guest, the only one (the guests are overlays, thrown away with the lab, so
no rollback reboot is spent on them; rollback with reboot is proven in test_vm_numa2.py). Smoke
runs are 2 s (INCONCLUSIVE, which does not stop a rollout). The apply reboots after every role
(playbooks/apply.yml), so that boot is also the one where hostkit's IRQ boot unit must put the
pins back: IRQ numbers are the previous boot's in the plan, the unit matches them by name.

What proves the order comes from the guests themselves: each guest's hostkit journal (its apply
run's first and last change) and its kernel's boot time (``btime`` in ``/proc/stat``): g1's run
and its reboot are over before g2's run starts, so never more than one guest was out at once.
The hook script records its calls on the controller, in order, with the host names.
"""

from __future__ import annotations

import json
import stat
import time

import pytest
import yaml

from hostkit.agent.cpulist import parse_cpulist
from tests.labutil import cli, cli_json
from tests.test_rollout_lab import epoch
from tests.vmutil import REBOOT_TIMEOUT, device_irqs, read, ssh, vm_lab_fixture

pytestmark = pytest.mark.vm

GUESTS = ["g1", "g2"]
HOOK = """#!/bin/sh
echo "$1 $2 batch=$HOSTKIT_BATCH" >> "$(dirname "$0")/calls.log"
"""


lab = vm_lab_fixture("vm-rollout", [(g, "small") for g in GUESTS])


def btime(lab, host: str) -> int:
    return next(int(line.split()[1]) for line in read(lab, host, "/proc/stat").splitlines()
                if line.startswith("btime "))


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
        v["hostkit_overrides"] = {"reserve_per_node": 1, "allow_virtual": True, "containerd": {"enabled": False},
                                  "kubelet": {"enabled": False}, "smoke": {"target_p999_ms": 1000.0}}
    path = d / "inventory.yml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    plans = cli("plan", "-i", path, "--json")
    assert plans.returncode == 0, plans.stderr[-2000:]
    boots = {g: btime(lab, g) for g in GUESTS}
    cmdlines = {g: read(lab, g, "/proc/cmdline") for g in GUESTS}
    t0 = time.monotonic()
    proc = cli("rollout", "-i", path, "--batch", "2", "--max-unavailable", "1", "--reboot",
               "--reboot-timeout", REBOOT_TIMEOUT, "--smoke-duration", "2", "--json",
               timeout=2 * REBOOT_TIMEOUT + 1800)
    print(f"\nrollout (2 guests, one reboot each) took {time.monotonic() - t0:.0f} s")
    assert proc.returncode == 0, f"rollout failed: {proc.stdout[-3000:]} {proc.stderr[-3000:]}"
    hist = cli("history", "-i", path, "--json")
    assert hist.returncode == 0, hist.stderr[-2000:]
    return {"doc": json.loads(proc.stdout), "plans": json.loads(plans.stdout), "inventory": path, "history": json.loads(hist.stdout), "boots_before": boots,
            "cmdlines_before": cmdlines, "calls": (d / "calls.log").read_text().split("\n")[:-1]}


def test_one_batch_goes_out_one_guest_at_a_time_with_its_hooks(rolled_out):
    doc = rolled_out["doc"]
    assert doc["status"] == "completed" and [b["hosts"] for b in doc["batches"]] == [GUESTS]
    assert {g: (r["status"], r["audit"]["status"]) for g, r in doc["hosts"].items()} == \
        {g: ("done", "pass") for g in GUESTS}
    assert [(e["hosts"], e["status"]) for e in doc["events"] if e["step"] == "wave"] == \
        [(["g1"], "started"), (["g1"], "done"), (["g2"], "started"), (["g2"], "done")]
    assert rolled_out["calls"] == ["pre g1 batch=0", "post g1 batch=0", "pre g2 batch=0", "post g2 batch=0"]


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


def test_the_guests_journals_and_boot_times_show_g2_went_out_after_g1_was_back(lab, rolled_out):
    doc, hist = rolled_out["doc"], rolled_out["history"]
    runs = {g: [r for r in hist[g]["runs"] if not r["rolled_back"]] for g in GUESTS}
    assert {g: [r["run_id"] for r in runs[g]] for g in GUESTS} == \
        {g: [doc["hosts"][g]["apply"]["run_id"]] for g in GUESTS}
    assert len({doc["hosts"][g]["apply"]["run_id"] for g in GUESTS}) == 2  # one apply run per wave
    span = {g: (epoch(runs[g][0]["started"]), epoch(runs[g][0]["last_change"])) for g in GUESTS}
    boot = {g: btime(lab, g) for g in GUESTS}
    # each guest rebooted inside its own apply run ...
    assert all(span[g][0] < boot[g] for g in GUESTS), (span, boot)
    # ... and g2's run began after g1's run and g1's reboot were over
    assert span["g1"][1] < span["g2"][0] and boot["g1"] < span["g2"][0], (span, boot)


def test_the_reboot_gets_hostkits_irq_pins_back_from_the_boot_unit(lab, rolled_out):
    """hostkit owns this guest's IRQs: irqbalance is installed, but banned from all CPUs but the one IRQ
    CPU it does not stay running here (the VM runs found it inactive after the rollout), the case
    where its IRQBALANCE_BANNED_CPULIST keeps nothing in place. The apply set the pins live and then
    rebooted (the reboot comes after every role): a fresh boot puts every IRQ back on the kernel's
    default affinity, so the pins of this boot come from hostkit-irq-affinity.service: it ran in this
    boot and moved the IRQs of its rules, each of them is on its rule's CPUs, and the audit passes."""
    g = "g2"
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
    rc, doc, proc = cli_json("audit", "-i", rolled_out["inventory"], "--limit", g)
    assert rc == 0 and doc["hosts"][g]["status"] == "pass", json.dumps(doc)[-3000:]
