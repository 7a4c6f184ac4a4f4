"""``hostkit baseline`` and ``hostkit drift`` over an inventory: facts (one Ansible run), the plan of
each host, and the smoke test (one run, the smoke role) for the latency signature; then each host's
baseline written, or its drift judged against one.

Every input is checked before any host is contacted: the inventory, each host's profile, a
baseline's name (and that it is new), and for drift each host's baseline (present, readable, this
hostkit's format, not from the future). A baseline of another host is refused once the facts give
the host's name.
"""

from __future__ import annotations

import time

from hostkit.drift import latency, state, store
from hostkit.drift.verdict import counted_differences, verdict
from hostkit.errors import BadInput


def _facts(inventory: str, limit: str | None, forks: int | None, on_event) -> dict:
    """Each host's facts, with ``bios`` read from its BMC where it has one."""
    from hostkit.ansible.agent_call import call_agent
    from hostkit.bmc.facts import add_to_replies

    replies, _run = call_agent(inventory, ["facts"], limit, forks=forks, on_event=on_event)
    add_to_replies(inventory, limit, replies)
    return replies


def _smoke(measure, options) -> dict:
    """Per host the latency signature of one smoke run (``measure(options)``: the api's smoke over
    the same inventory and limit, host -> its reply)."""
    out = {}
    for h, r in measure(options).items():
        if r.ok:
            out[h] = latency.signature(r.doc)
        else:
            out[h] = {"error": r.error or r.status}
    return out


def _plan(name: str, facts: dict, profile: dict, pinned: dict, hostvars: dict) -> dict | None:
    """The OS plan of the host, with ``bios_attributes`` (attribute -> value its BIOS plan sets)
    for a host whose BMC was read; None: no plan, every difference is "not planned"."""
    from hostkit.plan import build_plan

    try:
        plan = build_plan(facts, profile, pinned, force=True, host=name).to_dict()
    except BadInput:
        plan = None
    bios = facts.get("bios")
    if bios and "error" not in bios and hostvars.get("hostkit_bmc") is not None:
        from hostkit.bmc.client import bmc_settings
        from hostkit.bmc.plan import plan_bios

        try:
            steps = plan_bios(profile["bios"], bios, bmc_settings(name, hostvars["hostkit_bmc"]).vendor_map)["steps"]
        except BadInput:  # no vendor map for this BMC: its attributes are "not planned"
            steps = []
        plan = {**(plan or {}), "bios_attributes": {st["attribute"]: st["value"] for st in steps}}
    return plan


def take(inventory, limit, name, why, profile, options, measure=None, forks=None, on_event=None) -> dict[str, dict]:
    """``measure``: the smoke run (None: no latency signature)."""
    from hostkit.ansible.inventory import load_inventory
    from hostkit.profiles import for_host

    now = time.time()
    name = store.check_name(name or store.default_name(now))
    hosts = load_inventory(inventory, limit)
    profiles = {h.name: for_host(h.name, h.vars, profile) for h in hosts}
    hostvars = {h.name: h.vars for h in hosts}
    for h in hosts:
        if (store.baseline_dir(h.name) / f"{name}.json").exists():
            raise BadInput(
                f"{h.name}: baseline {name!r} exists: a baseline is never overwritten; choose another --name"
            )
    replies = _facts(inventory, limit, forks, on_event)
    smoke = measure is not None
    lat = _smoke(measure, options) if smoke else {}
    out = {}
    for host, r in replies.items():
        if not r.ok:
            out[host] = {"status": "failed", "error": r.error or r.status}
            continue
        if smoke and "error" in lat.get(host, {"error": "no smoke run"}):
            out[host] = {"status": "failed", "error": f"the smoke run failed: {lat.get(host, {}).get('error')}"}
            continue
        prof, pinned = profiles[host]
        doc = store.new(
            host,
            name,
            r.doc,
            state.effective_state(r.doc),
            _plan(host, r.doc, prof, pinned, hostvars[host]),
            lat.get(host),
            why,
            now,
        )
        path = store.write(host, doc)
        out[host] = {"status": "ok", "baseline": name, "path": str(path), "latency": _brief(doc["latency"])}
    return out


def _brief(lat: dict | None) -> dict | None:
    return None if lat is None else {k: lat[k] for k in ("samples", "p999_ms", "duration")}


def judge(inventory, limit, against, options, measure=None, forks=None, on_event=None) -> dict[str, dict]:
    """``measure``: the smoke run (None: latency NOT MEASURED)."""
    from hostkit.ansible.inventory import load_inventory

    now = time.time()
    hosts = load_inventory(inventory, limit)
    baselines = {h.name: store.read(h.name, against, None, now) for h in hosts}  # bad input before any run
    if options.inject_stall_ms and measure is not None:
        flat = sorted(h for h, b in baselines.items() if not b["latency"])
        if flat:
            raise BadInput(
                f"--inject-stall: the baseline of {', '.join(flat)} has no latency (taken with --no-smoke): "
                "a calibration needs a tail to compare with"
            )
    replies = _facts(inventory, limit, forks, on_event)
    for host, r in replies.items():
        if r.ok:
            store.check_host(host, baselines[host], r.doc.get("hostname") or host)
    smoke = measure is not None
    measured = smoke and any(b["latency"] for b in baselines.values())
    lat = _smoke(measure, options) if measured else {}
    out = {}
    for host, r in replies.items():
        base = baselines[host]
        if not r.ok:
            out[host] = {"status": "failed", "error": r.error or r.status}
            continue
        diffs = state.differences(base["state"], state.effective_state(r.doc), base["plan"])
        counted = counted_differences(diffs)
        lat_doc = None
        if base["latency"] and smoke:
            now_lat = lat.get(host) or {"error": "no smoke run"}
            if "error" in now_lat:
                out[host] = {"status": "failed", "error": f"the smoke run failed: {now_lat['error']}"}
                continue
            lat_doc = latency.against(base["latency"], now_lat)
            if options.inject_stall_ms:
                lat_doc["injected"] = {"stall_ms": options.inject_stall_ms, "every_s": options.inject_every_s}
                lat_doc["basis"] = (
                    f"calibration, {options.inject_stall_ms:g} ms stalls injected every "
                    f"{options.inject_every_s:g} s: {lat_doc['basis']}"
                )
        out[host] = verdict(base["name"], diffs, counted, lat_doc)
    return out
