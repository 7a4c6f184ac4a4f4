"""Adopt a host tuned by another tool: record its current tuning as a baseline run.

Kernel arguments in the boot config and sysctls set with no hostkit journal cannot be told
apart from the distribution's defaults after the fact. ``adopt`` writes a journal run marked
``adopted`` whose entries hold the current content of every file and value hostkit manages
(before = after = now). The apply that follows journals its own changes on top, so a rollback
returns the host to exactly this adopted state, and history shows where the baseline came from.
"""

from __future__ import annotations

import glob
import json
import os
import secrets
import time

from hostkit.agent.journal_io import Journal, file_state
from hostkit.core.sysroot import atomic_write, sysroot_path
from hostkit.tunables import adopted_patterns, adopted_values


def adopt(sysroot: str = "/") -> dict:
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-adopt-" + secrets.token_hex(3)
    journal = Journal(sysroot, run_id)
    root = sysroot_path(sysroot, "/")
    paths = []  # the files and values hostkit.tunables declares
    for pattern in adopted_patterns():
        paths += sorted("/" + os.path.relpath(p, root) for p in glob.glob(sysroot_path(sysroot, pattern)))
    files = []
    for path in paths:
        state = file_state(sysroot_path(sysroot, path))
        if state["exists"]:
            files.append(path)
            journal.record(
                {
                    "kind": "file",
                    "role": "adopt",
                    "path": path,
                    "before": state,
                    "after": {"exists": True},
                    "created_dirs": [],
                }
            )
    items = []
    for pattern, kind in adopted_values():
        path_list = (
            sorted("/" + os.path.relpath(p, root) for p in glob.glob(sysroot_path(sysroot, pattern)))
            if "[" in pattern or "*" in pattern
            else [pattern]
        )
        for path in path_list:
            try:
                with open(sysroot_path(sysroot, path)) as f:
                    value = f.read().rstrip("\n")
            except OSError:
                continue
            items.append({"path": path, "before": value, "after": value, "kind": kind})
    if items:
        journal.record({"kind": "values", "role": "adopt", "items": items})
    doc = journal.load()
    doc["adopted"] = True
    atomic_write(journal.path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode(), mode=0o600)
    return {"run_id": run_id, "files": files, "values": [i["path"] for i in items], "changed": False}
