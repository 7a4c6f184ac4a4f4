#!/usr/bin/env python3
"""``make dist``: hostkit's release files, built from this tree into one directory.

    python scripts/dist.py [OUT]        # OUT defaults to dist/

* ``hostkit_tuning-<version>.tar.gz``: the sdist (``python -m build``);
* ``hostkit_tuning-<version>-py3-none-any.whl``: the wheel, built *from that sdist* (so an sdist
  that misses a file the wheel's collection is assembled from fails here, not on a user's machine);
  it carries the collection ``hostkit.tuning`` (``scripts/build_collection.py``, ``BuildPy``);
* ``hostkit-tuning-<version>.tar.gz``: the collection ``hostkit.tuning`` for ``ansible-galaxy
  collection install``, assembled by ``scripts/build_collection.py`` and built by ``ansible-galaxy
  collection build``;
* ``SHA256SUMS``: the three files' SHA-256, in ``sha256sum``'s format (``sha256sum -c SHA256SUMS``).

Earlier release files in OUT (these names, any version) are removed first, so that
``OUT/hostkit_tuning-*.whl`` names one wheel. The version is ``hostkit.__version__``.
Needs the ``build`` package (``make setup`` installs it: the ``dist`` extra).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import build_collection  # scripts/ is this script's directory: the collection's one assembler

ROOT = build_collection.ROOT
# What this script writes into OUT (and removes from it before writing).
OUTPUTS = ("hostkit_tuning-*.tar.gz", "hostkit_tuning-*.whl", "hostkit-tuning-*.tar.gz", "SHA256SUMS")


def sha256sums(files: list[Path]) -> str:
    return "".join(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.name}\n" for f in sorted(files))


def _collection(out: Path, root: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="hk-dist-") as tmp:
        return build_collection.galaxy_build(build_collection.assemble(Path(tmp), root), out)


def build(out: Path, root: Path = ROOT) -> list[Path]:
    """The sdist, the wheel, the collection tarball and SHA256SUMS in ``out``; their paths. The
    collection is built while ``python -m build`` runs (mostly waiting on its build environments)."""
    out.mkdir(parents=True, exist_ok=True)
    for pattern in OUTPUTS:
        for old in out.glob(pattern):
            old.unlink()
    with ThreadPoolExecutor(max_workers=1) as pool:
        collection = pool.submit(_collection, out, root)
        proc = subprocess.run(
            [sys.executable, "-m", "build", "--outdir", str(out), str(root)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
        tarball = collection.result()
    if proc.returncode != 0:
        raise SystemExit(f"python -m build failed:\n{(proc.stderr or proc.stdout)[-3000:]}")
    version = build_collection.version(root)
    sdist, wheel = out / f"hostkit_tuning-{version}.tar.gz", out / f"hostkit_tuning-{version}-py3-none-any.whl"
    for made in (sdist, wheel):
        if not made.is_file():
            raise SystemExit(f"python -m build wrote no {made.name} in {out}: {sorted(p.name for p in out.iterdir())}")
    files = [sdist, wheel, tarball]
    (out / "SHA256SUMS").write_text(sha256sums(files))
    return [*files, out / "SHA256SUMS"]


def main(argv: list[str]) -> int:
    if len(argv) > 1 or any(a.startswith("-") for a in argv):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    for path in build(Path(argv[0] if argv else ROOT / "dist").absolute()):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
