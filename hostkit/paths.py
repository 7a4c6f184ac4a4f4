"""Where hostkit finds its playbooks and roles, and where it keeps its runs."""

from __future__ import annotations

import os
from pathlib import Path

from hostkit.errors import HostkitError

PACKAGE_DIR = Path(__file__).resolve().parent


def project_root() -> Path:
    """The directory holding ``playbooks/`` and ``roles/`` (the source checkout)."""
    env = os.environ.get("HOSTKIT_PROJECT_DIR")
    root = Path(env) if env else PACKAGE_DIR.parent
    if not (root / "playbooks").is_dir():
        raise HostkitError(f"playbooks/ not found under {root}: run from a hostkit checkout "
                           "or set HOSTKIT_PROJECT_DIR")
    return root


def playbook_path(name: str) -> Path:
    return project_root() / "playbooks" / name


def state_dir() -> Path:
    """``.hostkit/`` of the current directory (or ``HOSTKIT_STATE_DIR``)."""
    return Path(os.environ.get("HOSTKIT_STATE_DIR", ".hostkit")).absolute()


def runs_dir() -> Path:
    d = state_dir() / "runs"
    d.mkdir(parents=True, exist_ok=True)
    return d
