#!/usr/bin/env python3
"""Files generated from the code, and the one way to regenerate them all (``make generate``).

    .venv/bin/python scripts/generated.py          # run every generator: rewrite what is stale
    .venv/bin/python scripts/generated.py --check  # write nothing; exit 1 naming what is stale

Each generator is a script of its own with the same two modes; :data:`GENERATORS` lists them, in
the order they run. A generator of role files writes through :func:`sync`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# script -> what it writes (from what), in the order they run
GENERATORS = {
    "role_tunables.py": "roles/<role>/vars/main.yml: each role's sysctls (hostkit/tunables.py)",
    "role_readmes.py": "roles/<role>/README.md (meta/argument_specs.yml, defaults/main.yml, hostkit/tunables.py)",
    "contracts.py": "docs/contracts.md: exit codes, the facts and plan documents, JSON envelopes, every --help",
    "profile_keys.py": "docs/inventory-and-profiles.md: the table of profile keys (hostkit/profiles/schema)",
}


def sync(files: dict[Path, str], what: str, script: str) -> int:
    """Write every stale file of ``files`` (path -> its generated text); with ``--check`` in argv,
    write nothing and return 1 when one is stale, naming them (tests run the scripts so)."""
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    if "--check" not in sys.argv:
        for p in stale:
            p.write_text(files[p])
        return 0
    if stale:
        print(f"stale {what} (run {script}):", *map(str, stale), sep="\n  ")
        return 1
    return 0


def main(argv: list[str]) -> int:
    """Every generator in turn, with ``argv`` (``--check`` or nothing); 1 when one failed or, with
    ``--check``, found a stale file."""
    failed = []
    for script in GENERATORS:
        if subprocess.run([sys.executable, str(HERE / script), *argv], stdin=subprocess.DEVNULL).returncode:
            failed.append(script)
    if failed:
        print(("stale: " if "--check" in argv else "failed: ") + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
