"""The rollout's state file: ``<state dir>/runs/<rollout-id>/rollout.json`` (beside the Ansible
runs' directories, see :mod:`hostkit.paths`), rewritten after every step: a temporary file in the
same directory, fsync, rename over the old one, fsync of the directory. A crash leaves either the
previous state or the new one, never half a file."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from hostkit.errors import BadInput
from hostkit.jsonfile import read_json
from hostkit.paths import runs_dir

STATE_FILE = "rollout.json"
VERSION = 1
# Per host, the steps of its batch in order; "done" and the end states close it.
STEPS = ("pending", "pre_hook", "smoke_before", "apply", "audit", "smoke_after", "post_hook", "done")
END_STATES = ("done", "failed", "rolled_back", "aborted")


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
    fd, tmp = tempfile.mkstemp(prefix=".rollout-", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(state, f, indent=1, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return path


def load(rollout_id: str) -> dict:
    path = run_dir(rollout_id) / STATE_FILE
    state = read_json(path, f"no rollout {rollout_id} under {runs_dir()} (HOSTKIT_STATE_DIR or .hostkit/ of this "
                            "directory)")
    if not isinstance(state, dict) or state.get("version") != VERSION:
        raise BadInput(f"{path} is not a version-{VERSION} rollout state file")
    return state
