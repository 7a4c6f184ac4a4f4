"""The BIOS plan of one host: each intent of the profile's ``bios`` section, current -> wanted in the
vendor's words, with its reason and its state, and the topology the OS will have after the power
cycle.

A step's state: ``ok`` (the BIOS has it now and nothing else is pending), ``pending`` (already set,
applied at the next reset: not changed again), ``change`` (to be PATCHed). What cannot be set is
*refused*, one line each, and nothing is PATCHed: an intent the vendor map lacks for this platform,
an attribute the BMC does not have, a read-only one, a value its registry does not allow.
"""

from __future__ import annotations

import re

from hostkit.bmc.registry import lock, unlocks
from hostkit.bmc.vendors import INTENTS, entry_for, intent_of, same, value_for, vendor_for

REASONS = {
    "numa_per_socket": "NUMA nodes per socket (AMD NPS, Intel SNC): the unit kubelet's single-numa-node "
    "pods and the smoke test's shared memory are placed in",
    "smt": "SMT siblings share a core's pipeline: an isolated CPU's sibling adds its load to the tail",
    "c_states": "a deep C-state's exit latency lands on the first inference after an idle gap",
    "turbo": "turbo's frequency varies with the other cores' load: steady clocks give a steady tail",
    "memory_interleave": "memory interleaved across NUMA nodes hides NUMA from the OS: the shared memory a pinned "
    "worker touches lands on remote nodes",
    "pcie_aspm": "a PCIe link waking from L0s/L1 adds its exit latency to the NIC's and the device's requests",
    "power_profile": "the vendor's power preset owns C-states, turbo and ASPM: maximum performance keeps them "
    "out of the tail, or custom leaves them to the profile's own bios settings",
}


def _registry_problem(
    registry: dict | None, attrs: dict, name: str, value, future: dict, vmap: dict, cpu: str | None
) -> str | None:
    """Why the BMC would not take ``name=value`` with the BIOS at ``future`` (current, pending and the
    plan's other values), or None. A lock names the intent that lifts it (:func:`_unlock_hint`)."""
    if registry is None:
        return None if name in attrs else f"the BMC has no attribute {name} (and offers no registry)"
    entry = registry.get(name)
    if entry is None:
        return f"the BMC's attribute registry has no attribute {name}"
    if entry["values"] is not None and value not in entry["values"]:
        return f"{name}={value} is not allowed by the BMC's registry (allowed: {', '.join(map(str, entry['values']))})"
    locked = lock(registry, name, future)
    return locked and locked + _unlock_hint(registry, name, future, vmap, cpu)


def _unlock_hint(registry: dict, name: str, future: dict, vmap: dict, cpu: str | None) -> str:
    """Which intent of the profile, at which value, would unlock ``name`` (its lock's attribute is that
    intent's): `` (set bios.power_profile=custom with it)``, or nothing."""
    for lk in registry[name].get("locks") or []:
        for attribute in sorted({c["attribute"] for c in lk["when"]}):
            for intent in INTENTS:
                entry = entry_for(vmap, intent, cpu)
                if entry is None or entry.get("attribute") != attribute:
                    continue
                keys = [k for k, v in entry["values"].items() if unlocks(registry, name, future, attribute, [v])]
                if keys:
                    return f" (set bios.{intent}={keys[0]} with it)"
    return ""


def _attributes(entry: dict, registry: dict | None, attrs: dict) -> list[str]:
    """The attributes a map entry sets: its ``attribute``, or every attribute of the BIOS whose name
    ``match`` matches (HPE sets ASPM per PCIe slot), in order."""
    if "attribute" in entry:
        return [entry["attribute"]]
    names = set(attrs) if registry is None else set(registry) & set(attrs)
    return sorted(n for n in names if re.fullmatch(entry["match"], n))


def plan_bios(bios_profile: dict, facts: dict, vendor_map: str | None = None, source: str = "the profile") -> dict:
    """The plan of one host from its profile's ``bios`` section and its BMC facts."""
    vmap = vendor_for(facts.get("vendor"), vendor_map)
    procs = facts.get("processors") or {}
    cpu = procs.get("cpu_vendor")
    attrs, pending, registry = facts.get("attributes") or {}, facts.get("pending") or {}, facts.get("registry")
    wanted_values, refused = [], []
    for intent in INTENTS:
        wanted = bios_profile.get(intent)
        if wanted is None:
            continue
        entry = entry_for(vmap, intent, cpu)
        if entry is None:
            refused.append(f"bios.{intent}={wanted}: {vmap['title']} has no attribute for it on {cpu or 'this'} CPUs")
            continue
        value = value_for(entry, wanted)
        label = entry.get("attribute") or entry["match"]
        if value is None:
            known = ", ".join(map(str, entry["values"]))
            refused.append(f"bios.{intent}={wanted}: {vmap['title']} ({label}) takes {known}")
            continue
        names = _attributes(entry, registry, attrs)
        if not names:
            refused.append(f"bios.{intent}={wanted}: the BMC has no attribute matching {label}")
            continue
        wanted_values += [(intent, wanted, entry, name, value) for name in names]
    # the values the BIOS will hold after this plan's PATCH: what locks an attribute is judged on them
    future = {**attrs, **pending, **{name: value for _i, _w, _e, name, value in wanted_values}}
    steps, patch = [], {}
    for intent, wanted, entry, name, value in wanted_values:
        current, now_pending = attrs.get(name), pending.get(name, attrs.get(name))
        if same(entry, value, current) and same(entry, value, now_pending):
            state = "ok"  # what the BIOS holds already: nothing to write, locked or not
        elif same(entry, value, now_pending):
            state = "pending"
        else:
            problem = _registry_problem(registry, attrs, name, value, future, vmap, cpu)
            if problem:
                refused.append(f"bios.{intent}={wanted}: {problem}")
                continue
            state = "change"
            patch[name] = value
        steps.append(
            {
                "intent": intent,
                "wanted": wanted,
                "attribute": name,
                "value": value,
                "current": current,
                "pending": pending.get(name),
                "state": state,
                "reset_required": ((registry or {}).get(name) or {}).get("reset_required", True) is not False,
                "reason": f"{source}: bios.{intent}={wanted}: {REASONS[intent]}",
            }
        )
    after = after_cycle(steps, facts, vmap)
    now = bios_topology(facts, with_pending=False, vmap=vmap)  # the topology the BIOS gives in effect now
    return {
        "vendor_map": vmap["name"],
        "vendor": vmap["title"],
        "cpu_vendor": cpu,
        "steps": steps,
        "refused": refused,
        "patch": patch,
        "after_cycle": after,
        # what the next power cycle changes of it (this plan's steps and what is pending): what the
        # OS is planned for before the cycle (hostkit.plan.after_bios)
        "cycle_changes": {
            k: after[k] for k in ("numa_per_socket", "threads_per_core") if after[k] is not None and after[k] != now[k]
        },
    }


