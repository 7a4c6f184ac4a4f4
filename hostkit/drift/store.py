"""Baselines on the controller: ``.hostkit/baselines/<host>/<name>.json`` (under
``HOSTKIT_STATE_DIR`` when set), one file per baseline, never overwritten: re-baselining is a new
name, journaled with who, when and why.

A baseline read back is checked before anything uses it, each failure one line (bad input, exit
2, nothing written): a missing or damaged file, another format than this hostkit's, a baseline of
another host (its hostname), or a clock that went back past it.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import time
from pathlib import Path

from hostkit import __version__
from hostkit.core.sysroot import excerpt
from hostkit.errors import BadInput
from hostkit.jsonfile import check_shape, read_json
from hostkit.paths import state_dir

FORMAT = 1
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
SHAPE = {
    "format": int,
    "host": str,
    "hostname": str,
    "name": str,
    "taken": (int, float),
    "who": str,
    "why": str,
    "hostkit": str,
    "facts": dict,
    "state": dict,
    "plan": (dict, type(None)),
    "latency": (dict, type(None)),
}


def baseline_dir(host: str) -> Path:
    return state_dir() / "baselines" / host


def check_name(name: str) -> str:
    if not NAME.fullmatch(name or ""):
        raise BadInput(
            f"baseline name {excerpt(name)}: letters, digits, '.', '_' and '-', at most 64, not starting with a sign"
        )
    return name


def default_name(now: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))


def write(host: str, doc: dict) -> Path:
    """A new baseline file; an existing name is bad input (a baseline is never overwritten)."""
    d = baseline_dir(host)
    p = d / f"{doc['name']}.json"
    if p.exists():
        raise BadInput(
            f"{host}: baseline {doc['name']!r} exists ({p}): a baseline is never overwritten; choose another --name"
        )
    d.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, p)
    with open(d / "journal.log", "a") as j:  # who, when, why: one line per baseline taken
        j.write(json.dumps({"name": doc["name"], "taken": doc["taken"], "who": doc["who"], "why": doc["why"]}) + "\n")
    return p


def names(host: str) -> list[str]:
    d = baseline_dir(host)
    return (
        sorted((p.stem for p in d.glob("*.json")), key=lambda n: (d / f"{n}.json").stat().st_mtime)
        if d.is_dir()
        else []
    )


def read(host: str, name: str | None, hostname: str | None, now: float) -> dict:
    """The baseline ``name`` of ``host`` (default: the newest), checked."""
    if name is None:
        found = names(host)
        if not found:
            raise BadInput(f"{host}: no baseline in {baseline_dir(host)}: take one with hostkit baseline")
        name = found[-1]
    check_name(name)
    p = baseline_dir(host) / f"{name}.json"
    return check(read_json(p, missing=f"{host}: no baseline {name!r} ({p})"), host, p, hostname, now)


def check(doc, host: str, where: Path, hostname: str | None, now: float) -> dict:
    """A baseline document read from ``where``: this hostkit's format, its shape, taken on
    ``hostname`` (when given) and not in the future. The one check of the controller's baselines
    and of the copy a host keeps for its scheduled run (:mod:`hostkit.drift.on_host`)."""
    if not isinstance(doc, dict) or "format" not in doc:
        raise BadInput(f"{host}: baseline {where} is not a hostkit baseline")
    if doc["format"] != FORMAT:
        raise BadInput(
            f"{host}: baseline {where} has format {excerpt(doc['format'])} (hostkit {excerpt(doc.get('hostkit'))}); "
            f"this hostkit reads format {FORMAT}: take a new baseline"
        )
    check_shape(doc, SHAPE, f"baseline {where}")
    if hostname is not None:
        check_host(host, doc, hostname, where)
    if now < doc["taken"]:
        raise BadInput(
            f"{host}: baseline {where} was taken {doc['taken'] - now:.0f} s in the future: the clock went back"
        )
    return doc


def check_host(host: str, doc: dict, hostname: str, where: Path | None = None) -> None:
    """A baseline read back belongs to the host it is compared with (the facts' hostname)."""
    if doc["hostname"] != hostname:
        where = where or baseline_dir(host) / f"{doc['name']}.json"
        raise BadInput(f"{host}: baseline {where} was taken on {doc['hostname']!r}, this host is {hostname!r}")


def new(
    host: str, name: str, facts: dict, state: dict, plan: dict | None, latency: dict | None, why: str, now: float
) -> dict:
    try:
        who = getpass.getuser()
    except (KeyError, OSError):
        who = str(os.getuid())
    return {
        "format": FORMAT,
        "host": host,
        "hostname": facts.get("hostname") or host,
        "name": name,
        "taken": now,
        "who": who,
        "why": why,
        "hostkit": __version__,
        "facts": facts,
        "state": state,
        "plan": plan,
        "latency": latency,
    }
