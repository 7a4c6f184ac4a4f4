"""The attribute registry's locks (hostkit.bmc.registry): a Dependency that makes an attribute
ReadOnly or GrayOut while its conditions hold, judged on the BIOS as it will be.

The registries are the lab fixtures' (copied from real BMCs' mockups: their Dependencies verbatim);
the combination rules no fixture exercises (AND, a display string) are shown on the smallest registry
that has them.
"""

from __future__ import annotations

import pytest

from hostkit.bmc.registry import holds, lock, parse, unlocks
from hostkit.lab.bmc import load_fixture
from hostkit.lab.bmc.driver import registry_entries


def registry_of(fixture: str) -> tuple[dict, dict]:
    fx = load_fixture(fixture)
    return parse(registry_entries(fx)), fx["attributes"]


def test_dells_preset_locks_c_states_turbo_and_aspm_until_custom():
    reg, now = registry_of("dell-r750")
    # the mockup's own ReadOnly flags say the same as its Dependencies, which win
    assert {n for n in reg if lock(reg, n, now)} == {"ProcCStates", "ProcTurboMode", "PcieAspmL1"}
    assert lock(reg, "ProcTurboMode", now) == (
        "ProcTurboMode is read-only while SysProfile is PerfOptimized (the BMC's attribute registry)"
    )
    assert lock(reg, "ProcTurboMode", {**now, "SysProfile": "Custom"}) is None
    assert unlocks(reg, "PcieAspmL1", now, "SysProfile", ["PerfOptimized", "Custom"]) == ["Custom"]


def test_node_interleaving_and_sub_numa_clustering_lock_each_other():
    reg, now = registry_of("dell-r750")
    assert lock(reg, "NodeInterleave", now) is None
    assert "while SubNumaCluster is 2-Way" in lock(reg, "NodeInterleave", {**now, "SubNumaCluster": "2-Way"})
    assert "while NodeInterleave is Enabled" in lock(reg, "SubNumaCluster", {**now, "NodeInterleave": "Enabled"})


@pytest.mark.parametrize(
    ("fixture", "attribute", "preset", "unlocking"),
    [
        ("hpe-dl385-gen10plus-v2", "MinProcIdlePower", "WorkloadProfile", "Custom"),
        ("lenovo-sr670-v2", "Processors_CStates", "OperatingModes_ChooseOperatingMode", "CustomMode"),
    ],
)
def test_a_preset_greys_out_what_it_owns(fixture, attribute, preset, unlocking):
    reg, now = registry_of(fixture)
    assert lock(reg, attribute, now) and f"while {preset} is {now[preset]}" in lock(reg, attribute, now)
    assert lock(reg, attribute, {**now, preset: unlocking}) is None


def test_conditions_combine_left_to_right_and_match_display_strings():
    reg = parse(
        {
            "RegistryEntries": {
                "Attributes": [
                    {
                        "AttributeName": "A",
                        "Type": "Enumeration",
                        "Value": [{"ValueName": "0", "ValueDisplayName": "Off"}],
                    },
                    {"AttributeName": "B", "Type": "Enumeration", "Value": [{"ValueName": "x"}, {"ValueName": "y"}]},
                    {"AttributeName": "T", "Type": "Enumeration", "ReadOnly": True, "Value": [{"ValueName": "v"}]},
                    {"AttributeName": "I", "Type": "Enumeration", "Immutable": True, "Value": [{"ValueName": "v"}]},
                ],
                "Dependencies": [
                    {
                        "Dependency": {
                            "MapFrom": [
                                {
                                    "MapFromAttribute": "A",
                                    "MapFromCondition": "EQU",
                                    "MapFromProperty": "CurrentValue",
                                    "MapFromValue": "Off",
                                },
                                {
                                    "MapFromAttribute": "B",
                                    "MapFromCondition": "EQU",
                                    "MapFromProperty": "CurrentValue",
                                    "MapFromValue": "x",
                                    "MapTerms": "AND",
                                },
                            ],
                            "MapToAttribute": "T",
                            "MapToProperty": "GrayOut",
                            "MapToValue": True,
                        },
                        "DependencyFor": "T",
                        "Type": "Map",
                    }
                ],
            }
        }
    )
    when = reg["T"]["locks"][0]["when"]
    assert holds(reg, when, {"A": "0", "B": "x"})  # the code "0" is shown as "Off"
    assert not holds(reg, when, {"A": "0", "B": "y"})  # AND
    # a lock dependency decides alone: T's static ReadOnly is the state of that dependency
    assert lock(reg, "T", {"A": "0", "B": "y"}) is None
    assert lock(reg, "I", {}) == "I is immutable in the BMC's attribute registry"
