"""``kernel.boot_loader`` and ``kernel.next_boot_cmdline``: which boot loader holds the kernel
command line and what the next boot will use, computed the way that boot loader does.

The readers are :mod:`hostkit.core.boot_loader` (one per format: Debian GRUB across
``/etc/default/grub`` and ``grub.d``, BLS entries with grubenv variables, systemd-boot entries),
shared with the ``hostkit_bootargs`` module so that facts, apply and audit read the boot
configuration one way.
"""

from __future__ import annotations

from hostkit.core.boot_loader import BootConfigError, boot_loader_facts
from hostkit.errors import FactsError
from hostkit.facts.sysroot import Sysroot


def read_boot_loader(sr: Sysroot, booted: str) -> tuple[dict, str | None]:
    """(``kernel.boot_loader``, ``kernel.next_boot_cmdline``) of the host under ``sr``.

    ``boot_loader``: ``{"backend": "grub-debian" | "bls" | "systemd-boot" | "uki" | "none", "files":
    [the files read, in reading order], "next_boot_source": the file the next boot's line comes
    from}``, plus ``found`` and ``reason`` for ``none`` and ``uki``. ``booted``: ``/proc/cmdline``, whose
    ``BOOT_IMAGE=``/``root=`` GRUB on Debian takes from its own disk probe."""
    try:
        return boot_loader_facts(sr.root, booted)
    except BootConfigError as exc:
        raise FactsError(str(exc)) from None
