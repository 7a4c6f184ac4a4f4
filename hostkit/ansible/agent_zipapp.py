"""Build the host agent's zipapp on the controller: the artifact hostkit ships to hosts.

The zipapp holds the standard-library-only code that runs on a host (:mod:`hostkit.agent`,
the facts engine, the smoke test) with :mod:`hostkit.agent.main` as its entry point; a host
needs nothing but python3. ``playbooks/agent.yml`` (and the smoke role) copy it to each host
with Ansible's ``script`` module; the audit copies it over its own SSH connection.
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
    "tunables.py",
    "agent/__init__.py",
    "agent/main.py",
    "agent/sysroot.py",
    "agent/cpulist.py",
    "agent/values.py",
    "agent/kernel_args.py",
    "agent/journal_io.py",
    "agent/journal.py",
    "agent/rollback.py",
    "agent/adopt.py",
    "facts/__init__.py",
    "facts/sysroot.py",
    "facts/topology.py",
    "facts/virt.py",
    "facts/kernel.py",
    "facts/cpufreq.py",
    "facts/irqs.py",
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
MAIN = "from hostkit.agent.main import main\nif __name__ == '__main__':\n    raise SystemExit(main())\n"


def build(dest_dir: str | Path) -> Path:
    """Write ``hostkit-agent-<hash>.pyz`` into ``dest_dir`` (reused if present)."""
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
    dest = Path(dest_dir) / f"hostkit-agent-{digest}.pyz"
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(payload)
        dest.chmod(0o755)
    return dest
