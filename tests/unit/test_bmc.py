"""BIOS over Redfish against a real Redfish service: sushy-tools' emulator with hostkit's lab driver
(hostkit/lab/bmc), TLS with a self-signed certificate and basic authentication, serving four vendor
fixtures copied from real BMCs' mockups. hostkit talks to it through sushy, as to a real BMC.

The plan's rules (states, refusals, the topology after the cycle) are tested on facts dicts below
the BMC; the rest goes through `hostkit bios` and the emulator. What the lab BMC cannot show: a real
server's firmware applying NPS at POST. A booted OS's view of it is the VM suite's
(tests/vm/test_bmc.py: the lab BMC restarts its guest with the topology its BIOS says).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hostkit.bmc import apply as bmc_apply
from hostkit.bmc import facts as bmc_facts
from hostkit.bmc import plan as bmc_plan
from hostkit.bmc.client import BmcError, bmc_settings, connect
from hostkit.errors import BadInput
from hostkit.lab import bmc as lab_bmc

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
VENDORS = {"dell": "dell-r750", "hpe": "hpe-dl385-gen10plus-v2", "lenovo": "lenovo-sr670-v2"}


@pytest.fixture(scope="module")
def bmc(tmp_path_factory):
    """One BMC for three systems (their registries' names differ); Supermicro's names its registry
    as Lenovo's does, so it has a BMC of its own, as each server has in a rack."""
    b = lab_bmc.start(VENDORS, tmp_path_factory.mktemp("bmc"))
    smc = lab_bmc.start({"smc": "supermicro-sys-821ge-tnhr"}, tmp_path_factory.mktemp("smc"))
    b.systems["smc"] = smc.systems["smc"]
    b.extra["smc"] = smc
    yield b
    smc.stop()
    b.stop()


def host_var(bmc, host) -> dict:
    return (bmc.extra.get(host) or bmc).host_var(host)


def facts_of(bmc, host) -> dict:
    return bmc_facts.gather(connect(bmc_settings(host, host_var(bmc, host))))


def withdraw_pending(bmc, host, before: dict) -> None:
    """What a test left pending in ``host``'s Bios/Settings, PATCHed back to ``before``'s values:
    the other tests find the BIOS as the mockup has it."""
    m = connect(bmc_settings(host, host_var(bmc, host)))
    bmc_apply.patch(m, {k: before["attributes"][k] for k in bmc_facts.gather(m)["pending"]}, [])


def hostkit(*args, cwd, env=None):
    return subprocess.run(
        [sys.executable, "-m", "hostkit.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def inventory(tmp_path, hosts: dict[str, dict], **extra_vars) -> str:
    doc = {
        "all": {"hosts": {h: {"ansible_host": "127.0.0.1", "hostkit_bmc": v, **extra_vars} for h, v in hosts.items()}}
    }
    p = tmp_path / "inventory.yml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


# ----------------------------------------------------------------------------- facts and maps


def test_facts_read_vendor_bios_registry_processors_and_memory(bmc):
    f = facts_of(bmc, "hpe")
    assert (f["vendor"], f["model"]) == ("HPE", "ProLiant DL385 Gen10 Plus v2")
    assert f["bios_version"] == "A42 v2.60 (08/11/2022)"
    assert f["attributes"]["NumaMemoryDomainsPerSocket"] == "Auto"
    assert f["pending"] == {}
    assert f["registry"]["NumaMemoryDomainsPerSocket"]["values"] == [
        "OneMemoryDomainPerSocket",
        "TwoMemoryDomainsPerSocket",
        "FourMemoryDomainsPerSocket",
        "Auto",
    ]
    p = f["processors"]
    assert (p["sockets"], p["cpu_vendor"], p["cores_per_socket"], p["threads_per_core"]) == (2, "amd", 64, 2)
    assert f["memory"] == {
        "0": {"channels": 8, "populated_channels": 8, "slots": 8},
        "1": {"channels": 8, "populated_channels": 8, "slots": 8},
    }


# Every intent but power_profile, which test_the_power_profile_unlocks_what_its_preset_locks adds.
WANT_ALL = {
    "numa_per_socket": 2,
    "smt": False,
    "c_states": "off",
    "turbo": False,
    "memory_interleave": False,
    "pcie_aspm": "off",
}
# What each fixture's BIOS holds already of WANT_ALL: nothing to write, so no step to refuse either
IN_EFFECT = {
    "dell": ["ProcCStates", "NodeInterleave", "PcieAspmL1"],  # the R750 mockup runs SysProfile PerfOptimized
    "hpe": ["PciSlot10Aspm", "PciSlot1Aspm", "PciSlot2Aspm", "PciSlot4Aspm", "PciSlot5Aspm"],  # ASPM per slot
    "lenovo": ["Memory_SocketInterleave", "Power_ASPM"],
    "smc": ["NUMA_003B", "PCIeASPMSupport_Global__00A6"],
}


@pytest.mark.parametrize(
    ("host", "patch", "refused"),
    [
        (
            "dell",
            {"SubNumaCluster": "2-Way", "LogicalProc": "Disabled"},
            # the R750's registry: turbo is read-only unless SysProfile is Custom (its Dependencies)
            ["bios.turbo=False: ProcTurboMode is read-only while SysProfile is PerfOptimized"],
        ),
        (
            "hpe",
            {"NumaMemoryDomainsPerSocket": "TwoMemoryDomainsPerSocket", "ProcSMT": "Disabled"},
            [
                # the A42 registry (AMD) has no node interleaving: the map names none, refused by name
                "bios.memory_interleave=False: HPE ProLiant (iLO 5/6) has no attribute for it on amd CPUs",
                # greyed out by the WorkloadProfile preset the mockup runs
                "bios.c_states=off: MinProcIdlePower is read-only while WorkloadProfile is GeneralPowerEfficientCompute",
                "bios.turbo=False: ProcAMDBoost is read-only while WorkloadProfile is GeneralPowerEfficientCompute",
            ],
        ),
        (
            "lenovo",
            {"Processors_SNC": "Enabled", "Processors_HyperThreading": "Disabled"},
            [
                "bios.c_states=off: Processors_CStates is greyed out while OperatingModes_ChooseOperatingMode is "
                "Efficiency_FavorPerformance",
                "bios.turbo=False: Processors_TurboMode is greyed out while OperatingModes_ChooseOperatingMode is "
                "Efficiency_FavorPerformance",
            ],
        ),
        (
            "smc",
            {"SNC_F300": "2", "Hyper_Threading_ALL__F27F": "1", "TurboMode_3D06": "0"},
            ["bios.c_states=off: Supermicro (AMI BIOS, Intel) has no attribute for it on intel CPUs"],
        ),
    ],
)
def test_each_vendor_maps_every_intent_or_refuses_it_by_name(bmc, host, patch, refused):
    plan = bmc_plan.plan_bios(WANT_ALL, facts_of(bmc, host))
    assert plan["patch"] == patch
    assert len(plan["refused"]) == len(refused), plan["refused"]
    for line, words in zip(plan["refused"], refused, strict=True):
        assert line.startswith(words), line
        # a lock names the intent that unlocks it in the same PATCH
        assert ("(set bios.power_profile=custom with it)" in line) == ("while" in line), line
    assert [s["attribute"] for s in plan["steps"] if s["state"] == "ok"] == IN_EFFECT[host]
    assert plan["after_cycle"]["numa_nodes"] == 4 and plan["after_cycle"]["threads_per_core"] == 1


@pytest.mark.parametrize(
    ("host", "preset", "refused"),
    [
        ("dell", {"SysProfile": "Custom", "ProcTurboMode": "Disabled"}, []),
        (
            "hpe",
            {"WorkloadProfile": "Custom", "MinProcIdlePower": "NoCStates", "ProcAMDBoost": "Disabled"},
            ["bios.memory_interleave=False: HPE ProLiant (iLO 5/6) has no attribute for it on amd CPUs"],
        ),
        (
            "lenovo",
            {
                "OperatingModes_ChooseOperatingMode": "CustomMode",
                "Processors_CStates": "Disabled",
                "Processors_TurboMode": "Disabled",
            },
            [],
        ),
        (
            "smc",
            {},
            [
                "bios.c_states=off: Supermicro (AMI BIOS, Intel) has no attribute for it on intel CPUs",
                # no system power preset on that board (its PowerTechnology only gates the EPB settings)
                "bios.power_profile=custom: Supermicro (AMI BIOS, Intel) has no attribute for it on intel CPUs",
            ],
        ),
    ],
)
def test_the_power_profile_unlocks_what_its_preset_locks(bmc, host, preset, refused):
    """power_profile custom in the same PATCH: the locked settings are the BMC's to take, and the
    BMC (its registry's Dependencies, judged on the BIOS after the PATCH) takes them."""
    plan = bmc_plan.plan_bios({**WANT_ALL, "power_profile": "custom"}, facts_of(bmc, host))
    assert plan["refused"] == refused
    assert {k: v for k, v in plan["patch"].items() if k in preset} == preset
    if preset:  # what the real BMC would take: the lab BMC checks the same locks, and accepts it
        m = connect(bmc_settings(host, host_var(bmc, host)))
        before = bmc_facts.gather(m)
        bmc_apply.patch(m, plan["patch"], [])
        try:
            assert bmc_facts.gather(m)["pending"] == plan["patch"]
        finally:  # withdrawn: the other tests find the BIOS as the mockup has it
            bmc_apply.patch(m, {k: before["attributes"][k] for k in plan["patch"]}, [])


def test_a_preset_and_a_setting_it_locks_roll_back_in_one_cycle(bmc, tmp_path):
    """HPE: the Custom workload profile and the C-states it unlocks, applied with a power cycle; their
    rollback puts back a profile that locks the C-states setting, so one PATCH of both is rejected
    by the BMC. hostkit PATCHes the setting first, while it is unlocked, then the profile: one
    cycle, both back."""
    before = facts_of(bmc, "hpe")["attributes"]
    inv = inventory(
        tmp_path,
        {"hpe": host_var(bmc, "hpe")},
        hostkit_overrides={"bios": {"power_profile": "custom", "c_states": "off"}},
    )
    proc = hostkit("bios", "apply", "-i", inv, "--reboot", "--no-os-check", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    now = facts_of(bmc, "hpe")["attributes"]
    assert (now["WorkloadProfile"], now["MinProcIdlePower"]) == ("Custom", "NoCStates")
    proc = hostkit("bios", "rollback", "-i", inv, "--reboot", "--no-os-check", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(proc.stdout)["hosts"]["hpe"]
    assert doc["cycles"] == 1 and doc["restore"] == {
        "WorkloadProfile": before["WorkloadProfile"],
        "MinProcIdlePower": "C6",
        "NumaMemoryDomainsPerSocket": "Auto",  # the shipped profile's numa_per_socket: 1, applied beside them
    }
    assert facts_of(bmc, "hpe")["attributes"] == before
    assert doc["requests"]["PATCH"] == 2  # the setting while unlocked, then the profile


def test_a_locked_attribute_is_refused_by_the_bmc_too(bmc):
    """The lab BMC (a real BMC's rule) rejects what the plan refuses: a PATCH of a setting its
    preset locks, with the DMTF Base registry's message."""
    m = connect(bmc_settings("dell", host_var(bmc, "dell")))
    with pytest.raises(BmcError, match="ProcTurboMode is a read only property"):
        bmc_apply.patch(m, {"ProcTurboMode": "Disabled"}, [])
    assert bmc_facts.gather(m)["pending"] == {}


def test_values_a_registry_forbids_are_refused(bmc):
    dell = bmc_plan.plan_bios({"numa_per_socket": 4}, facts_of(bmc, "dell"))
    assert dell["refused"] == ["bios.numa_per_socket=4: Dell PowerEdge (iDRAC 9) (SubNumaCluster) takes 1, 2"]
    hpe = bmc_plan.plan_bios({"c_states": "shallow"}, facts_of(bmc, "hpe"))  # C1 is iLO 6's, not this A42 BIOS's
    assert hpe["refused"] == [
        "bios.c_states=shallow: MinProcIdlePower=C1 is not allowed by the BMC's registry (allowed: C6, NoCStates)"
    ]
    assert dell["patch"] == {} and hpe["patch"] == {}


# ----------------------------------------------------------------------------- plan rules, below the BMC


def fake_facts(current: dict, pending: dict | None = None, registry=None) -> dict:
    return {
        "vendor": "HPE",
        "attributes": current,
        "pending": pending or {},
        "registry": registry,
        "processors": {"sockets": 2, "cpu_vendor": "amd"},
    }


def test_a_setting_already_pending_is_pending_not_changed_and_in_effect_is_ok():
    want = {"numa_per_socket": 2, "smt": True}
    cur = {"NumaMemoryDomainsPerSocket": "OneMemoryDomainPerSocket", "ProcSMT": "Enabled"}
    plan = bmc_plan.plan_bios(want, fake_facts(cur, {"NumaMemoryDomainsPerSocket": "TwoMemoryDomainsPerSocket"}))
    assert [(s["intent"], s["state"]) for s in plan["steps"]] == [("numa_per_socket", "pending"), ("smt", "ok")]
    assert plan["patch"] == {}
    # something else pending for a wanted attribute is a change again
    plan = bmc_plan.plan_bios(want, fake_facts(cur, {"ProcSMT": "Disabled"}))
    assert plan["patch"] == {"NumaMemoryDomainsPerSocket": "TwoMemoryDomainsPerSocket", "ProcSMT": "Enabled"}


def test_without_a_registry_an_attribute_the_bmc_lacks_is_refused():
    plan = bmc_plan.plan_bios({"smt": False}, fake_facts({"Other": "x"}))
    assert plan["refused"] == ["bios.smt=False: the BMC has no attribute ProcSMT (and offers no registry)"]


def test_the_topology_after_the_cycle_comes_from_the_plan_and_the_bios_now():
    cur = {"NumaMemoryDomainsPerSocket": "FourMemoryDomainsPerSocket", "ProcSMT": "Disabled"}
    plan = bmc_plan.plan_bios({}, fake_facts(cur))
    assert plan["after_cycle"] == {"sockets": 2, "numa_per_socket": 4, "numa_nodes": 8, "threads_per_core": 1}
    plan = bmc_plan.plan_bios({"smt": True}, fake_facts(cur))
    assert plan["after_cycle"]["threads_per_core"] == 2


def test_a_booted_os_that_disagrees_with_the_bios_is_a_cross_layer_mismatch():
    after = {"sockets": 2, "numa_per_socket": 4, "numa_nodes": 8, "threads_per_core": 1}
    assert bmc_plan.cross_layer(after, {"numa_per_socket": 4, "threads_per_core": 1}) == []
    assert bmc_plan.cross_layer(after, {"numa_per_socket": 1, "threads_per_core": 2}) == [
        "cross-layer mismatch: the BIOS says 4 NUMA node(s) per socket, the booted OS shows 1",
        "cross-layer mismatch: the BIOS says 1 thread(s) per core, the booted OS shows 2",
    ]


def test_the_audit_tells_drift_pending_and_a_cross_layer_mismatch_apart():
    cur = {"NumaMemoryDomainsPerSocket": "OneMemoryDomainPerSocket", "ProcSMT": "Enabled"}
    facts = fake_facts(cur, {"ProcSMT": "Disabled"})
    plan = bmc_plan.plan_bios({"numa_per_socket": 2, "smt": False}, facts)
    in_effect = bmc_plan.plan_bios({}, {**facts, "pending": {}})["after_cycle"]
    found = bmc_plan.findings(plan, in_effect, {"numa_per_socket": 2, "threads_per_core": 2})
    assert [(f["kind"], f["attribute"]) for f in found] == [
        ("drift", "NumaMemoryDomainsPerSocket"),
        ("pending", "ProcSMT"),
        ("cross-layer", None),  # the BIOS in effect says 1 node per socket, the OS shows 2
    ]
    assert found[2]["line"] == "cross-layer mismatch: the BIOS says 1 NUMA node(s) per socket, the booted OS shows 2"


def test_the_bmcs_memory_channels_are_checked_against_the_os_smbios_view():
    bmc = {
        "1": {"channels": 12, "populated_channels": 12, "slots": 12},
        "2": {"channels": 12, "populated_channels": 12, "slots": 12},
    }
    os_view = {
        "channels": {"0": {"total": 12, "populated": list(range(4))}, "1": {"total": 12, "populated": list(range(12))}}
    }
    assert bmc_facts.memory_cross_check(bmc, os_view) == [
        "socket 0: the BMC counts 12 populated memory channel(s), the OS's SMBIOS table 4"
    ]
    assert bmc_facts.memory_cross_check(bmc, {"channels": None}) == []
    assert bmc_facts.memory_cross_check(bmc, {"channels": {"0": {"total": 12, "populated": [0]}}}) == [
        "the BMC lists memory on 2 socket(s), the OS's SMBIOS table on 1"
    ]


def test_an_ami_code_matches_the_display_string_its_bios_reports():
    facts = {
        "vendor": "Supermicro",
        "attributes": {"Hyper_Threading_ALL__F27F": "Enable"},
        "pending": {},
        "registry": None,
        "processors": {"sockets": 2, "cpu_vendor": "intel"},
    }
    plan = bmc_plan.plan_bios({"smt": True}, facts)
    assert plan["steps"][0]["state"] == "ok" and plan["after_cycle"]["threads_per_core"] == 2


def test_the_bios_journal_keeps_each_attribute_s_first_value_and_the_run_that_changed_it():
    """Below the BMC: a second run never loses the first value; a run's rollback restores what that
    run changed first, and forgets only that; the journal goes with its last entry."""
    bmc_apply.write_journal("h", "https://bmc", {"A": "a0", "B": "b0"}, "run1")
    bmc_apply.write_journal("h", "https://bmc", {"A": "a1", "C": "c0"}, "run2")  # A: run1's value stays
    assert bmc_apply.journaled("h") == {"A": "a0", "B": "b0", "C": "c0"}
    assert bmc_apply.journaled("h", "run2") == {"C": "c0"}
    current = {"A": "x", "B": "b0", "C": "y"}  # B is back already
    assert bmc_apply.rollback_patch("h", current, {}, "run1") == {"A": "a0"}
    assert bmc_apply.rollback_patch("h", current, {}) == {"A": "a0", "C": "c0"}
    bmc_apply.forget("h", "run2")
    assert bmc_apply.journaled("h") == {"A": "a0", "B": "b0"}
    bmc_apply.forget("h", "run1")
    assert bmc_apply.read_journal("h") is None
    bmc_apply.write_journal("h", "https://bmc", {"A": "a0"})  # hostkit bios apply: no run
    assert bmc_apply.journaled("h", "run1") == {} and bmc_apply.journaled("h") == {"A": "a0"}


def test_an_unknown_manufacturer_is_bad_input_naming_the_known_ones():
    with pytest.raises(BadInput, match="no vendor map for manufacturer 'Contoso'.*Dell Inc."):
        bmc_plan.plan_bios({"smt": True}, {**fake_facts({}), "vendor": "Contoso"})


# ----------------------------------------------------------------------------- apply, cycle, rollback


def test_apply_is_pending_until_the_cycle_then_in_effect_and_rollback_restores_it(bmc, tmp_path):
    before = facts_of(bmc, "hpe")["attributes"]
    inv = inventory(tmp_path, {"hpe": bmc.host_var("hpe")}, hostkit_overrides={"bios": {"numa_per_socket": 2}})

    proc = hostkit("bios", "facts", "-i", inv, "--limit", "hpe", "-v", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "hpe: HPE ProLiant DL385 Gen10 Plus v2, BIOS A42 v2.60 (08/11/2022)" in proc.stdout
    assert "socket 0: 8/8 memory channels populated" in proc.stdout
    assert "/BIOS/Settings" in proc.stderr  # -v: sushy's log of each request, without the password
    assert bmc.password not in proc.stdout + proc.stderr

    proc = hostkit("bios", "plan", "-i", inv, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    steps = json.loads(proc.stdout)["hosts"]["hpe"]["plan"]["steps"]
    assert [(s["attribute"], s["current"], s["value"], s["state"]) for s in steps] == [
        ("NumaMemoryDomainsPerSocket", "Auto", "TwoMemoryDomainsPerSocket", "change")
    ]

    proc = hostkit("bios", "audit", "-i", inv, "--no-os-check", "--json", cwd=tmp_path)
    assert proc.returncode == 1  # the BIOS does not hold what the plan wants: drift
    doc = json.loads(proc.stdout)["hosts"]["hpe"]
    assert doc["status"] == "drift" and [f["kind"] for f in doc["findings"]] == ["drift"]
    assert doc["os"] == {"checked": False, "why": "--no-os-check"}

    proc = hostkit("bios", "apply", "-i", inv, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["hosts"]["hpe"]
    assert doc["cycles"] == 0 and doc["requests"]["PATCH"] == 1

    proc = hostkit("bios", "audit", "-i", inv, "--no-os-check", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr  # pending is not drift
    assert "PENDING: NumaMemoryDomainsPerSocket is Auto, TwoMemoryDomainsPerSocket pending" in proc.stdout
    live = facts_of(bmc, "hpe")
    assert live["attributes"] == before  # not in effect before a reset
    assert live["pending"] == {"NumaMemoryDomainsPerSocket": "TwoMemoryDomainsPerSocket"}
    journal = json.loads((tmp_path / ".hostkit" / "bios" / "hpe.json").read_text())
    assert journal["attributes"] == {"NumaMemoryDomainsPerSocket": "Auto"}
    assert bmc.password not in json.dumps(journal) and bmc.password not in proc.stdout + proc.stderr

    proc = hostkit("bios", "apply", "-i", inv, "--json", cwd=tmp_path)  # again: pending, no PATCH
    doc = json.loads(proc.stdout)["hosts"]["hpe"]
    assert [s["state"] for s in doc["plan"]["steps"]] == ["pending"] and "PATCH" not in doc["requests"]

    proc = hostkit("bios", "apply", "-i", inv, "--reboot", "--no-os-check", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "power cycles: 1" in proc.stdout and "graceful shutdown" in proc.stdout
    live = facts_of(bmc, "hpe")
    assert live["attributes"]["NumaMemoryDomainsPerSocket"] == "TwoMemoryDomainsPerSocket" and live["pending"] == {}

    proc = hostkit("bios", "apply", "-i", inv, "--json", cwd=tmp_path)  # in effect now: ok, nothing to do
    assert [s["state"] for s in json.loads(proc.stdout)["hosts"]["hpe"]["plan"]["steps"]] == ["ok"]

    proc = hostkit("bios", "rollback", "-i", inv, "--reboot", "--no-os-check", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["hosts"]["hpe"]
    assert doc["restore"] == {"NumaMemoryDomainsPerSocket": "Auto"} and doc["cycles"] == 1
    assert facts_of(bmc, "hpe")["attributes"] == before
    assert not (tmp_path / ".hostkit" / "bios" / "hpe.json").exists()


def test_a_bmc_that_accepts_settings_and_never_applies_them_is_named_and_rolled_back(tmp_path):
    b = lab_bmc.start({"stuck": "lenovo-sr670-v2"}, tmp_path / "bmc", applies_settings={"stuck": False})
    try:
        inv = inventory(tmp_path, {"stuck": b.host_var("stuck")}, hostkit_overrides={"bios": {"smt": False}})
        proc = hostkit("bios", "apply", "-i", inv, "--reboot", "--no-os-check", cwd=tmp_path)
        assert proc.returncode == 1
        assert (
            "the BMC accepted the settings but did not apply them at the power cycle: "
            "Processors_HyperThreading is 'Enabled', wanted 'Disabled'" in proc.stderr
        )
        assert (tmp_path / ".hostkit" / "bios" / "stuck.json").exists()
        proc = hostkit("bios", "rollback", "-i", inv, "--json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        f = bmc_facts.gather(connect(bmc_settings("stuck", b.host_var("stuck"))))
        assert f["attributes"]["Processors_HyperThreading"] == "Enabled" and f["pending"] == {}
    finally:
        b.stop()


# ----------------------------------------------------------------------------- bad BMCs


def test_bad_bmcs_are_one_line_each_and_change_nothing(bmc, tmp_path):
    before = facts_of(bmc, "dell")
    good = bmc.host_var("dell")
    wrong = "not-" + bmc.password
    cases = {
        "wrong credentials": ({**good, "password": wrong}, "refused the credentials of 'hostkit' (HTTP 401)"),
        "no CA for the self-signed certificate": (
            {k: v for k, v in good.items() if k != "ca_file"},
            "TLS verification of https://127.0.0.1:",
        ),
        "nothing listening": ({**good, "address": "https://127.0.0.1:9"}, "is unreachable"),
    }
    for name, (var, words) in cases.items():
        inv = inventory(tmp_path, {"dell": var}, hostkit_overrides={"bios": {"smt": False}})
        proc = hostkit("bios", "apply", "-i", inv, "--reboot", "--no-os-check", cwd=tmp_path)
        assert proc.returncode == 1, name
        errors = [line for line in proc.stderr.splitlines() if "FAILED" in line]
        assert len(errors) == 1 and words in errors[0], (name, proc.stderr)
        assert wrong not in proc.stdout + proc.stderr and bmc.password not in proc.stdout + proc.stderr
    after = facts_of(bmc, "dell")
    assert (after["attributes"], after["pending"]) == (before["attributes"], before["pending"])
    assert not (tmp_path / ".hostkit" / "bios").exists()


def test_a_slow_bmc_is_a_named_timeout(tmp_path):
    b = lab_bmc.start({"slow": "dell-r750"}, tmp_path / "bmc", delay_s=3)
    try:
        inv = inventory(tmp_path, {"slow": {**b.host_var("slow"), "timeout": 1}})
        proc = hostkit("bios", "facts", "-i", inv, cwd=tmp_path)
        assert proc.returncode == 1
        assert "did not answer within 1 s" in proc.stderr, proc.stderr
    finally:
        b.stop()


def test_a_patch_the_bmc_rejects_shows_the_bmcs_message(bmc):
    """What community.general.redfish_config skips with a warning, a real BMC rejects: the
    emulator's lab driver answers as the DMTF Base registry words it, and hostkit shows it."""
    m = connect(bmc_settings("dell", bmc.host_var("dell")))
    with pytest.raises(BmcError) as exc:
        bmc_apply.patch(m, {"NoSuchAttribute": "Enabled"}, [])
    assert "HTTP 400: The property NoSuchAttribute is not in the list of valid properties for the resource." in str(
        exc.value
    )
    assert facts_of(bmc, "dell")["pending"] == {}


def test_bad_hostkit_bmc_is_bad_input_before_any_bmc_is_contacted(tmp_path, monkeypatch):
    with pytest.raises(BadInput, match="hostkit_bmc: no password"):
        bmc_settings("h", {"address": "bmc.example", "username": "root"})
    with pytest.raises(BadInput, match="password_env names HK_NO_SUCH_VAR, which is not set"):
        bmc_settings("h", {"address": "bmc.example", "username": "root", "password_env": "HK_NO_SUCH_VAR"})
    with pytest.raises(BadInput, match=r"hostkit_bmc.password must be text, got int$"):
        bmc_settings("h", {"address": "bmc.example", "username": "root", "password": 424242})
    with pytest.raises(BadInput, match="unknown key 'pasword'"):
        bmc_settings("h", {"address": "bmc.example", "username": "root", "pasword": "x"})
    monkeypatch.setenv("HK_BMC_PW", "s3cret")
    s = bmc_settings("h", {"address": "bmc.example", "username": "root", "password_env": "HK_BMC_PW"})
    assert s.url == "https://bmc.example" and s.password == "s3cret" and "s3cret" not in repr(s)
    inv = inventory(tmp_path, {"h": {"address": "bmc.example", "username": "root"}})
    proc = hostkit("bios", "facts", "-i", inv, cwd=tmp_path)
    assert proc.returncode == 2 and "no password" in proc.stderr


# ----------------------------------------------------------------------------- the Ansible face


def sysroot_host(bmc, tmp_path, **host_vars) -> tuple[Path, Path]:
    """This machine through a local connection as the lab BMC's ``hpe`` host, its facts and its
    apply in a fresh EPYC 9634 fixture's sysroot: the sysroot and an inventory with ``host_vars``."""
    from hostkit.lab.fixtures import materialize

    root = materialize("epyc-9634-nps1", tmp_path / "root")
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "hostkit_sysroot": str(root),
        "hostkit_bmc": host_var(bmc, "hpe"),
        **host_vars,
    }
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": {"hpe": host}}}))
    return root, inv


def collection_rollout(inv: Path, tmp_path) -> subprocess.CompletedProcess:
    """The collection's rollout playbook over ``inv``, as an operator runs it."""
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inv), "hostkit.tuning.rollout"],
        cwd=tmp_path,
        env=collection_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )


def collection_env(tmp_path) -> dict[str, str]:
    """ansible-playbook's environment for the checkout's collection view, as hostkit's own runs have it."""
    from hostkit.ansible import settings as st

    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        {
            k: v
            for k, v in st.runner_env(REPO, str(tmp_path / "cp"), operator=st.OperatorSettings(None)).items()
            if k in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_MODULE_UTILS")
        },
        ANSIBLE_NOCOLOR="1",
        HOSTKIT_STATE_DIR=str(tmp_path / "state"),
    )
    return env


def test_the_collections_bios_modules_and_the_tune_roles_bios_step(bmc, tmp_path):
    """ansible-playbook against the same BMC, through the checkout's collection view as hostkit's
    own runs use it: bios_facts, bios in --check --diff (the pending change reported, nothing
    PATCHed), the tune role's BIOS step for real (PATCHed, pending), then a profile intent the
    registry forbids failing the host in one line."""
    inv = inventory(tmp_path, {"lenovo": host_var(bmc, "lenovo")}, hostkit_overrides={"bios": {"smt": False}})
    before = facts_of(bmc, "lenovo")
    play = tmp_path / "site.yml"
    play.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "BIOS",
                    "hosts": "all",
                    "connection": "local",
                    "gather_facts": False,
                    "vars": {"ansible_python_interpreter": sys.executable},
                    "tasks": [
                        {"name": "facts", "hostkit.tuning.bios_facts": None},
                        {
                            "name": "show",
                            "ansible.builtin.debug": {"msg": "MODEL {{ hostkit_bios.model }}"},
                        },
                        {
                            "name": "set",
                            "ansible.builtin.include_role": {"name": "hostkit.tuning.tune", "tasks_from": "bios"},
                        },
                    ],
                }
            ]
        )
    )
    env = collection_env(tmp_path)

    def playbook(*extra):
        return subprocess.run(
            [str(BIN / "ansible-playbook"), "-i", inv, str(play), *extra],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    proc = playbook("--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "MODEL ThinkSystem SR670 V2" in proc.stdout
    assert '-    "Processors_HyperThreading": "Enabled"' in proc.stdout, proc.stdout[-3000:]
    assert '+    "Processors_HyperThreading": "Disabled"' in proc.stdout
    assert facts_of(bmc, "lenovo")["pending"] == {}  # --check: nothing PATCHed

    proc = playbook()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "changed=1" in proc.stdout
    assert facts_of(bmc, "lenovo")["pending"] == {"Processors_HyperThreading": "Disabled"}
    assert json.loads((tmp_path / "state" / "bios" / "lenovo.json").read_text())["attributes"] == {
        "Processors_HyperThreading": "Enabled"
    }
    proc = playbook()  # pending already: not changed again
    assert proc.returncode == 0 and "changed=0" in proc.stdout, proc.stdout[-2000:]
    assert facts_of(bmc, "lenovo")["attributes"] == before["attributes"]

    forbidden = inventory(
        tmp_path, {"lenovo": host_var(bmc, "lenovo")}, hostkit_overrides={"bios": {"c_states": "shallow"}}
    )
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", forbidden, str(play)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert "bios.c_states=shallow: Lenovo ThinkSystem (XCC) (Processors_CStates) takes off, on" in proc.stdout

    # tidy the shared BMC for the other tests: the pending change withdrawn
    m = connect(bmc_settings("lenovo", host_var(bmc, "lenovo")))
    bmc_apply.patch(m, {"Processors_HyperThreading": "Enabled"}, [])


def trees_of(root: Path) -> dict[str, str]:
    """A sysroot's files and their hashes, hostkit's own state left out ('no byte changed')."""
    from tests.conftest import excluding_hostkit_state
    from tests.treehash import tree_hash

    return excluding_hostkit_state(tree_hash(root))


def task_outcomes(stdout: str) -> list[tuple[str, str]]:
    """(task name, outcome) of each task of ansible-playbook's default output, in the order run:
    ``changed``, ``ok``, ``skipping``, ``failed`` (the host's line under the task)."""
    out = []
    for block in re.split(r"\n(?=TASK \[)", stdout):
        m = re.match(r"TASK \[(?:[\w.]+ : )?([^\]]+)\]", block)
        if m:
            seen = re.findall(r"^(changed|ok|skipping|failed|fatal):", block, re.M)
            out.append((m.group(1), "changed" if "changed" in seen else seen[0] if seen else "included"))
    return out


def test_the_collections_rollout_sets_the_bios_and_the_os_in_one_power_cycle(bmc, tmp_path):
    """The collection's rollout.yml with hostkit_reboot on a host with a BMC, this machine through a
    local connection (its facts and its apply in a fixture's sysroot, whose reboot is the lab's
    simulated one): the BIOS planned with the OS, PATCHed before the roles, then ONE power cycle
    through the BMC after them (the reboot step finds the BIOS applied), the booted host planned and
    its roles run again: nothing changes then but the sysroot's simulated boot into the kernel
    arguments (a lab sysroot does not boot with the BMC's cycle). The gates pass. Then the BMC
    tidied for the other tests."""
    # no smoke gate: the smoke test would measure this machine, not the sysroot's host
    _root, inv = sysroot_host(
        bmc, tmp_path, hostkit_overrides={"bios": {"smt": False}}, hostkit_smoke_gate=False, hostkit_reboot=True
    )
    before = facts_of(bmc, "hpe")
    proc = collection_rollout(inv, tmp_path)
    try:
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        tasks = task_outcomes(proc.stdout)
        names = [t for t, _ in tasks]
        steps = [
            "Plan the BIOS through the BMC (a refusal fails the host here, before any change)",
            "Plan the host (a refusal or bad input fails it here, before any change)",
            "Mark the run as started (a failed gate rolls it back)",
            "BIOS settings through the BMC, pending until the power cycle",
            "Apply each role of the plan",
            "Power-cycle through the BMC (the BIOS settings and the new kernel arguments in one boot)",
            "The host has booted after the BMC's power cycle",
            "Boot the lab host into them (its sysroot's proc/cmdline rewritten as a reboot would)",
        ]
        order = [names.index(t) for t in steps]
        assert order == sorted(order), names  # planned, PATCHed, the roles, the cycle, the re-plan, the boot
        assert (
            names.count("Power-cycle through the BMC (the BIOS settings and the new kernel arguments in one boot)") == 1
        )
        # after the cycle: the host planned again and each role run again, changing nothing; the
        # kernel arguments were written before the cycle, the lab's boot into them comes last
        cycled = names.index("The host has booted after the BMC's power cycle")
        again = [(t, o) for t, o in tasks[cycled + 1 :] if o == "changed"]
        assert again == [
            ("Boot the lab host into them (its sysroot's proc/cmdline rewritten as a reboot would)", "changed")
        ], again
        assert names.count("Plan the host (a refusal or bad input fails it here, before any change)") == 2
        after = facts_of(bmc, "hpe")
        # the override, and what the shipped profile asks beside it (one NUMA node per socket), in effect
        assert after["pending"] == {}
        assert {k: after["attributes"][k] for k in ("ProcSMT", "NumaMemoryDomainsPerSocket")} == {
            "ProcSMT": "Disabled",
            "NumaMemoryDomainsPerSocket": "OneMemoryDomainPerSocket",
        }
        assert '"msg": "gates passed: audit pass' in proc.stdout, proc.stdout[-3000:]
    finally:  # the BIOS as it was, for the other tests
        m = connect(bmc_settings("hpe", host_var(bmc, "hpe")))
        now = bmc_facts.gather(m)
        bmc_apply.patch(m, {k: v for k, v in before["attributes"].items() if now["attributes"].get(k) != v}, [])
        bmc_apply.power_cycle(m)


def test_a_rollout_host_that_fails_after_its_bios_was_set_gets_its_bios_back(bmc, tmp_path):
    """The collection's rollout.yml with hostkit_reboot, this machine through a local connection (a
    fixture's sysroot), a BMC, and a role that fails after the BIOS was PATCHed (a containerd config
    the real containerd rejects): the rescue rolls the run back, the host's journal and the BIOS
    settings this run changed (journaled under its run id), the latter withdrawn from Bios/Settings
    without a power cycle (they were only pending). The BIOS journal keeps nothing of that run."""
    root, inv = sysroot_host(
        bmc,
        tmp_path,
        hostkit_overrides={"bios": {"smt": False}},
        hostkit_smoke_gate=False,
        hostkit_reboot=True,
        containerd_extra_toml="broken = [",
    )
    before_tree = trees_of(root)
    before = facts_of(bmc, "hpe")
    proc = collection_rollout(inv, tmp_path)
    try:
        assert proc.returncode != 0, proc.stdout[-3000:]
        tasks = dict(reversed(task_outcomes(proc.stdout)))  # a name run twice: its first outcome (the rescue's)
        assert tasks["BIOS settings through the BMC, pending until the power cycle"] == "changed"
        assert tasks["Roll this run's BIOS settings back through the BMC"] == "changed", proc.stdout[-3000:]
        assert "Power-cycle through the BMC (the BIOS settings and the new kernel arguments in one boot)" not in tasks
        after = facts_of(bmc, "hpe")
        assert after["pending"] == {} and after["attributes"] == before["attributes"]
        assert not (tmp_path / "state" / "bios" / "hpe.json").exists()  # the run's entries forgotten with it
        assert trees_of(root) == before_tree  # the host's own journal rolled back, byte for byte
    finally:
        withdraw_pending(bmc, "hpe", before)


def test_rollback_of_one_run_restores_the_bios_settings_that_run_changed(bmc, tmp_path):
    """hostkit apply (this machine through a local connection, a fixture's sysroot, the lab BMC)
    PATCHes the BIOS under its run id; hostkit rollback --run-id (what hostkit rollout runs for a
    host that failed its gate) PATCHes back what that run changed, and nothing of another run's."""
    _root, inv = sysroot_host(bmc, tmp_path, hostkit_overrides={"bios": {"smt": False}})
    before = facts_of(bmc, "hpe")
    state = Path(os.environ["HOSTKIT_STATE_DIR"])  # this test's: the controller's journal, as hostkit writes it
    # an earlier change of the host's BIOS, by hostkit bios apply (no run): not this run's
    bmc_apply.write_journal("hpe", "https://earlier", {"PowerRegulator": before["attributes"]["PowerRegulator"]})
    try:
        proc = hostkit("apply", "-i", str(inv), "--json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        doc = json.loads(proc.stdout)
        assert doc["hosts"]["hpe"]["bios"]["pending"] == {
            "ProcSMT": "Disabled",
            "NumaMemoryDomainsPerSocket": "OneMemoryDomainPerSocket",
        }
        assert facts_of(bmc, "hpe")["pending"] != {}
        proc = hostkit(
            "rollback",
            "-i",
            str(inv),
            "--run-id",
            doc["run_id"],
            "--json",
            cwd=tmp_path,
            env={"HOSTKIT_STATE_DIR": str(state)},
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        back = json.loads(proc.stdout)["bios"]["hpe"]
        assert back["restore"] == {"ProcSMT": "Enabled", "NumaMemoryDomainsPerSocket": "Auto"} and back["cycles"] == 0
        assert facts_of(bmc, "hpe")["pending"] == {}
        journal = json.loads((state / "bios" / "hpe.json").read_text())
        assert journal["attributes"] == {"PowerRegulator": before["attributes"]["PowerRegulator"]}  # the other's
    finally:
        withdraw_pending(bmc, "hpe", before)


def test_hostkit_plan_plans_the_os_for_the_topology_the_bios_will_give(bmc, tmp_path):
    """hostkit plan -i reads the BMC of a host that has one: with NPS2 asked of a host booted NPS1
    (the EPYC 9634 fixture, 2 nodes), the OS is planned for the 4 nodes after the power cycle, as
    hostkit apply plans it; the text says so. Nothing is PATCHed."""
    _root, inv = sysroot_host(bmc, tmp_path, hostkit_overrides={"bios": {"numa_per_socket": 2}})
    proc = hostkit("plan", "-i", str(inv), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    plan = json.loads(proc.stdout)["hosts"]["hpe"]
    assert plan["after_bios"]["predicted"] is True and plan["after_bios"]["numa_nodes"] == 4, plan["after_bios"]
    assert [n["cpus"] for n in plan["nodes"]] == ["0-41", "42-83", "84-125", "126-167"]
    proc = hostkit("plan", "-i", str(inv), cwd=tmp_path)
    assert "OS planned for the topology after the BIOS power cycle: 4 NUMA node(s), 2 per socket (now 1)" in proc.stdout
    assert facts_of(bmc, "hpe")["pending"] == {}


def test_redfish_config_skips_a_name_the_bmc_lacks_where_hostkit_refuses_it(bmc, tmp_path):
    """community.general.redfish_config (11.4.2, from the ansible package: scripts/community_general.py)
    beside hostkit, against the same lab BMC (the HPE ProLiant's registry) and the same attribute,
    Dell's LogicalProc (the name hostkit's Dell map gives SMT), which this BMC does not have:
    redfish_config drops it from its PATCH and reports ok, "BIOS attributes already set", with an
    Ansible warning (the play goes on); hostkit refuses it in one line, exit 2, nothing PATCHed. Then a name
    the BMC has, ProcSMT: while it is pending, redfish_config reports changed again at every run
    before the reset (it compares with the attributes in effect); hostkit says pending, no PATCH."""
    from scripts import community_general

    if not community_general.ready():
        pytest.fail("community.general's Redfish modules are not in build/test-collections: `make setup` makes them")
    var = host_var(bmc, "hpe")
    before = facts_of(bmc, "hpe")
    play = tmp_path / "redfish_config.yml"

    def redfish_config(attributes: dict) -> dict:
        task = {
            "community.general.redfish_config": {
                "category": "Systems",
                "command": "SetBiosAttributes",
                "resource_id": var["system"],
                "bios_attributes": attributes,
                "baseuri": var["address"].removeprefix("https://"),
                "username": var["username"],
                "password": var["password"],
                "validate_certs": True,
                "ca_path": var["ca_file"],
            },
            "register": "out",
        }
        show = {"ansible.builtin.debug": {"msg": "RESULT {{ out | to_json }}"}}
        play.write_text(
            yaml.safe_dump(
                [{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [task, show]}]
            )
        )
        env = {
            **collection_env(tmp_path),
            "ANSIBLE_COLLECTIONS_PATH": str(community_general.path()),
            "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        }
        proc = subprocess.run(
            [str(BIN / "ansible-playbook"), "-i", "localhost,", str(play)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        line = next(x for x in proc.stdout.splitlines() if '"msg": "RESULT ' in x)
        return json.loads(json.loads("{" + line.strip().rstrip(",") + "}")["msg"].removeprefix("RESULT "))

    skipped = redfish_config({"LogicalProc": "Disabled"})
    assert not skipped.get("failed") and skipped["changed"] is False, skipped
    assert skipped["msg"] == "BIOS attributes already set", skipped
    # an Ansible warning, the task ok: a play that goes on as if the BIOS were set
    assert skipped["warnings"] == ["Unsupported attributes {'LogicalProc': 'Disabled'}"], skipped
    assert facts_of(bmc, "hpe")["pending"] == {}  # nothing set, nothing failed

    inv = inventory(
        tmp_path, {"hpe": {**var, "vendor_map": "dell-poweredge"}}, hostkit_overrides={"bios": {"smt": False}}
    )
    proc = hostkit("bios", "apply", "-i", inv, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "bios.smt=False: the BMC's attribute registry has no attribute LogicalProc" in proc.stdout + proc.stderr
    assert facts_of(bmc, "hpe")["pending"] == {}

    try:
        first, again = redfish_config({"ProcSMT": "Disabled"}), redfish_config({"ProcSMT": "Disabled"})
        assert first["changed"] is True and again["changed"] is True, (first, again)  # pending: "changed" again
        ok = inventory(tmp_path, {"hpe": var}, hostkit_overrides={"bios": {"smt": False}})
        proc = hostkit("bios", "apply", "-i", ok, "--json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)["hosts"]["hpe"]
        assert [s["state"] for s in doc["plan"]["steps"] if s["attribute"] == "ProcSMT"] == ["pending"]
        assert "ProcSMT" not in doc["plan"]["patch"]  # (the shipped profile's NUMA setting beside it is PATCHed)
    finally:
        withdraw_pending(bmc, "hpe", before)


# ----------------------------------------------------------------------------- hostkit audit


def test_the_audit_s_bios_checks_tell_pass_pending_drift_and_a_cross_layer_mismatch_apart(tmp_path):
    """hostkit audit on a host with a BMC (hostkit/audit/bios.py), against a BMC of its own: one
    finding per intent (drift, then pending_reboot once PATCHed: not drift) and bios.cross_layer,
    the BIOS in effect against the OS facts the audit read."""
    from hostkit.audit.bios import bios_check

    b = lab_bmc.start({"hpe": "hpe-dl385-gen10plus-v2"}, tmp_path / "bmc")
    try:
        hostvars = {"hostkit_bmc": b.host_var("hpe")}
        check = bios_check("hpe", hostvars, {"name": "p", "bios": {"numa_per_socket": 2}})
        bmc = connect(bmc_settings("hpe", hostvars["hostkit_bmc"]))
        facts = bmc_facts.gather(bmc)  # the fixture's NPS is Auto: NPS1 in effect first, as the nps guest boots
        bmc_apply.patch(bmc, {"NumaMemoryDomainsPerSocket": "OneMemoryDomainPerSocket"}, facts["apply_times"])
        bmc_apply.power_cycle(bmc, shutdown_timeout=10)
        facts = bmc_facts.gather(bmc)
        threads = bmc_plan.bios_topology(facts, with_pending=False)["threads_per_core"]
        one_node = {"topology": {"numa_per_socket": 1, "threads_per_core": threads}}

        found = {f["check"]: f for f in check(one_node)}
        nps = found["bios.numa_per_socket"]
        assert (nps["status"], nps["expected"], nps["actual"]) == (
            "drift",
            "TwoMemoryDomainsPerSocket",
            "OneMemoryDomainPerSocket",
        )
        assert nps["source"].endswith(": NumaMemoryDomainsPerSocket") and found["bios.cross_layer"]["status"] == "pass"

        bmc_apply.patch(bmc, {"NumaMemoryDomainsPerSocket": "TwoMemoryDomainsPerSocket"}, facts["apply_times"])
        found = {f["check"]: f for f in check(one_node)}
        assert found["bios.numa_per_socket"]["status"] == "pending_reboot"
        assert found["bios.cross_layer"]["status"] == "pass"  # pending is not in effect: 1 node is right

        found = {f["check"]: f for f in check({"topology": {"numa_per_socket": 2, "threads_per_core": threads}})}
        assert found["bios.cross_layer"]["status"] == "drift"
        assert found["bios.cross_layer"]["note"] == (
            "cross-layer mismatch: the BIOS says 1 NUMA node(s) per socket, the booted OS shows 2"
        )
        with pytest.raises(BadInput, match="^hpe: the BIOS plan is refused: bios.numa_per_socket=3"):
            bios_check("hpe", hostvars, {"name": "p", "bios": {"numa_per_socket": 3}})(one_node)
    finally:
        b.stop()
