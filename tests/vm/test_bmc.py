"""The `nps` guest behind the lab's BMC: BIOS over Redfish, one power cycle, proven from the booted OS.

The lab BMC (sushy-tools' emulator with hostkit's driver, TLS and basic auth) stands in front of a
QEMU guest of 2 sockets x 2 cores booted NPS1 (one NUMA node per socket), serving an HPE ProLiant
DL385 Gen10 Plus v2's BIOS (AMD: NPS is NumaMemoryDomainsPerSocket). At each power-on the BMC starts
the guest with the topology its BIOS then says. `hostkit bios apply --reboot` asks NPS2 of it (the
host's hostkit_overrides), PATCHes Bios/Settings, power-cycles through ComputerSystem.Reset
(GracefulShutdown: the guest's ACPI power button) and checks the booted guest's facts over SSH;
`hostkit bios rollback --reboot` brings NPS1 back the same way. Two kernel boots in all: each is
what is proven.

What this does not show: the OS tuning planned for the new topology and applied (2 cores per socket
split in 2 nodes leaves one CPU per node, which the planner rightly refuses to isolate), and one
power cycle shared by the BIOS and the kernel arguments (hostkit apply does not drive the BMC yet).
"""

from __future__ import annotations

import json

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


def test_nps2_through_the_bmc_takes_one_power_cycle_and_rollback_brings_nps1_back(lab, tmp_path):
    inv = inventory_for(lab, tmp_path / "inventory.yml", {VM: {"hostkit_overrides": {"bios": {"numa_per_socket": 2}}}})
    assert bios_attr(inv) == ("OneMemoryDomainPerSocket", {})  # the preset boots 1 node per socket
    boots = lab.guest_boots()[VM]

    rc, doc, proc = cli_json("bios", "apply", "-i", str(inv), "--reboot")
    host = doc["hosts"][VM]
    assert rc == 0, json.dumps(host)[-3000:] + proc.stderr[-2000:]
    assert host["cycles"] == 1 and host["plan"]["patch"] == {"NumaMemoryDomainsPerSocket": "TwoMemoryDomainsPerSocket"}
    assert host["os"] == {"checked": True, "numa_per_socket": 2, "threads_per_core": 1}
    assert lab.guest_boots()[VM] == boots + 1  # one power cycle, one kernel boot
    assert os_topology(lab, inv) == {"nodes": 4, "per_socket": 2, "sockets": 2}
    assert bios_attr(inv) == ("TwoMemoryDomainsPerSocket", {})
    print("apply --reboot steps:", [(s["step"], s["seconds"]) for s in host["steps"]], "total", host["seconds"])

    rc, doc, proc = cli_json("bios", "audit", "-i", str(inv))  # in effect, and the OS agrees: no finding
    assert rc == 0 and doc["hosts"][VM]["status"] == "pass", json.dumps(doc["hosts"][VM])[-2000:]
    assert doc["hosts"][VM]["os"] == {"checked": True, "numa_per_socket": 2, "threads_per_core": 1}

    rc, doc, proc = cli_json("bios", "rollback", "-i", str(inv), "--reboot")
    host = doc["hosts"][VM]
    assert rc == 0, json.dumps(host)[-3000:] + proc.stderr[-2000:]
    assert host["restore"] == {"NumaMemoryDomainsPerSocket": "OneMemoryDomainPerSocket"} and host["cycles"] == 1
    assert host["os"] == {"checked": True, "numa_per_socket": 1, "threads_per_core": 1}
    assert lab.guest_boots()[VM] == boots + 2
    print("rollback --reboot steps:", [(s["step"], s["seconds"]) for s in host["steps"]], "total", host["seconds"])
