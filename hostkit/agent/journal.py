"""Reading a host's journal: which runs changed what, and whether they were rolled back."""

from __future__ import annotations

import json
import os

from hostkit.agent.journal_io import JOURNAL_DIR
from hostkit.core.sysroot import excerpt, sysroot_path
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
        problem = journal_problem(doc)
        if problem:
            raise FactsError(f"journal {path} is not a hostkit journal: {problem}")
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


# What every journal entry kind holds (journal_io.change_file, the values and kthreads modules):
# history and rollback read these fields, and nothing is restored from a journal that lacks one.
ENTRY_FIELDS = {
    "file": {"path": str, "before": dict},
    "values": {"items": list},
    "kthreads": {"items": list},
}
ITEM_FIELDS = {"values": {"path": str, "before": str}, "kthreads": {"path": str, "before": str}}


def journal_problem(doc) -> str | None:
    """Why a journal document is not one hostkit wrote (the first wrong field), or None."""
    if not isinstance(doc, dict):
        return f"a {type(doc).__name__}, not an object"
    for key, kind in (("run_id", str), ("started", str), ("entries", list)):
        if not isinstance(doc.get(key), kind):
            return f"{key} is missing or not a {kind.__name__}"
    for n, e in enumerate(doc["entries"], 1):
        if not isinstance(e, dict) or not isinstance(e.get("time"), str):
            return f"entry {n} is not an object with a time"
        kind = e.get("kind", "file")
        fields = ENTRY_FIELDS.get(kind)
        if fields is None:
            return f"entry {n} is of an unknown kind {excerpt(kind)}"
        for key, t in fields.items():
            if not isinstance(e.get(key), t):
                return f"entry {n} ({kind}): {key} is missing or not a {t.__name__}"
        if kind == "file" and not isinstance(e["before"].get("exists"), bool):
            return f"entry {n} (file): before.exists is missing"
        for m, item in enumerate(e.get("items") or [], 1):
            if not isinstance(item, dict) or not all(isinstance(item.get(k), t) for k, t in ITEM_FIELDS[kind].items()):
                return f"entry {n} ({kind}): item {m} lacks a path or a previous value"
    return None


def entry_paths(entry: dict) -> list[str]:
    if "items" in entry:  # kind values (files under /proc, /sys) or kthreads (/proc/<pid>)
        return [i["path"] for i in entry.get("items", [])]
    return [entry["path"]]


def history(sysroot: str) -> dict:
    out = []
    for run in load_runs(sysroot):
        entries = run.get("entries", [])
        roles = sorted({e.get("role") or "-" for e in entries})
        out.append(
            {
                "run_id": run.get("run_id"),
                "started": run.get("started"),
                "adopted": bool(run.get("adopted")),
                "entries": len(entries),
                "changes": sum(len(entry_paths(e)) for e in entries),
                "roles": roles,
                "last_change": entries[-1]["time"] if entries else None,
                "rolled_back": run.get("rolled_back"),
            }
        )
    return {"runs": out}
