"""Read host state from a sysroot (``/`` or a fixture tree with the same file names).

Every reader in :mod:`hostkit.facts` goes through :class:`Sysroot`, so a
fixture tree stands in for another machine exactly as it does for
``lscpu --sysroot``. Errors name the file and the text that did not parse.
"""

from __future__ import annotations

import os

from hostkit.core.cpulist import parse_cpulist, parse_mask
from hostkit.core.sysroot import HostFileError, excerpt, is_live, is_number, read_text, sysroot_path
from hostkit.errors import CpulistError, FactsError

CPU_DIR = "sys/devices/system/cpu"
NODE_DIR = "sys/devices/system/node"


class Sysroot:
    """A root directory to read ``/proc`` and ``/sys`` from."""

    # Strings and os.path, not pathlib: this module ships to hosts and runs on every
    # `hostkit facts`, where import and per-read costs add up (see bench/facts.py).
    def __init__(self, root: str | os.PathLike = "/") -> None:
        self.root = os.fspath(root) or "/"
        if not os.path.exists(self.root):
            raise FactsError(f"sysroot {self.root} does not exist")
        if not os.path.isdir(self.root):
            raise FactsError(f"sysroot {self.root} is not a directory")
        if not os.path.isdir(self.path(CPU_DIR)):
            raise FactsError(f"sysroot {self.root} has no {CPU_DIR}: not a Linux root or an incomplete fixture")

    @property
    def is_live(self) -> bool:
        return is_live(self.root)

    def path(self, rel: str) -> str:
        return sysroot_path(self.root, rel)

    def exists(self, rel: str) -> bool:
        return os.path.exists(self.path(rel))

    def is_dir(self, rel: str) -> bool:
        return os.path.isdir(self.path(rel))

    def read(self, rel: str, default: str | None = None) -> str | None:
        """File text without trailing newlines and NULs; ``default`` if absent or unreadable. A FIFO,
        a device, a symlink loop or a file over :data:`MAX_READ` bytes is a FactsError naming it
        (:func:`hostkit.core.sysroot.read_bytes`: plain ``os.open``/``os.read`` on a string path, as
        a 384-CPU host means thousands of tiny sysfs reads)."""
        try:
            text = read_text(self.path(rel))
        except HostFileError as exc:
            raise FactsError(str(exc)) from None
        return default if text is None else text

    def read_int(self, rel: str, default: int | None = None) -> int | None:
        text = self.read(rel)
        if text is None:
            return default
        text = text.strip()
        if not is_number(text.removeprefix("-")):
            raise FactsError(f"malformed number in {self.path(rel)}: {excerpt(text)}")
        return int(text)

    def read_cpulist(self, rel: str, default: frozenset[int] | None = None) -> frozenset[int] | None:
        return self._read_cpus(rel, default, parse_cpulist, "cpulist")

    def read_mask(self, rel: str, default: frozenset[int] | None = None) -> frozenset[int] | None:
        return self._read_cpus(rel, default, parse_mask, "CPU mask")

    def _read_cpus(self, rel: str, default: frozenset[int] | None, parse, what: str) -> frozenset[int] | None:
        """A CPU set in one of the kernel's two notations; a malformed one names the file."""
        text = self.read(rel)
        if text is None:
            return default
        try:
            return parse(text)
        except CpulistError as exc:
            raise FactsError(f"malformed {what} in {self.path(rel)}: {excerpt(text.strip())} ({exc})") from None

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(rel)))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return []

    def numbered(self, rel: str, prefix: str) -> list[int]:
        """Numbers N of the entries ``prefixN`` in a directory, sorted."""
        out = []
        for name in self.listdir(rel):
            if name.startswith(prefix) and is_number(name[len(prefix) :]):
                out.append(int(name[len(prefix) :]))
        return sorted(out)

    def realpath(self, rel: str) -> str | None:
        """Resolve a symlink inside the sysroot; the result is relative to the root."""
        p = self.path(rel)
        if not os.path.exists(p):
            return None
        real = os.path.realpath(p)
        root = os.path.realpath(self.root).rstrip("/") + "/"
        if not real.startswith(root):
            return None  # a link that leaves the sysroot is not followed
        return real[len(root) :]
