"""The lab's SSH keys and private files: what both its sshd hosts (:mod:`hostkit.lab.lab`) and its
QEMU guests (:mod:`hostkit.lab.vm`) are given, written readable by their owner only."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SSH_KEYGEN = "ssh-keygen"


def keygen(path: Path, comment: str) -> None:
    """A new ed25519 key pair at ``path`` (and ``path.pub``), replacing one that is there."""
    if path.exists():
        path.unlink()
        path.with_suffix(".pub").unlink(missing_ok=True)
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    os.chmod(path, 0o600)


def write_private(path: Path, text: str) -> None:
    """``text`` into ``path`` (its directory made when missing), mode 0600 from its creation on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
