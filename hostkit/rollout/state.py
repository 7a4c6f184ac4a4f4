"""The rollout's state file: ``<state dir>/runs/<rollout-id>/rollout.json`` (beside the Ansible
runs' directories, see :mod:`hostkit.paths`), rewritten after every step with the one atomic write
(:func:`hostkit.core.sysroot.atomic_write`): a crash leaves either the previous state or the new
one, never half a file."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hostkit.core.sysroot import atomic_write
from hostkit.errors import BadInput
from hostkit.jsonfile import read_json
from hostkit.paths import runs_dir

STATE_FILE = "rollout.json"
VERSION = 1
# Per host, the steps of its batch in order ("apply": one run of the smoke "before", the apply and
# its gates); "rollback" when a gate failed; "done" closes it, as do "failed", "rolled_back" and
# "aborted".
STEPS = ("pending", "pre_hook", "apply", "rollback", "post_hook", "done")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def run_dir(rollout_id: str) -> Path:
    if not rollout_id or not all(c.isalnum() or c in "-_T" for c in rollout_id):
        raise BadInput(f"{rollout_id!r} is not a hostkit rollout id")
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
    return state
