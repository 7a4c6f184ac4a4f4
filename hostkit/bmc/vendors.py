"""Vendor maps: one BIOS intent of the profile (``bios.numa_per_socket: 2``) to one vendor's attribute
and value (``NumaNodesPerSocket: "2"`` on a Dell PowerEdge with AMD EPYC).

The maps are data, one file per vendor and platform family in ``vendors/*.yml``, each naming its
public sources. A file::

    name: dell-poweredge
    title: Dell PowerEdge (iDRAC 9)
    manufacturers: ["Dell Inc."]          # the Redfish ComputerSystem's Manufacturer
    sources: [...]                        # where each attribute and value was read
    intents:
      numa_per_socket:                    # a key of the profile's bios section
        amd: {attribute: NumaNodesPerSocket, values: {0: "0", 1: "1", 2: "2", 4: "4"}}
        intel: {attribute: SubNumaCluster, values: {1: Disabled, 2: "2-Way"}}
      smt:
        any: {attribute: LogicalProc, values: {true: Enabled, false: Disabled}}
      pcie_aspm:                          # one setting per PCIe slot: every attribute the BMC has that
        amd: {match: "PciSlot[0-9]+Aspm", values: {"off": Disabled}}   # matches, set alike (HPE)

``amd``/``intel`` apply to that CPU vendor (from the BMC's Processors), ``any`` to both. An intent a
map lacks for a platform is refused by the plan, naming the vendor: nothing is skipped silently.
``shown`` maps a registry value to the display string the BIOS reports for it (AMI).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from hostkit.errors import BadInput
from hostkit.jsonfile import check_shape
from hostkit.yamlfile import parse_yaml

# The profile's bios keys that are set through the BMC (the others are checks from the OS only).
INTENTS = ("numa_per_socket", "smt", "c_states", "turbo", "memory_interleave", "pcie_aspm", "power_profile")

_ENTRY = {"attribute?": str, "match?": str, "values": dict, "shown?": dict}
_SHAPE = {
    "name": str,
    "title": str,
    "manufacturers": [str],
    "sources": [str],
    "intents": {str: {str: _ENTRY}},
}


@cache
def vendor_maps() -> dict[str, dict]:
    """name -> map of every shipped vendor file, checked."""
    out = {}
    d = resources.files("hostkit.bmc").joinpath("vendors")
    for f in sorted(d.iterdir(), key=lambda p: p.name):
        if not f.name.endswith(".yml"):
            continue
        doc = parse_yaml(f.read_text(), f"vendor map {f.name}")
        check_shape(doc, _SHAPE, f"vendor map {f.name}")
        for intent, platforms in doc["intents"].items():
            if intent not in INTENTS:
                raise BadInput(f"vendor map {f.name}: unknown intent {intent!r} (known: {', '.join(INTENTS)})")
            for platform, entry in platforms.items():
                if platform not in ("amd", "intel", "any"):
                    raise BadInput(f"vendor map {f.name}: {intent}: platform {platform!r} is not amd, intel or any")
                if ("attribute" in entry) == ("match" in entry):
                    raise BadInput(f"vendor map {f.name}: {intent}.{platform}: give attribute or match, one of them")
        out[doc["name"]] = doc
    return out


def vendor_for(manufacturer: str | None, name: str | None = None) -> dict:
    """The map of a BMC's manufacturer (or the one ``hostkit_bmc.vendor_map`` names)."""
    maps = vendor_maps()
    if name:
        if name not in maps:
            raise BadInput(f"no vendor map {name!r} (known: {', '.join(maps)})")
        return maps[name]
    for m in maps.values():
        if any(manufacturer and manufacturer.strip().lower() == x.lower() for x in m["manufacturers"]):
            return m
    known = ", ".join(f"{x} ({m['name']})" for m in maps.values() for x in m["manufacturers"])
    raise BadInput(f"no vendor map for manufacturer {manufacturer!r}: hostkit knows {known}")


def entry_for(vmap: dict, intent: str, cpu_vendor: str | None) -> dict | None:
    """The attribute and values of ``intent`` on this platform, or None where the map has none."""
    platforms = vmap["intents"].get(intent) or {}
    return platforms.get(cpu_vendor or "") or platforms.get("any")


def value_for(entry: dict, wanted) -> str | None:
    """The vendor's value for an intent's value (YAML keys may be ints, bools or strings)."""
    for key, value in entry["values"].items():
        if key == wanted or str(key).lower() == str(wanted).lower():
            return value
    return None


def same(entry: dict, value, shown) -> bool:
    """Whether a BIOS reporting ``shown`` has ``value`` (an AMI registry's code against the display
    string its Bios resource reports: the map's ``shown``)."""
    return shown == value or (shown is not None and (entry.get("shown") or {}).get(value) == shown)


def intent_of(entry: dict, value) -> object | None:
    """The intent's value a vendor's value stands for (the reverse of :func:`value_for`)."""
    for key, v in entry["values"].items():
        if same(entry, v, value):
            return key
    return None
