"""Reading a host's journal: which runs changed what, and whether they were rolled back."""

from __future__ import annotations

import json
import os

from hostkit.agent.journal_io import JOURNAL_DIR
from hostkit.agent.sysroot import sysroot_path
from hostkit.errors import FactsError

ROLLBACK_SUFFIX = ".rollback.json"


def journal_dir(sysroot: str) -> str:
    return sysroot_path(sysroot, JOURNAL_DIR)


def load_runs(sysroot: str) -> list[dict]:
    """Every run's journal document, oldest first (run ids start with a UTC timestamp)."""
    d = journal_dir(sysroot)
    if not os.path.isdir(d):
        return []
    runs = []
    for name in sorted(os.listdir(d)):
        if not name.endswith(".json") or name.endswith(ROLLBACK_SUFFIX):
            continue
        path = os.path.join(d, name)
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as exc:
            raise FactsError(f"journal {path} is unreadable: {exc}") from None
        rb = path[: -len(".json")] + ROLLBACK_SUFFIX
        doc["rolled_back"] = None
        if os.path.exists(rb):
            try:
                with open(rb) as f:
                    doc["rolled_back"] = json.load(f).get("time")
            except (OSError, ValueError):
                doc["rolled_back"] = "unknown"
        runs.append(doc)
    runs.sort(key=lambda r: (r.get("started", ""), r.get("run_id", "")))
    return runs


def entry_paths(entry: dict) -> list[str]:
    if "items" in entry:  # kind values (files under /proc, /sys) or kthreads (/proc/<pid>)
        return [i["path"] for i in entry.get("items", [])]
    return [entry["path"]]


def history(sysroot: str) -> dict:
    out = []
    for run in load_runs(sysroot):
        entries = run.get("entries", [])
        roles = sorted({e.get("role") or "-" for e in entries})
        out.append({
            "run_id": run.get("run_id"),
            "started": run.get("started"),
            "adopted": bool(run.get("adopted")),
            "entries": len(entries),
            "changes": sum(len(entry_paths(e)) for e in entries),
            "roles": roles,
            "last_change": entries[-1]["time"] if entries else None,
            "rolled_back": run.get("rolled_back"),
        })
    return {"runs": out}
