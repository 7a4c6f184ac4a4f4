"""``hostkit collection install``: the collection ``hostkit.tuning`` this hostkit carries, installed
where Ansible finds it, so that ``ansible-playbook hostkit.tuning.rollout`` and
``ansible-doc -l hostkit.tuning`` work without the ``hostkit`` command.

An installed wheel carries the assembled collection (:data:`hostkit.paths.INSTALLED_COLLECTIONS`);
a checkout has none, and the repository's one assembler (``scripts/build_collection.py``) makes it.
Either tree is built with ``ansible-galaxy collection build`` and installed with ``ansible-galaxy
collection install`` (its own checks: the version, the files' checksums).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hostkit.errors import BadInput, HostkitError
from hostkit.paths import COLLECTION_NAME, COLLECTION_NAMESPACE, collection_dir, layout

# Where Ansible looks first when nothing else is configured (its COLLECTIONS_PATHS default).
DEFAULT_PATH = Path("~/.ansible/collections")


def galaxy() -> str:
    """The ``ansible-galaxy`` beside this Python (a venv's), else the first on ``PATH``."""
    search = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    found = shutil.which("ansible-galaxy", path=search)
    if not found:
        raise HostkitError("ansible-galaxy not found (it comes with ansible-core: pip install ansible-core)")
    return found


def galaxy_build(tree: Path, out: Path) -> Path:
    """``ansible-galaxy collection build`` of an assembled collection tree into ``out``; the
    tarball's path (``scripts/build_collection.py --tar`` and :func:`install` both build this way)."""
    out.mkdir(parents=True, exist_ok=True)
    _run(
        [galaxy(), "collection", "build", "--force", "--output-path", str(out), str(tree)],
        "ansible-galaxy collection build",
    )
    (version,) = re.findall(r"^version: (\S+)$", (tree / "galaxy.yml").read_text(), re.M)
    tarball = out / f"{COLLECTION_NAMESPACE}-{COLLECTION_NAME}-{version}.tar.gz"
    if not tarball.is_file():
        raise HostkitError(f"ansible-galaxy collection build wrote no {tarball.name} in {out}")
    return tarball


def _source(tmp: Path) -> Path:
    """The collection tree to build: the wheel's, or a checkout's assembled into ``tmp``."""
    lay = layout()
    if lay.kind == "collection":
        return lay.root
    script = lay.root / "scripts" / "build_collection.py"
    spec = importlib.util.spec_from_file_location("hostkit_build_collection", script)
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    return builder.assemble(tmp / "tree", lay.root)


def _run(args: list[str], what: str) -> str:
    proc = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        raise HostkitError(f"{what} failed: {(proc.stderr or proc.stdout).strip()[-400:]}")
    return proc.stdout


def install(path: str | None = None) -> dict:
    """Install the collection under the collections root ``path`` (default ``~/.ansible/collections``),
    replacing the version there. Returns ``{"collection", "version", "path", "collections_path",
    "found_by_default"}``."""
    dest = Path(os.path.expanduser(str(path or DEFAULT_PATH))).absolute()
    if dest.exists() and not dest.is_dir():
        raise BadInput(f"-p {dest}: not a directory")
    with tempfile.TemporaryDirectory(prefix="hk-coll-") as tmp:
        tarball = galaxy_build(_source(Path(tmp)), Path(tmp) / "out")
        _run(
            [galaxy(), "collection", "install", "--force", "-p", str(dest), str(tarball)],
            "ansible-galaxy collection install",
        )
    manifest = collection_dir(dest) / "MANIFEST.json"
    if not manifest.is_file():  # ansible-galaxy said yes, but the collection is not where Ansible looks
        raise HostkitError(f"ansible-galaxy collection install left no {manifest}")
    version = json.loads(manifest.read_text())["collection_info"]["version"]
    return {
        "collection": f"{COLLECTION_NAMESPACE}.{COLLECTION_NAME}",
        "version": version,
        "path": str(collection_dir(dest)),
        "collections_path": str(dest),
        "found_by_default": dest == DEFAULT_PATH.expanduser().absolute(),
    }
