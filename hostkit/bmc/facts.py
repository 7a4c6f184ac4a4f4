"""What a host's BMC says about it: vendor, model and BIOS version; the BIOS attributes now, the ones
pending the next reset (``Bios/Settings``) and the attribute registry where the BMC offers one; the
processors (sockets, cores, threads) and the memory population per socket (from ``MemoryLocation``).

Each resource is read once per run (:attr:`hostkit.bmc.client.Bmc.paths` counts them).
"""

from __future__ import annotations

from hostkit.bmc.client import Bmc, BmcError
from hostkit.bmc.registry import parse as parse_registry


def _pending(bmc: Bmc, bios, current: dict) -> dict:
    """The attributes that differ in ``Bios/Settings`` from the current ones (a BMC lists either the
    pending ones only or the whole set there)."""
    settings = bios.json.get("@Redfish.Settings", {}).get("SettingsObject", {}).get("@odata.id")
    if not settings:
        return {}
    attrs = bmc.get_json(settings).get("Attributes") or {}
    return {k: v for k, v in attrs.items() if current.get(k) != v}


def _registry(bmc: Bmc, bios) -> dict | None:
    """The BIOS attribute registry (:func:`hostkit.bmc.registry.parse`: name -> type, values, read-only,
    reset, locks), or None where the BMC offers none (then nothing can be checked against it, and the
    plan says so)."""
    reg_id = bios.json.get("AttributeRegistry")
    if not reg_id:
        return None
    try:
        listing = bmc.get_json("/redfish/v1/Registries")
    except BmcError as exc:
        if exc.status == 404:  # a BMC without a registry service
            return None
        raise  # unreachable or slow mid-read is that, not "no registry"
    entries = [bmc.get_json(m["@odata.id"]) for m in listing.get("Members", []) if m.get("@odata.id")]
    # the registry the Bios resource names: by Id, else by the Registry field without its version
    exact = [e for e in entries if reg_id in (e.get("Id"), e.get("Registry"))]
    base = reg_id.split(".v")[0]
    loose = [e for e in entries if str(e.get("Registry") or e.get("Id") or "").split(".v")[0] == base]
    for entry in (exact or loose)[:1]:
        for loc in entry.get("Location", []):
            uri = loc.get("Uri")
            if not uri:
                continue
            return parse_registry(bmc.get_json(uri))
    return None


def _processors(bmc: Bmc, system) -> dict:
    procs = []
    for p in system.processors.get_members():
        if (
            str(p.processor_type or "").upper() not in ("", "CPU", "PROCESSORTYPE.CPU")
            and "cpu" not in str(p.processor_type).lower()
        ):
            continue
        vendor_id = (p.processor_id.vendor_id if p.processor_id else None) or ""
        procs.append(
            {
                "socket": p.socket,
                "manufacturer": p.manufacturer,
                "model": p.model,
                "vendor_id": vendor_id,
                "cores": p.total_cores,
                "threads": p.total_threads,
            }
        )
    text = " ".join(f"{p['manufacturer']} {p['model']} {p['vendor_id']}" for p in procs).lower()
    cpu_vendor = "amd" if "amd" in text else "intel" if "intel" in text else None
    cores = procs[0]["cores"] if procs else None
    threads = procs[0]["threads"] if procs else None
    return {
        "sockets": len(procs),
        "cpu_vendor": cpu_vendor,
        "model": procs[0]["model"] if procs else None,
        "cores_per_socket": cores,
        "threads_per_core": threads // cores if cores and threads else None,
        "processors": procs,
    }


