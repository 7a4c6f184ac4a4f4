"""``hostkit bios``'s work on every inventory host with a ``hostkit_bmc``: facts, plan, apply (with an
optional power cycle) and rollback, host by host.

Every input is checked before any BMC is contacted (the inventory, each ``hostkit_bmc``, each host's
profile and overrides): bad input changes nothing anywhere. A host's BMC failing is that host's
failure (exit 1); a plan the BMC cannot carry out is refused (exit 2) before any PATCH.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from hostkit.bmc import apply as bmc_apply
from hostkit.bmc import facts as bmc_facts
from hostkit.bmc.client import BmcError, bmc_settings, connect
from hostkit.bmc.plan import bios_topology, cross_layer, findings, plan_bios
from hostkit.bmc.registry import in_lock_order
from hostkit.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, BadInput

ACTIONS = ("facts", "plan", "audit", "apply", "rollback")


def _targets(inventory: str, limit: str | None, profile: str | None):
    from hostkit.ansible.inventory import load_inventory
    from hostkit.profiles import for_host

    hosts = load_inventory(inventory, limit)
    out, without = [], []
    for h in hosts:
        if h.vars.get("hostkit_bmc") is None:
            without.append(h.name)
            continue
        settings = bmc_settings(h.name, h.vars["hostkit_bmc"])
        prof, _pinned = for_host(h.name, h.vars, profile)
        out.append((h.name, settings, prof, settings.vendor_map))
    if not out:
        raise BadInput(f"no host of inventory {inventory} has a hostkit_bmc (hosts: {', '.join(without)})")
    return out, without


def run(
    action: str,
    inventory: str,
    limit: str | None = None,
    profile: str | None = None,
    reboot: bool = False,
    shutdown_timeout: float = bmc_apply.SHUTDOWN_TIMEOUT,
    progress: Callable[[str], None] | None = None,
    forks: int | None = None,
    os_check: bool = True,
    boot_timeout: float = 900,
    check: bool = False,
    run_id: str | None = None,
) -> dict[str, dict]:
    """Each host's document, its BMCs ``forks`` at a time (default: all at once; a BMC is slow, the
    controller is not). ``check`` (rollback only): what would be PATCHed back, nothing PATCHed.
    ``run_id`` (rollback only): that run's journaled values alone."""
    if action not in ACTIONS:
        raise BadInput(f"unknown action {action!r} (known: {', '.join(ACTIONS)})")
    targets, without = _targets(inventory, limit, profile)
    say = progress or (lambda _line: None)
    out: dict[str, dict] = {h: {"status": "skipped", "reason": "no hostkit_bmc in the inventory"} for h in without}

    # after a cycle: wait for the OS; an audit: the OS as it is now, asked once
    wait = 0 if action == "audit" else boot_timeout
    os_view = (lambda host: _os_topology(inventory, host, wait, say)) if os_check else None

    def one(target) -> tuple[str, dict]:
        host, settings, prof, vendor_map = target
        t0 = time.monotonic()
        try:
            doc = _one(action, host, settings, prof, vendor_map, reboot, shutdown_timeout, say, os_view, check, run_id)
        except BmcError as exc:
            doc = {"status": "failed", "error": str(exc)}
        except BadInput as exc:
            doc = {"status": "refused", "error": str(exc)}
        doc["seconds"] = round(time.monotonic() - t0, 2)
        say(f"{host}: {doc['status']} ({doc['seconds']} s)")
        return host, doc

    with ThreadPoolExecutor(max_workers=max(1, min(forks or len(targets), len(targets)))) as pool:
        out.update(pool.map(one, targets))
    return out


def exit_code(hosts: dict[str, dict]) -> int:
    statuses = {h["status"] for h in hosts.values()}
    if "refused" in statuses:
        return EXIT_BAD_INPUT
    return EXIT_FAILED if statuses & {"failed", "drift"} else EXIT_OK


def _os_topology(inventory: str, host: str, boot_timeout: float, say) -> dict:
    """The booted OS's NUMA nodes per socket and threads per core, from hostkit's facts over SSH,
    asked until the host answers (bounded by ``boot_timeout``)."""
    from hostkit.ansible.agent_call import call_agent

    deadline = time.monotonic() + boot_timeout
    while True:
        replies, _run = call_agent(inventory, ["facts"], host)
        reply = replies.get(host)
        if reply is not None and reply.ok:
            topo = reply.doc["topology"]
            return {"numa_per_socket": topo["numa_per_socket"], "threads_per_core": topo["threads_per_core"]}
        if time.monotonic() >= deadline:
            why = reply.error if reply is not None else "no answer"
            raise BmcError(f"{host}: the OS did not answer within {boot_timeout:.0f} s of the power-on: {why}")
        say(f"{host}: waiting for the OS ({reply.status if reply else 'no answer'})")
        time.sleep(10)


