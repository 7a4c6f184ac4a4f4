"""Files generated from the code (role READMEs, role variables): write them, or check they are fresh."""

from __future__ import annotations

import sys
from pathlib import Path


def sync(files: dict[Path, str], what: str, script: str) -> int:
    """Write every stale file of ``files`` (path -> its generated text); with ``--check`` in argv,
    write nothing and return 1 when one is stale, naming them (tests run the scripts so)."""
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    if "--check" not in sys.argv:
        for p in stale:
            p.write_text(files[p])
        return 0
    if stale:
        print(f"stale {what} (run {script}):", *map(str, stale), sep="\n  ")
        return 1
    return 0
