"""Build the host agent's zipapp on the controller: the artifact hostkit ships to hosts.

The zipapp holds the standard-library-only code that runs on a host (:mod:`hostkit.agent`,
the facts engine, the smoke test) with :mod:`hostkit.agent.main` as its entry point; a host
needs nothing but python3. ``playbooks/agent.yml`` (and the smoke role) copy it to each host
with Ansible's ``script`` module; the audit copies it over its own SSH connection.
"""

from __future__ import annotations

import ast
import hashlib
import io
import zipfile
from pathlib import Path

import hostkit

PACKAGE_ROOT = Path(hostkit.__file__).parent
ENTRY = "agent/main.py"


def shipped() -> list[str]:
    """The agent's entry point and every hostkit module it imports, transitively (each package's
    ``__init__.py`` included), as paths relative to the package. Each of them must import nothing
    outside the standard library and this set (tests/test_agent.py checks it with python3 -I -S)."""
    todo, seen = [ENTRY], set()
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        for node in ast.walk(ast.parse((PACKAGE_ROOT / rel).read_text(), rel)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for parts in (n.split(".") for n in names if n.split(".")[0] == "hostkit"):
                for i in range(1, len(parts) + 1):
                    base = "/".join(parts[1:i])
                    todo += [c for c in (f"{base}/__init__.py" if base else "__init__.py", f"{base}.py")
                             if (PACKAGE_ROOT / c).is_file()]
    return sorted(seen)


# The guard matters: the smoke test spawns processes, and multiprocessing's spawn re-imports the
# main module (as __mp_main__) in every child.
MAIN = "from hostkit.agent.main import main\nif __name__ == '__main__':\n    raise SystemExit(main())\n"


def build(dest_dir: str | Path) -> Path:
    """Write ``hostkit-agent-<hash>.pyz`` into ``dest_dir`` (reused if present)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in shipped():
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
