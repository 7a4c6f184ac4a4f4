"""Install tuned into a sysroot the way the RHEL 8 package lays it out, for tests: the programs
(/usr/sbin/tuned, tuned-adm), the profiles copied from tuned v2.21.0 (tests/tuned_v2.21.0, see its
README) under /usr/lib/tuned/<name>/tuned.conf (LOAD_DIRECTORIES of that version), a running
``tuned`` process (proc/<pid>/comm) and the unit enabled (multi-user.target.wants link)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

PROFILES = Path(__file__).parent / "tuned_v2.21.0"


def install_tuned(root: Path, running: bool = True, enabled: bool = True) -> None:
    for prog in ("usr/sbin/tuned", "usr/sbin/tuned-adm"):
        (root / prog).parent.mkdir(parents=True, exist_ok=True)
        (root / prog).write_text("#!/usr/bin/python3 -Es\n")
        (root / prog).chmod(0o755)
    for prof in PROFILES.iterdir():
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
