"""A BIOS attribute registry (DMTF ``AttributeRegistry``), read once: each attribute's type, allowed
values, read-only flag and reset requirement, and the locks its ``Dependencies`` put on it.

A lock is a dependency of ``Type`` ``Map`` whose ``MapToProperty`` is ``ReadOnly`` or ``GrayOut`` and
whose ``MapToValue`` is true: the attribute cannot be set while its ``MapFrom`` conditions hold. Vendors
lock the settings a preset owns this way: Dell's ``ProcCStates`` is read-only unless ``SysProfile`` is
``Custom``, HPE's ``MinProcIdlePower`` greyed out under most ``WorkloadProfile`` values, Lenovo's
``Processors_CStates`` unless ``OperatingModes_ChooseOperatingMode`` is ``CustomMode``. The conditions
are evaluated against the values the BIOS will have (current, pending and this PATCH), so a PATCH
that also sets the preset to the value that unlocks it is allowed, as the BMC allows it.

Conditions combine left to right by each one's ``MapTerms`` (``AND``/``OR``); a condition without
one is an alternative of the one before (``OR``), as Dell's registries list several values of one
attribute. ``MapFromValue`` is matched against a value or its display name (Supermicro's conditions
name display strings, its values are codes). An attribute with lock dependencies takes its read-only
state from them alone: Dell's registry writes the current state of a dependency into ``ReadOnly``.
``Immutable`` attributes are always read-only.
"""

from __future__ import annotations

LOCKS = ("ReadOnly", "GrayOut")
CONDITIONS = ("EQU", "NEQ")  # what a lock on an enumeration says; other conditions (GTR, ...) are not locks read here


def parse(doc: dict) -> dict:
    """name -> {type, values, display, read_only, immutable, reset_required, locks} of a registry
    document (its ``RegistryEntries``)."""
    entries = doc.get("RegistryEntries") or {}
    out = {}
    for a in entries.get("Attributes") or []:
        if not isinstance(a, dict) or not a.get("AttributeName"):
            continue
        values = [v for v in a.get("Value", []) if isinstance(v, dict)]
        out[a["AttributeName"]] = {
            "type": a.get("Type"),
            "values": [v.get("ValueName") for v in values] or None,
            "display": {v.get("ValueName"): v.get("ValueDisplayName") for v in values if v.get("ValueDisplayName")},
            "read_only": bool(a.get("ReadOnly")),
            "immutable": bool(a.get("Immutable")),
            "reset_required": a.get("ResetRequired"),
            "locks": [],
        }
    for d in entries.get("Dependencies") or []:
        dep = (d or {}).get("Dependency") or {}
        name = dep.get("MapToAttribute") or d.get("DependencyFor")
        if d.get("Type", "Map") != "Map" or dep.get("MapToProperty") not in LOCKS or dep.get("MapToValue") is not True:
            continue
        if name not in out:
            continue
        when = [
            {
                "attribute": m.get("MapFromAttribute"),
                "condition": m.get("MapFromCondition", "EQU"),
                "value": m.get("MapFromValue"),
                "term": m.get("MapTerms"),
            }
            for m in dep.get("MapFrom") or []
            if isinstance(m, dict) and m.get("MapFromProperty", "CurrentValue") == "CurrentValue"
        ]
        if when and all(w["condition"] in CONDITIONS for w in when):
            out[name]["locks"].append({"property": dep["MapToProperty"], "when": when})
    return out


def _matches(registry: dict, cond: dict, values: dict) -> bool:
    name, want = cond["attribute"], cond["value"]
    have = values.get(name)
    shown = ((registry.get(name) or {}).get("display") or {}).get(have)
    equal = want in (have, shown) or (have is not None and str(want) == str(have))
    return equal if cond["condition"] == "EQU" else not equal


def holds(registry: dict, when: list[dict], values: dict) -> bool:
    """Whether a lock's conditions hold for these attribute values."""
    result = None
    for cond in when:
        now = _matches(registry, cond, values)
        if result is None:
            result = now
        elif (cond.get("term") or "OR").upper() == "AND":
            result = result and now
        else:
            result = result or now
    return bool(result)


def lock(registry: dict, name: str, values: dict) -> str | None:
    """Why ``name`` cannot be set with the BIOS at these ``values`` (one line), or None."""
    entry = registry.get(name)
    if entry is None:
        return None
    if entry.get("immutable"):
        return f"{name} is immutable in the BMC's attribute registry"
    locks = entry.get("locks") or []
    if not locks:
        return f"{name} is read-only in the BMC's attribute registry" if entry.get("read_only") else None
    for lk in locks:
        if holds(registry, lk["when"], values):
            said = " or ".join(
                f"{c['attribute']} is {values.get(c['attribute'])}"
                if c["condition"] == "NEQ"
                else f"{c['attribute']} is {c['value']}"
                for c in lk["when"]
                if _matches(registry, c, values)
            )
            kind = "greyed out" if lk["property"] == "GrayOut" else "read-only"
            return f"{name} is {kind} while {said} (the BMC's attribute registry)"
    return None


def unlocks(registry: dict, name: str, values: dict, attribute: str, candidates: list) -> list:
    """The values of ``attribute`` (among ``candidates``) with which ``name`` is no longer locked."""
    return [c for c in candidates if lock(registry, name, {**values, attribute: c}) is None]


def in_lock_order(registry: dict | None, attributes: dict, values: dict) -> list[dict]:
    """The PATCHes, in order, that set ``attributes`` on a BIOS at ``values`` (current and pending)
    past its locks: what the whole set would lock (a preset put back, and a setting it owns) goes
    first, while its lock is still off; then the rest. One PATCH where no lock is in the way."""
    if not registry:
        return [attributes] if attributes else []
    future = {**values, **attributes}
    first = {
        k: v for k, v in attributes.items() if lock(registry, k, future) and lock(registry, k, {**values, k: v}) is None
    }
    rest = {k: v for k, v in attributes.items() if k not in first}
    return [p for p in (first, rest) if p]
