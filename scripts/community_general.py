#!/usr/bin/env python3
"""The Redfish modules of the collection community.general, for the tests that run them beside
hostkit against the lab BMC (tests/unit/test_bmc.py: what ``community.general.redfish_config``
does with a BIOS attribute the BMC does not have, and hostkit does).

community.general is not on this project's package registries on its own; the ``ansible``
distribution on PyPI carries it. ``make setup`` runs this script: the pinned ``ansible`` wheel is
downloaded once (pip's cache, then hostkit's user cache: ``~/.cache/hostkit/wheels``) and the files the Redfish modules
need are taken out of it into ``build/test-collections/ansible_collections/community/general``,
a collection path for ``ANSIBLE_COLLECTIONS_PATH``. Nothing of it is committed (GPL-3.0-or-later,
as the collection's files say); it is the tests' tool, like the Debian packages.

    python scripts/community_general.py        # make the collection path (a no-op when it is there)
    python scripts/community_general.py --path # print it
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from hostkit.paths import user_cache_dir

ROOT = Path(__file__).resolve().parent.parent
# ansible 12.3.0 carries community.general 11.4.2 (MANIFEST.json) and needs ansible-core 2.19,
# the version hostkit's test extra resolves to on Python 3.11
ANSIBLE = "12.3.0"
WHEELS = user_cache_dir() / "wheels"
DEST = ROOT / "build" / "test-collections"
PREFIX = "ansible_collections/community/general/"
FILES = (
    "MANIFEST.json",
    "meta/runtime.yml",
    "plugins/modules/redfish_config.py",
    "plugins/module_utils/redfish_utils.py",
)


def path() -> Path:
    return DEST


def ready() -> bool:
    return all((DEST / PREFIX / f).is_file() for f in FILES)


def main() -> int:
    if "--path" in sys.argv[1:]:
        print(DEST)
        return 0
    if ready():
        return 0
    wheel = WHEELS / f"ansible-{ANSIBLE}-py3-none-any.whl"
    if not wheel.exists():
        WHEELS.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"ansible=={ANSIBLE}", "-d", str(WHEELS)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0 or not wheel.exists():
            print(f"could not download ansible=={ANSIBLE} (community.general): {proc.stderr.strip()[-500:]}")
            return 1
    with zipfile.ZipFile(wheel) as z:
        for f in FILES:
            target = DEST / PREFIX / f
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(PREFIX + f))
    return 0


if __name__ == "__main__":
    sys.exit(main())
