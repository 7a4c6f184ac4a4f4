"""The rollout's state file: ``<state dir>/runs/<rollout-id>/rollout.json`` (beside the Ansible
runs' directories, see :mod:`hostkit.paths`), rewritten after every step with the one atomic write
(:func:`hostkit.core.sysroot.atomic_write`): a crash leaves either the previous state or the new
one, never half a file."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hostkit.core.sysroot import atomic_write, excerpt
from hostkit.errors import BadInput
from hostkit.jsonfile import COUNT, INTEGER, NUMBER, OPT_NUMBER, Nullable, check_name, check_shape, read_json
from hostkit.paths import runs_dir

STATE_FILE = "rollout.json"
VERSION = 1
# Per host, the steps of its batch in order ("drift": the drift gate, with --drift-gate; "apply": one
# run of the smoke "before", the apply and its gates); "rollback" when a gate failed; "done" closes
# it, as do "failed", "rolled_back" and "aborted".
STEPS = ("pending", "pre_hook", "drift", "apply", "rollback", "post_hook", "done")

_OPT_STR = (str, type(None))
_OPT_DICT = (dict, type(None))
_SMOKE_GATE = Nullable({"verdict?": str, "p999_ms?": OPT_NUMBER, "target_p999_ms?": OPT_NUMBER, "why?": _OPT_STR})
# What the rollout (hostkit.rollout.driver, .report) reads of its state file, and the type of each:
# a file edited or damaged by hand is bad input naming the first wrong field, before anything runs.
SHAPE = {
    "rollout_id": str,
    "status": str,
    "created": str,
    "updated?": _OPT_STR,
    "request": {
        "inventory": str,
        "batch": str,
        "limit?": _OPT_STR,
        "canary?": COUNT,
        "max_failures?": COUNT,
        "max_unavailable?": Nullable(COUNT),
        "reboot?": bool,
        "reboot_timeout?": NUMBER,
        "target_p999_ms?": OPT_NUMBER,
        "smoke_duration?": OPT_NUMBER,
        "profile?": _OPT_STR,
        "force?": bool,
        "hook_timeout?": NUMBER,
        "drift_gate?": bool,
        "drift_against?": _OPT_STR,
    },
    "controller?": Nullable({"host?": str, "pid?": COUNT}),
    "batches": [
        {
            "index": INTEGER,
            "canary": bool,
            "hosts": [str],
            "status": str,
            "apply_runs?": [str],
            "started?": _OPT_STR,
            "finished?": _OPT_STR,
        }
    ],
    "hosts": {
        str: {
            "batch": COUNT,
            "status": str,
            "step": str,
            "runs": [str],
            "out?": bool,
            "gate": Nullable({"gate": str, "why": str}),
            "before?": _SMOKE_GATE,
            "after?": _SMOKE_GATE,
            "audit?": _OPT_DICT,
            "drift?": _OPT_DICT,
            "rollback?": Nullable({"ok": bool, "runs": [str], "why?": str}),
            "hooks?": list,
        }
    },
    "failed_hosts?": COUNT,
    "failure?": Nullable({"batch": COUNT, "host": str, "gate": str, "why": str}),
    "events?": list,
    "abort?": Nullable({"at": str, "errors": [str]}),
}


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def run_dir(rollout_id: str) -> Path:
    if not rollout_id or not all(c.isalnum() or c in "-_T" for c in rollout_id):
        raise BadInput(f"{excerpt(rollout_id)} is not a hostkit rollout id")
    check_name(rollout_id, "rollout id")
    return runs_dir() / rollout_id


def save(state: dict) -> Path:
    d = run_dir(state["rollout_id"])
    d.mkdir(parents=True, exist_ok=True)
    state["updated"] = now()
    path = d / STATE_FILE
    atomic_write(str(path), (json.dumps(state, indent=1, sort_keys=False) + "\n").encode(), mode=0o600)
    return path


def load(rollout_id: str) -> dict:
    path = run_dir(rollout_id) / STATE_FILE
    state = read_json(
        path, f"no rollout {rollout_id} under {runs_dir()} (HOSTKIT_STATE_DIR or .hostkit/ of this directory)"
    )
    if not isinstance(state, dict) or state.get("version") != VERSION:
        raise BadInput(f"{path} is not a version-{VERSION} rollout state file")
    check_shape(state, SHAPE, str(path))
    if state["rollout_id"] != rollout_id:
        raise BadInput(f"{path} is the state of rollout {excerpt(state['rollout_id'])}, not {rollout_id!r}")
    for i, b in enumerate(state["batches"]):
        if b["index"] != i or any(h not in state["hosts"] or state["hosts"][h]["batch"] != i for h in b["hosts"]):
            raise BadInput(f"{path}: batch {i} does not match the hosts' records (index, hosts, batch)")
    if any(rec["batch"] >= len(state["batches"]) for rec in state["hosts"].values()):
        raise BadInput(f"{path}: a host's batch is not one of the rollout's batches")
    return state