def _one(
    action, host, settings, prof, vendor_map, reboot, shutdown_timeout, say, os_view=None, check=False, run_id=None
) -> dict:
    bmc = connect(settings)
    facts = bmc_facts.gather(bmc)
    if action == "facts":
        return {"status": "ok", "bios": facts, "requests": bmc.accounting()}
    if action == "rollback":
        return rollback_host(bmc, host, facts, reboot, shutdown_timeout, say, os_view, check, run_id)
    plan = plan_bios(prof["bios"], facts, vendor_map, source=f"profile {prof['name']}")
    if action == "plan" or plan["refused"]:
        status = "refused" if plan["refused"] else "ok"
        return {"status": status, "plan": plan, "requests": bmc.accounting()}
    if action == "audit":
        return _audit(bmc, host, facts, plan, os_view)
    doc: dict = {"status": "ok", "plan": plan, "cycles": 0, "steps": []}
    if plan["patch"]:
        journal = bmc_apply.write_journal(host, settings.url, {k: facts["attributes"].get(k) for k in plan["patch"]})
        say(f"{host}: journaled {', '.join(plan['patch'])} in {journal}")
        t0 = time.monotonic()
        bmc_apply.patch(bmc, plan["patch"], facts["apply_times"])
        doc["steps"].append({"step": "PATCH Bios/Settings", "seconds": round(time.monotonic() - t0, 2), "ok": True})
        say(f"{host}: PATCHed {plan['patch']}: pending until the next reset")
    pending = {s["attribute"]: s["value"] for s in plan["steps"] if s["state"] in ("change", "pending")}
    if reboot and pending:
        doc["steps"] += cycle(bmc, host, pending, shutdown_timeout, say)[0]
        doc["cycles"] = 1
        _check_os(doc, host, plan["after_cycle"], os_view, say)
    doc["requests"] = bmc.accounting()
    return doc


def _check_os(doc: dict, host: str, after: dict, os_view, say) -> None:
    """After a cycle: the booted OS's topology against the BIOS's; a mismatch fails the host."""
    if os_view is None:
        doc["os"] = {"checked": False, "why": "--no-os-check"}
        return
    t0 = time.monotonic()
    seen = os_view(host)
    doc["steps"].append({"step": "the OS answers, facts", "seconds": round(time.monotonic() - t0, 2), "ok": True})
    doc["os"] = {"checked": True, **seen}
    say(
        f"{host}: the booted OS shows {seen['numa_per_socket']} NUMA node(s) per socket, {seen['threads_per_core']} thread(s) per core"
    )
    problems = cross_layer(after, seen)
    if problems:
        raise BmcError(f"{host}: " + "; ".join(problems))


def cycle(bmc, host, wanted: dict, shutdown_timeout, say) -> tuple[list[dict], dict]:
    """Power-cycle through the BMC: the steps, and the BIOS facts read once after it; a wanted value
    not in effect afterwards is a named failure."""
    say(f"{host}: power cycle through the BMC")
    steps = bmc_apply.power_cycle(bmc, shutdown_timeout, on_step=lambda s: say(f"{host}: {s['step']} {s['seconds']} s"))
    after = bmc_facts.gather(bmc)
    missing = bmc_apply.not_applied(after, wanted)
    if missing:
        named = ", ".join(f"{k} is {cur!r}, wanted {want!r}" for k, (cur, want) in sorted(missing.items()))
        raise BmcError(
            f"{host}: the BMC accepted the settings but did not apply them at the power cycle: {named} "
            f"(journal {bmc_apply.journal_path(host)} kept: rollback restores it)"
        )
    return steps, after


def _audit(bmc, host, facts, plan, os_view) -> dict:
    """drift, pending and cross-layer findings apart; drift and a cross-layer mismatch fail the host."""
    seen = os_view(host) if os_view is not None else None
    found = findings(plan, bios_topology(facts, with_pending=False), seen)
    kinds = {f["kind"] for f in found}
    status = "drift" if kinds & {"drift", "cross-layer"} else "pending" if kinds else "pass"
    return {
        "status": status,
        "findings": found,
        "plan": plan,
        "os": {"checked": True, **seen} if seen else {"checked": False, "why": "--no-os-check"},
        "requests": bmc.accounting(),
    }


def rollback_host(bmc, host, facts, reboot, shutdown_timeout, say, os_view=None, check=False, run_id=None) -> dict:
    """The journaled values back (every one, or ``run_id``'s): PATCHed, pending; with ``reboot``
    one power cycle, the OS checked against the BIOS; the journal's entries forgotten once in effect."""
    restore = bmc_apply.rollback_patch(host, facts["attributes"], facts["pending"], run_id)
    doc: dict = {"status": "ok", "restore": restore, "cycles": 0, "steps": []}
    if check:
        return {**doc, "check": True, "requests": bmc.accounting()}
    if restore:
        # a preset and a setting it locks come back in two PATCHes: the setting while it is unlocked
        for part in in_lock_order(facts.get("registry"), restore, {**facts["attributes"], **facts["pending"]}):
            bmc_apply.patch(bmc, part, facts["apply_times"])
            say(f"{host}: PATCHed back {part}")
    journal = bmc_apply.journaled(host, run_id)
    # every journaled value in effect (a change that was only pending is withdrawn by the PATCH): no cycle
    if all(facts["attributes"].get(k) == v for k, v in journal.items()):
        bmc_apply.forget(host, run_id)
    elif reboot:
        doc["steps"], after = cycle(bmc, host, journal, shutdown_timeout, say)
        doc["cycles"] = 1
        _check_os(doc, host, bios_topology(after), os_view, say)
        bmc_apply.forget(host, run_id)
    doc["requests"] = bmc.accounting()
    return doc
