"""The audit's BIOS checks, for a host whose inventory gives it a BMC (``hostkit_bmc``).

The BMC is read once (:func:`hostkit.bmc.facts.gather`), the profile's ``bios`` intents planned
against it as ``hostkit bios plan`` plans them, and each intent becomes one audit finding
``bios.<intent>``: ``pass`` (in effect), ``pending_reboot`` (set in ``Bios/Settings``, applied at the
next reset: not drift) or ``drift`` (neither in effect nor pending). Then ``bios.cross_layer``: the
topology the BIOS in effect says (NUMA nodes per socket, threads per core) against the booted OS's
facts; a difference is drift, named a cross-layer mismatch.
"""

from __future__ import annotations

from collections.abc import Callable

from hostkit.audit.checks import finding
from hostkit.bmc.client import bmc_settings, connect
from hostkit.bmc.facts import gather
from hostkit.bmc.plan import bios_topology, cross_layer, plan_bios, step_verdict
from hostkit.errors import BadInput


def step_findings(plan: dict, source: str) -> list[dict]:
    """One finding per planned intent (``plan``: :func:`hostkit.bmc.plan.plan_bios`)."""
    out = []
    for s in plan["steps"]:
        check, where = f"bios.{s['intent']}", f"{source}: {s['attribute']}"
        kind, now = step_verdict(s)
        if kind == "pass":
            out.append(finding(check, "pass", s["value"], s["current"], where))
        elif kind == "pending":
            note = f"{s['value']} is pending in Bios/Settings: applied at the next reset"
            out.append(finding(check, "pending_reboot", s["value"], s["current"], where, note))
        else:
            out.append(finding(check, "drift", s["value"], now, where, f"bios.{s['intent']}={s['wanted']}"))
    return out


def cross_layer_findings(in_effect: dict, os_topology: dict, source: str) -> list[dict]:
    """``bios.cross_layer``: pass, or drift with each mismatch named (:func:`hostkit.bmc.plan.cross_layer`)."""
    keys = ("numa_per_socket", "threads_per_core")
    said = {k: in_effect.get(k) for k in keys if in_effect.get(k) is not None}
    if not said:
        return []
    seen = {k: os_topology.get(k) for k in said}
    problems = cross_layer(in_effect, os_topology)
    where = f"{source} against the booted OS's facts"
    if problems:
        return [finding("bios.cross_layer", "drift", said, seen, where, "; ".join(problems))]
    return [finding("bios.cross_layer", "pass", said, seen, where)]


def bios_check(host: str, hostvars: dict, profile: dict) -> Callable[[dict], list[dict]]:
    """The check of one host, called with its OS facts; its inventory's ``hostkit_bmc`` is checked
    now (bad input before any host is contacted). A refused BIOS plan raises :class:`BadInput`, a
    BMC that cannot be read :class:`hostkit.bmc.client.BmcError`."""
    settings = bmc_settings(host, hostvars["hostkit_bmc"])

    def check(os_facts: dict) -> list[dict]:
        bios = gather(connect(settings))
        plan = plan_bios(profile["bios"], bios, settings.vendor_map, source=f"profile {profile['name']}")
        if plan["refused"]:
            raise BadInput(f"{host}: the BIOS plan is refused: " + "; ".join(plan["refused"]))
        source = f"BMC {settings.url}"
        topo = os_facts.get("topology") or {}
        return step_findings(plan, source) + cross_layer_findings(bios_topology(bios, with_pending=False), topo, source)

    return check
