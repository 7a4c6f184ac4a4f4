"""The self-contained artifact hostkit ships to hosts (a zipapp needing only python3).

It holds the standard-library-only parts of hostkit (the facts engine and
the cpulist helpers) and :mod:`hostkit.remote` as its entry point. Ansible's
``script`` module copies it to each host and runs it with the host's python3.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import hostkit

PACKAGE_ROOT = Path(hostkit.__file__).parent
# Modules that must import nothing outside the standard library and this list.
SHIPPED = [
    "__init__.py",
    "errors.py",
    "cpulist.py",
    "remote.py",
    "facts/__init__.py",
    "facts/sysroot.py",
    "facts/topology.py",
    "facts/virt.py",
    "facts/kernel.py",
    "facts/cpufreq.py",
    "facts/irqs.py",
    "state/__init__.py",
    "state/journal_io.py",
    "state/journal.py",
    "state/rollback.py",
    "state/adopt.py",
    "smoke/__init__.py",
    "smoke/queue.py",
    "smoke/model.py",
    "smoke/worker.py",
    "smoke/client.py",
    "smoke/metrics.py",
    "smoke/diagnose.py",
    "smoke/runner.py",
]

# The guard matters: the smoke test spawns processes, and multiprocessing's spawn re-imports the
# main module (as __mp_main__) in every child.
MAIN = "from hostkit.remote import main\nif __name__ == '__main__':\n    raise SystemExit(main())\n"


def build(dest_dir: str | Path) -> Path:
    """Write ``hostkit-runtime-<hash>.pyz`` into ``dest_dir`` (reused if present)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in SHIPPED:
            info = zipfile.ZipInfo(f"hostkit/{rel}", date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, (PACKAGE_ROOT / rel).read_bytes())
        info = zipfile.ZipInfo("__main__.py", date_time=(2020, 1, 1, 0, 0, 0))
        zf.writestr(info, MAIN)
    payload = b"#!/usr/bin/env python3\n" + buf.getvalue()
    digest = hashlib.sha256(payload).hexdigest()[:12]
    dest = Path(dest_dir) / f"hostkit-runtime-{digest}.pyz"
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(payload)
        dest.chmod(0o755)
    return dest
