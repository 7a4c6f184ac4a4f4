"""How a lab QEMU guest behind the lab BMC follows its BIOS: the fixture's ``lab_topology`` maps
attribute values to NUMA nodes per socket and threads per core."""

from __future__ import annotations


def _topology_value(fixture: dict, key: str, attributes: dict) -> int | None:
    topo = (fixture.get("lab_topology") or {}).get(key)
    if not topo:
        return None
    return topo["values"].get(attributes.get(topo["attribute"]))


def guest_spec(spec_text: str, fixture: dict) -> str:
    """A lab guest's VM spec with the NUMA nodes and threads per core its BIOS attributes imply."""
    from hostkit.lab.vm import parse_spec

    spec = dict(part.split("=", 1) for part in parse_spec(spec_text).to_text().split(","))
    nps = _topology_value(fixture, "numa_per_socket", fixture["attributes"])
    threads = _topology_value(fixture, "threads_per_core", fixture["attributes"])
    if nps:
        spec["nodes"] = str(int(spec["sockets"]) * nps)
    if threads:
        spec["threads"] = str(threads)
    return ",".join(f"{k}={v}" for k, v in spec.items())


def attributes_for_guest(spec_text: str, fixture: dict) -> dict:
    """The BIOS attributes a lab guest of this topology boots with (the first value of each)."""
    from hostkit.lab.vm import parse_spec

    spec = parse_spec(spec_text)
    out = {}
    for key, now in (("numa_per_socket", spec.nodes // spec.sockets), ("threads_per_core", spec.threads)):
        topo = (fixture.get("lab_topology") or {}).get(key)
        if topo:
            out[topo["attribute"]] = next(v for v, n in topo["values"].items() if n == now)
    return out
