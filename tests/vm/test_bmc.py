"""The `nps` guest behind the lab's BMC: BIOS over Redfish through `hostkit apply --reboot`, one
power cycle, the OS plan made for the topology the guest booted with, proven from the booted OS.

The lab BMC (sushy-tools' emulator with hostkit's driver, TLS and basic auth) stands in front of a
QEMU guest of 2 sockets x 2 cores booted NPS1 (one NUMA node per socket), serving an HPE ProLiant
DL385 Gen10 Plus v2's BIOS (AMD: NPS is NumaMemoryDomainsPerSocket). At each power-on the BMC starts
the guest with the topology its BIOS then says. `hostkit apply --reboot` (the virtual-guest profile,
NPS2 from the host's hostkit_overrides) PATCHes Bios/Settings, power-cycles through
ComputerSystem.Reset (GracefulShutdown: the guest's ACPI power button), then gathers the booted
guest's facts, checks them against the BIOS and against the plan it applied before the cycle, made
for the 4 nodes it predicted, and applies what differs (nothing); `hostkit audit`
reads the BIOS and the OS and finds nothing; `hostkit rollback --reboot` restores the OS journal and
the BIOS with one power cycle, and NPS1 is back. Two kernel boots in all: each is what is proven.

What this does not show: CPU isolation planned for the new topology (2 cores per socket split in 2
nodes leaves one CPU per node, and a VM is not isolated without --force), so no kernel arguments
change here. The one power cycle a BIOS change and new kernel arguments share is numa2's
(tests/vm/test_numa2.py).
"""

from __future__ import annotations

import json
import time

from tests.labutil import cli_json
from tests.vmutil import inventory_for, vm_lab_fixture

VM = "g1"

lab = vm_lab_fixture("vm-bmc", [(VM, "nps")], bmc=True)


def os_topology(lab, inv) -> dict:
    rc, doc, proc = cli_json("facts", "-i", str(inv), "--limit", VM)
    assert rc == 0, proc.stderr
    topo = doc["hosts"][VM]["facts"]["topology"]
    return {"nodes": len(topo["numa_nodes"]), "per_socket": topo["numa_per_socket"], "sockets": topo["sockets"]}


def bios_attr(inv) -> tuple[str, dict]:
    rc, doc, proc = cli_json("bios", "facts", "-i", str(inv))
    assert rc == 0, proc.stderr
    b = doc["hosts"][VM]["bios"]
    return b["attributes"]["NumaMemoryDomainsPerSocket"], b["pending"]


def test_apply_reboot_sets_nps2_in_one_power_cycle_audit_is_clean_and_rollback_brings_nps1_back(lab, tmp_path):
    inv = inventory_for(
        lab,
        tmp_path / "inventory.yml",
        {VM: {"hostkit_profile": "virtual-guest", "hostkit_overrides": {"bios": {"numa_per_socket": 2}}}},
    )
    assert bios_attr(inv) == ("OneMemoryDomainPerSocket", {})  # the preset boots 1 node per socket
    boots = lab.guest_boots()[VM]

    t0 = time.monotonic()
    rc, doc, proc = cli_json("apply", "-i", str(inv), "--reboot")
    host = doc["hosts"][VM]
    assert rc == 0, json.dumps(host)[-3000:] + proc.stderr[-2000:]
    bios = host["bios"]
    assert bios["cycles"] == 1 and bios["pending"] == {"NumaMemoryDomainsPerSocket": "TwoMemoryDomainsPerSocket"}
    assert lab.guest_boots()[VM] == boots + 1  # one power cycle, one kernel boot: no OS reboot after it
    # the OS was planned for the 4 nodes before the cycle (each socket's cores split in order) and
    # applied; the booted guest's plan, made again after the cycle, is that one
    after = host["after_bios"]
    assert after["predicted"] is True and after["numa_nodes"] == 4, after
    assert after["prediction"] == {"held": True, "misses": []}, after
    print(
        f"\napply --reboot: {time.monotonic() - t0:.0f} s; BMC steps",
        [(s["step"], s["seconds"]) for s in bios["steps"]],
    )
    assert os_topology(lab, inv) == {"nodes": 4, "per_socket": 2, "sockets": 2}
    assert bios_attr(inv) == ("TwoMemoryDomainsPerSocket", {})

    rc, doc, proc = cli_json("plan", "-i", str(inv))  # what apply planned: the 4 nodes the guest booted with
    assert rc == 0, proc.stderr
    assert len(doc["hosts"][VM]["nodes"]) == 4

    t0 = time.monotonic()
    rc, doc, proc = cli_json("audit", "-i", str(inv))  # the OS as planned, the BIOS in effect, and they agree
    audit = doc["hosts"][VM]
    assert rc == 0 and audit["status"] == "pass", json.dumps(audit)[-3000:]
    found = {f["check"]: f["status"] for f in audit["findings"] if f["check"].startswith("bios.")}
    assert found == {"bios.numa_per_socket": "pass", "bios.cross_layer": "pass"}
    print(f"audit: {time.monotonic() - t0:.0f} s")

    t0 = time.monotonic()
    rc, doc, proc = cli_json("rollback", "-i", str(inv), "--reboot")
    assert rc == 0, json.dumps(doc)[-3000:] + proc.stderr[-2000:]
    bios = doc["bios"][VM]
    assert bios["restore"] == {"NumaMemoryDomainsPerSocket": "OneMemoryDomainPerSocket"} and bios["cycles"] == 1
    assert bios["os"] == {"checked": True, "numa_per_socket": 1, "threads_per_core": 1}
    assert lab.guest_boots()[VM] == boots + 2  # the BIOS's power cycle is the rollback's only boot
    print(
        f"rollback --reboot: {time.monotonic() - t0:.0f} s; BMC steps",
        [(s["step"], s["seconds"]) for s in bios["steps"]],
    )
    assert os_topology(lab, inv) == {"nodes": 2, "per_socket": 1, "sockets": 2}
