"""What a test that drops privileges runs: an interpreter and a copy of hostkit that the other user
can reach, wherever the checkout is.

A clone in a directory only root may enter (a ``mktemp -d`` dir, mode 0700; ``/root``) hides the
checkout, its ``.venv`` and the Python the venv links to from uid 65534: ``import hostkit`` fails
there. :func:`unprivileged_python` copies hostkit's Python sources to a world-readable temporary
directory and picks an interpreter whose every directory others may enter; the probe puts the copy
first on ``sys.path``. Where neither can be had the test is skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def reachable_by_others(path: str | os.PathLike) -> bool:
    """Whether a user who is neither owner nor in the group may run ``path`` (symlinks resolved):
    every directory above it searchable (o+x), the file itself executable by others."""
    real = Path(os.path.realpath(path))
    try:
        if not os.stat(real).st_mode & stat.S_IXOTH:
            return False
        return all(os.stat(parent).st_mode & stat.S_IXOTH for parent in real.parents)
    except OSError:
        return False


def interpreter() -> str | None:
    """This test run's Python if others can run it, else a system python3 of the same major version."""
    candidates = [sys.executable, f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}", "/usr/bin/python3"]
    return next((c for c in candidates if os.path.exists(c) and reachable_by_others(c)), None)


@contextmanager
def unprivileged_python():
    """(interpreter, directory holding a world-readable copy of the ``hostkit`` package's Python
    files) for a probe run as another user, who puts the directory first on ``sys.path``; the
    copy is removed afterwards. Skips, saying why, where no user but root could reach either."""
    python = interpreter()
    if python is None:
        pytest.skip(
            f"no Python that another user may run: {os.path.realpath(sys.executable)} lies under a directory "
            "only its owner may enter, and there is no /usr/bin/python3 others may run"
        )
    base = next((d for d in (tempfile.gettempdir(), "/tmp", "/var/tmp") if _enterable_by_others(d)), None)
    if base is None:
        pytest.skip("no temporary directory another user may enter (TMPDIR, /tmp, /var/tmp)")
    with tempfile.TemporaryDirectory(dir=base, prefix="hostkit-unprivileged-") as top:
        shutil.copytree(REPO / "hostkit", Path(top) / "hostkit", ignore=_not_python)
        for p in [Path(top), *Path(top).rglob("*")]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        yield python, top


def _enterable_by_others(directory: str) -> bool:
    real = Path(os.path.realpath(directory))
    try:
        return all(os.stat(d).st_mode & stat.S_IXOTH for d in (real, *real.parents))
    except OSError:
        return False


def _not_python(directory: str, names: list[str]) -> list[str]:
    return [n for n in names if n == "__pycache__" or (Path(directory, n).is_file() and not n.endswith(".py"))]
