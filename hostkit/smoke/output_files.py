"""Where smoke results are written (Prometheus textfiles, plots): the target checked before a run,
a host's file beside the fleet's, and the one atomic write.

Files are written atomically (a temporary file in the target's directory, fsync, rename): a
reader such as node_exporter's textfile collector sees the old file or the new one, never part
of one. With ``hostkit smoke -i`` each host gets its own file beside the fleet's (``host_path``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from hostkit.core.sysroot import atomic_write
from hostkit.errors import BadInput
from hostkit.jsonfile import check_name


def check_output(path: str, option: str) -> None:
    """Bad input before anything runs: ``option``'s file must go into an existing, writable directory."""
    target = Path(check_name(path, option))
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise BadInput(f"{option} {path}: is a directory; give a file name")
    if not parent.is_dir():
        raise BadInput(f"{option} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BadInput(f"{option} {path}: directory {parent} is not writable")


def host_path(path: str, host: str) -> str:
    """A host's file beside the fleet's: ``smoke.prom`` -> ``smoke-web1.prom`` (the host name with
    anything but letters, digits, ``.``, ``_`` and ``-`` replaced by ``_``)."""
    p = Path(path)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", host)
    return str(p.with_name(f"{p.stem}-{safe}{p.suffix}"))


def write_atomic(path: str, data: bytes) -> None:
    """Temporary file in the same directory, fsync, rename over ``path`` (mode 0644)."""
    atomic_write(os.path.abspath(path), data, mode=0o644)
