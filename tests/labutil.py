"""Helpers for lab tests: run the CLI, edit the lab inventory, hash sysroots."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.conftest import excluding_hostkit_state
from tests.treehash import tree_hash


def cli(*args, timeout: int = 600):
    return subprocess.run(
        [sys.executable, "-m", "hostkit.cli", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def cli_json(*args):
    proc = cli(*args, "--json")
    try:
        return proc.returncode, json.loads(proc.stdout), proc
    except json.JSONDecodeError:
        raise AssertionError(
            f"no JSON from hostkit {' '.join(map(str, args))}: rc={proc.returncode}\n"
            f"stdout={proc.stdout[-2000:]}\nstderr={proc.stderr[-2000:]}"
        ) from None


def inventory_with(lab, path: Path, host_vars: dict[str, dict]) -> Path:
    """A copy of the lab inventory with extra variables per host."""
    inv = yaml.safe_load(lab.inventory.read_text())
    hosts = inv["all"]["children"]["lab"]["hosts"]
    for name, extra in host_vars.items():
        hosts[name].update(extra)
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return path


def trees(lab) -> dict[str, dict[str, str]]:
    return {h.name: excluding_hostkit_state(tree_hash(h.sysroot)) for h in lab.hosts()}


def sysroot(lab, name: str) -> Path:
    return Path(next(h.sysroot for h in lab.hosts() if h.name == name))


def start_apply_and_wait_for_changes(lab, host: str, changes: int = 2, timeout: float = 120):
    """Start `hostkit apply --limit host` in the background; return it once ``changes`` journal
    entries exist on the host (mid-run, for fault tests). Fails the test if that never happens."""
    import pytest

    journal = sysroot(lab, host) / "var/lib/hostkit/journal"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hostkit.cli", "apply", "-i", str(lab.inventory), "--limit", host, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        files = list(journal.glob("*.json")) if journal.exists() else []
        if files and files[0].read_text().count('"seq"') >= changes:
            return proc
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"the apply never journaled {changes} changes on {host}")


class Fleet:
    """A module's lab fleet, moved on demand between two states, so that no test depends on which
    tests ran before it: ``pristine()`` (every tree as the lab made it, hostkit's own state aside)
    and ``applied()`` (one apply of the inventory, whose JSON it returns). Each move is one apply or
    one rollback, made only when the fleet is not already in the state asked for; a test that
    changes the fleet in another way puts it back itself."""

    def __init__(self, lab, inventory: Path):
        self.lab, self.inventory = lab, inventory
        self.before = trees(lab)
        self.apply_doc: dict | None = None  # the JSON of the apply in force
        self.rollbacks = 0  # fleet-wide rollbacks so far

    def applied(self) -> dict:
        if self.apply_doc is None:
            rc, doc, proc = cli_json("apply", "-i", self.inventory)
            assert rc == 0, (
                rc,
                {h: (r.get("status"), r.get("msg")) for h, r in (doc or {}).get("hosts", {}).items()},
                proc.stderr[-3000:],
            )
            self.apply_doc = doc
        return self.apply_doc

    def pristine(self, rolled_back: bool = False) -> None:
        """With ``rolled_back``: also make sure the newest run on every host is one that was rolled back."""
        if rolled_back and self.apply_doc is None and self.rollbacks == 0:
            self.applied()
        if self.apply_doc is not None:
            self.roll_back()

    def roll_back(self) -> dict:
        """Roll the applied fleet back (the test of rollback itself calls this and asserts on the result)."""
        assert self.apply_doc is not None, "roll_back() on a fleet that is not applied"
        rc, doc, proc = cli_json("rollback", "-i", self.inventory)
        assert rc == 0, proc.stdout[-3000:]
        self.apply_doc = None
        self.rollbacks += 1
        return doc
