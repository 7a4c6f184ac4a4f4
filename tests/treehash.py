"""Hash of every file of a tree, modes included: "no byte changed" in one comparison."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path


def tree_hash(root: str | Path) -> dict[str, str]:
    out = {}
    root = str(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if os.path.islink(p):
                out[rel] = f"link:{os.readlink(p)}"
            elif os.path.isdir(p):
                out[rel] = f"dir:{oct(st.st_mode)}"
            elif not stat.S_ISREG(st.st_mode):  # a FIFO or a device: its type and mode, never read
                out[rel] = f"special:{oct(st.st_mode)}"
            else:
                out[rel] = f"{oct(st.st_mode)}:{hashlib.sha256(Path(p).read_bytes()).hexdigest()}"
    return out
