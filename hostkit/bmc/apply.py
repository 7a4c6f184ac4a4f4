"""Setting a host's BIOS through its BMC, and rolling it back exactly.

Before any PATCH the old value of every attribute hostkit touches is journaled on the controller
(``.hostkit/bios/<host>.json``: the OS may not come back to hold it). The PATCH goes to
``Bios/Settings`` (``OnReset`` where the BMC offers apply times). ``reboot`` power-cycles through
``ComputerSystem.Reset``: ``GracefulShutdown``, ``ForceOff`` if the host is not off within the
shutdown timeout, then ``On``; then the BIOS is read again, and a setting still pending after the
cycle is a named failure (the journal stays, so rollback works).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from hostkit.bmc.client import Bmc, BmcError
from hostkit.errors import BadInput
from hostkit.jsonfile import read_json
from hostkit.paths import state_dir

SHUTDOWN_TIMEOUT = 120  # seconds a graceful shutdown may take before ForceOff
POWER_TIMEOUT = 120  # seconds for the BMC to report Off after ForceOff, or On after On


def journal_path(host: str) -> Path:
    return state_dir() / "bios" / f"{host}.json"


def read_journal(host: str) -> dict | None:
    p = journal_path(host)
    return read_json(p) if p.exists() else None


def write_journal(host: str, bmc_url: str, old: dict, run_id: str | None = None) -> Path:
    """Journal ``old`` (attribute -> value before hostkit's first change); an attribute already
    journaled keeps its first value, so a second apply never loses the original. ``run_id``: the
    hostkit run that changed it first (``runs``), whose rollback restores it; None for ``hostkit bios
    apply``, which belongs to no run."""
    doc = read_journal(host) or {"host": host, "bmc": bmc_url, "attributes": {}, "since": time.time()}
    runs = doc.setdefault("runs", {})
    for name, value in old.items():
        if name not in doc["attributes"]:
            doc["attributes"][name] = value
            runs[name] = run_id
    return _write(host, doc)


def _write(host: str, doc: dict) -> Path:
    p = journal_path(host)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    tmp.replace(p)
    return p


def journaled(host: str, run_id: str | None = None) -> dict:
    """attribute -> old value of what the journal holds: every attribute, or with ``run_id`` those
    that run changed first (a journal from before runs were recorded names none)."""
    return _entries(read_journal(host) or {"attributes": {}}, run_id)


def _entries(j: dict, run_id: str | None) -> dict:
    """:func:`journaled` of a journal document already read."""
    if run_id is None:
        return dict(j["attributes"])
    runs = j.get("runs") or {}
    return {k: v for k, v in j["attributes"].items() if runs.get(k) == run_id}


def patch(bmc: Bmc, attributes: dict, apply_times: list[str]) -> None:
    """PATCH ``Bios/Settings``; ``OnReset`` where the BMC says it takes it."""
    if not attributes:
        return
    bios = bmc.call("reading the BIOS", lambda: bmc.system.bios)
    kwargs = {}
    if any("onreset" in t.lower().replace("_", "") for t in apply_times):
        from sushy import ApplyTime

        kwargs["apply_time"] = ApplyTime.ON_RESET
    bmc.call("PATCHing Bios/Settings", bios.set_attributes, attributes, **kwargs)


def power_cycle(bmc: Bmc, shutdown_timeout: float = SHUTDOWN_TIMEOUT, on_step=None) -> list[dict]:
    """Off (graceful, then forced), then on. Returns the steps with their wall times."""
    steps = []

    def step(name, fn):
        t0 = time.monotonic()
        ok = fn()
        steps.append({"step": name, "seconds": round(time.monotonic() - t0, 2), "ok": ok})
        if on_step:
            on_step(steps[-1])
        return ok

    host = bmc.settings.host
    if bmc.power_state().lower().endswith("on"):
        bmc.reset("GracefulShutdown")
        if not step("graceful shutdown", lambda: bmc.wait_power(False, shutdown_timeout)):
            bmc.reset("ForceOff")
            if not step("forced off", lambda: bmc.wait_power(False, POWER_TIMEOUT)):
                raise BmcError(f"{host}: the BMC did not report the host off within {POWER_TIMEOUT} s of ForceOff")
    bmc.reset("On")
    if not step("power on", lambda: bmc.wait_power(True, POWER_TIMEOUT)):
        raise BmcError(f"{host}: the BMC did not report the host on within {POWER_TIMEOUT} s of On")
    return steps


def not_applied(facts: dict, wanted: dict) -> dict:
    """After a cycle: attribute -> (current, wanted) of every wanted value not in effect."""
    now = facts["attributes"]
    return {k: (now.get(k), v) for k, v in wanted.items() if now.get(k) != v}


def rollback_patch(host: str, current: dict, pending: dict, run_id: str | None = None) -> dict:
    """The PATCH that brings the journaled values back (every one, or ``run_id``'s; only those not
    already current and pending)."""
    j = read_journal(host)
    if j is None:
        raise BadInput(f"{host}: no BIOS journal ({journal_path(host)}): hostkit changed nothing to roll back")
    return {k: v for k, v in _entries(j, run_id).items() if current.get(k) != v or pending.get(k, current.get(k)) != v}


def forget(host: str, run_id: str | None = None) -> None:
    """The journal's entries restored: all of them, or ``run_id``'s (the file goes with its last)."""
    j = read_journal(host)
    if j is None:
        return
    for name in _entries(j, run_id):
        j["attributes"].pop(name, None)
        (j.get("runs") or {}).pop(name, None)
    if j["attributes"]:
        _write(host, j)
    else:
        journal_path(host).unlink(missing_ok=True)