def after_cycle(steps: list[dict], facts: dict, vmap: dict) -> dict:
    """The topology the OS will see once every step is in effect: NUMA nodes per socket and in all,
    threads per core (None where neither the plan nor the BIOS says)."""
    procs = facts.get("processors") or {}
    cpu = procs.get("cpu_vendor")
    by_intent = {s["intent"]: s["wanted"] for s in steps}

    def effective(intent):
        if intent in by_intent:
            return by_intent[intent]
        entry = entry_for(vmap, intent, cpu)
        if entry is None:
            return None
        name = entry["attribute"]
        value = (facts.get("pending") or {}).get(name, (facts.get("attributes") or {}).get(name))
        return intent_of(entry, value)

    nps, smt = effective("numa_per_socket"), effective("smt")
    sockets = procs.get("sockets") or None
    threads = None if smt is None else (2 if smt else 1)
    nodes = None
    if nps is not None and sockets:
        nodes = 1 if nps == 0 else sockets * int(nps)
    return {"sockets": sockets, "numa_per_socket": nps, "numa_nodes": nodes, "threads_per_core": threads}


def bios_topology(facts: dict, with_pending: bool = True, vmap: dict | None = None) -> dict:
    """The topology a BIOS gives as it is (no intent of a profile): after the next power cycle, or
    with ``with_pending`` False the one in effect now (a pending setting not yet applied).
    ``vmap``: the host's vendor map (default: the one its vendor names)."""
    return after_cycle([], facts if with_pending else {**facts, "pending": {}}, vmap or vendor_for(facts.get("vendor")))


def changes(plan: dict) -> int:
    return sum(s["state"] == "change" for s in plan["steps"])


def cross_layer(after: dict, os_topology: dict) -> list[str]:
    """What the booted OS shows against what the BIOS says (:func:`after_cycle`): one line per
    mismatch, each named a cross-layer mismatch (a BMC that says NPS2 over an OS with one node per
    socket has not applied it, or the OS is not the one the BMC powers)."""
    out = []
    pairs = (("numa_per_socket", "NUMA node(s) per socket"), ("threads_per_core", "thread(s) per core"))
    for key, words in pairs:
        want, got = after.get(key), os_topology.get(key)
        if want is not None and got is not None and int(want) != int(got):
            out.append(f"cross-layer mismatch: the BIOS says {want} {words}, the booted OS shows {got}")
    return out


# A step's state (plan_bios) -> what an audit calls it: in effect, set and applied at the next reset
# (not drift), or not held
STEP_VERDICTS = {"ok": "pass", "pending": "pending", "change": "drift"}


def step_verdict(step: dict) -> tuple[str, str]:
    """What an audit says of one step (:data:`STEP_VERDICTS`), and the attribute's value now as both
    audits word it: ``current``, with ``(pending X)`` when the BMC holds another value for the next reset."""
    now = step["current"] if step["pending"] is None else f"{step['current']} (pending {step['pending']})"
    return STEP_VERDICTS[step["state"]], now


def findings(plan: dict, in_effect: dict, os_topology: dict | None) -> list[dict]:
    """The BIOS audit of one host, three kinds apart: ``drift`` (the BIOS, with what is pending,
    does not hold what the plan wants), ``pending`` (set, applied at the next reset: not drift) and
    ``cross-layer`` (the booted OS against what the BIOS in effect now says, ``in_effect``: the
    topology of :func:`after_cycle` over the current attributes alone)."""
    out = []
    for s in plan["steps"]:
        kind, now = step_verdict(s)
        if kind == "drift":
            line = f"{s['attribute']} is {now}; bios.{s['intent']}={s['wanted']} wants {s['value']}"
        elif kind == "pending":
            line = f"{s['attribute']} is {s['current']}, {s['value']} pending: applied at the next reset"
        else:
            continue
        out.append({"kind": kind, "attribute": s["attribute"], "line": line})
    for line in cross_layer(in_effect, os_topology or {}):
        out.append({"kind": "cross-layer", "attribute": None, "line": line})
    return out
