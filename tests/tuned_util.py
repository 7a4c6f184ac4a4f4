"""Install tuned into a sysroot the way the RHEL 8 package lays it out, for tests: the programs
(/usr/sbin/tuned, tuned-adm), the profiles copied from tuned v2.21.0 (tests/tuned_v2.21.0, see its
README) under /usr/lib/tuned/<name>/tuned.conf (LOAD_DIRECTORIES of that version), a running
``tuned`` process (proc/<pid>/comm) and the unit enabled (multi-user.target.wants link).

``install_debian_tuned``: Debian bookworm's package (tuned 2.20.0-1, tests/tuned_debian_2.20, see
its README) with ``cpu-partitioning`` applied on a Debian GRUB host, its files as tuned 2.20 leaves
them there (checked against a real guest by tests/vm/test_tuned.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

PROFILES = Path(__file__).parent / "tuned_v2.21.0"
DEBIAN = Path(__file__).parent / "tuned_debian_2.20"
# tuned 2.20 plugin_bootloader._grub2_default_env_patch: appended to /etc/default/grub (non-BLS GRUB).
DEBIAN_GRUB_LINES = (
    'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:+$GRUB_CMDLINE_LINUX_DEFAULT }\\$tuned_params"\n'
    'GRUB_INITRD_OVERLAY="${GRUB_INITRD_OVERLAY:+$GRUB_INITRD_OVERLAY }\\$tuned_initrd"\n'
)


def install_tuned(root: Path, running: bool = True, enabled: bool = True, profiles: Path = PROFILES) -> None:
    for prog in ("usr/sbin/tuned", "usr/sbin/tuned-adm"):
        (root / prog).parent.mkdir(parents=True, exist_ok=True)
        (root / prog).write_text("#!/usr/bin/python3 -Es\n")
        (root / prog).chmod(0o755)
    for prof in profiles.iterdir():
        if prof.is_dir():
            dst = root / "usr/lib/tuned" / prof.name
            dst.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(prof / "tuned.conf", dst / "tuned.conf")
    if running:
        (root / "proc/1234").mkdir(parents=True, exist_ok=True)
        (root / "proc/1234/comm").write_text("tuned\n")
    if enabled:
        link = root / "etc/systemd/system/multi-user.target.wants/tuned.service"
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink("/usr/lib/systemd/system/tuned.service", link)


def install_debian_tuned(root: Path, variables: str, boot_cmdline: str, initrd: str = "/boot/tuned-initrd.img") -> None:
    """Debian's tuned with ``cpu-partitioning`` active (``variables``: cpu-partitioning-variables.conf),
    as its bootloader plugin leaves the host: /etc/tuned/bootcmdline's lines set in place,
    /etc/default/grub with tuned's ``$tuned_params`` line appended, /etc/grub.d/00_tuned."""
    install_tuned(root, profiles=DEBIAN / "usr/lib/tuned")
    for rel in ("etc/grub.d/00_tuned", "etc/tuned/bootcmdline"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(DEBIAN / rel, root / rel)
    text = (root / "etc/tuned/bootcmdline").read_text()
    text = text.replace("TUNED_BOOT_CMDLINE=\n", f'TUNED_BOOT_CMDLINE="{boot_cmdline}"\n')
    (root / "etc/tuned/bootcmdline").write_text(
        text.replace("TUNED_BOOT_INITRD_ADD=\n", f'TUNED_BOOT_INITRD_ADD="{initrd}"\n')
    )
    (root / "etc/tuned/cpu-partitioning-variables.conf").write_text(variables)
    (root / "etc/tuned/active_profile").write_text("cpu-partitioning\n")
    (root / "etc/tuned/profile_mode").write_text("manual\n")
    with open(root / "etc/default/grub", "a") as f:
        f.write(DEBIAN_GRUB_LINES)