def _memory(bmc: Bmc, system) -> dict | None:
    """Populated channels and slots per socket from each DIMM's MemoryLocation; None without a
    Memory collection."""
    link = system.json.get("Memory", {}).get("@odata.id")
    if not link:
        return None
    members = bmc.get_json(link).get("Members", [])
    per_socket: dict[str, dict] = {}
    for m in members:
        dimm = bmc.get_json(m["@odata.id"])
        loc = dimm.get("MemoryLocation") or {}
        if "Socket" not in loc:
            continue
        sock = per_socket.setdefault(str(loc["Socket"]), {"channels": set(), "populated": set(), "slots": 0})
        sock["slots"] += 1
        sock["channels"].add(loc.get("Channel"))
        present = (dimm.get("Status") or {}).get("State") in ("Enabled", None) and (dimm.get("CapacityMiB") or 0) > 0
        if present:
            sock["populated"].add(loc.get("Channel"))
    return {
        s: {"channels": len(v["channels"]), "populated_channels": len(v["populated"]), "slots": v["slots"]}
        for s, v in sorted(per_socket.items())
    }


def gather(bmc: Bmc) -> dict:
    """The ``bios`` facts of one host."""
    system = bmc.system
    bios = bmc.call("reading the BIOS", lambda: system.bios)
    current = dict(bios.attributes or {})
    return {
        "bmc": bmc.settings.url,
        "vendor": system.manufacturer,
        "model": system.model,
        "bios_version": system.bios_version,
        "attributes": current,
        "pending": bmc.call("reading Bios/Settings", _pending, bmc, bios, current),
        "registry": bmc.call("reading the attribute registry", _registry, bmc, bios),
        "processors": bmc.call("reading the processors", _processors, bmc, system),
        "memory": bmc.call("reading the memory", _memory, bmc, system),
        "apply_times": [str(t) for t in (bios.supported_apply_times or [])],
    }


def memory_cross_check(bmc_memory: dict | None, os_memory: dict | None) -> list[str]:
    """The BMC's populated memory channels per socket against the OS's SMBIOS view, socket by
    socket in order (the two number sockets differently): one line per disagreement; nothing to say
    where either view is missing."""
    os_channels = (os_memory or {}).get("channels")
    if not bmc_memory or not os_channels:
        return []
    out = []
    bmc_rows = [v["populated_channels"] for _s, v in sorted(bmc_memory.items())]
    os_rows = [len(v["populated"]) for _s, v in sorted(os_channels.items())]
    if len(bmc_rows) != len(os_rows):
        return [f"the BMC lists memory on {len(bmc_rows)} socket(s), the OS's SMBIOS table on {len(os_rows)}"]
    for i, (b, o) in enumerate(zip(bmc_rows, os_rows)):
        if b != o:
            out.append(f"socket {i}: the BMC counts {b} populated memory channel(s), the OS's SMBIOS table {o}")
    return out


def for_facts(host: str, hostvars: dict, os_facts: dict | None) -> dict:
    """The ``bios`` entry of a host's facts (``hostkit facts -i``): the BMC's facts and the memory
    cross-check, or the one line its BMC failed with."""
    from hostkit.bmc.client import bmc_settings, connect
    from hostkit.errors import HostkitError

    try:
        doc = gather(connect(bmc_settings(host, hostvars["hostkit_bmc"])))
    except HostkitError as exc:
        return {"error": str(exc)}
    doc["memory_cross_check"] = memory_cross_check(doc["memory"], (os_facts or {}).get("memory"))
    return doc


def add_to_replies(inventory: str, limit: str | None, replies: dict) -> None:
    """Each host with a BMC in the inventory (``hostkit_bmc``) that answered: its facts (an agent
    reply's ``doc``) gain ``bios`` (:func:`for_facts`), all BMCs read at once. ``hostkit facts -i``,
    ``hostkit baseline`` and ``hostkit drift`` read the BIOS this way."""
    from concurrent.futures import ThreadPoolExecutor

    from hostkit.ansible.inventory import load_inventory

    with_bmc = [h for h in load_inventory(inventory, limit) if h.vars.get("hostkit_bmc") is not None]
    with_bmc = [h for h in with_bmc if h.name in replies and replies[h.name].ok]
    if not with_bmc:
        return
    with ThreadPoolExecutor(max_workers=len(with_bmc)) as pool:
        docs = pool.map(lambda h: for_facts(h.name, h.vars, replies[h.name].doc), with_bmc)
        for h, doc in zip(with_bmc, docs):
            replies[h.name].doc["bios"] = doc
