#!/usr/bin/env python3
"""Write each sysctl-writing role's ``__<role>_sysctls`` into ``roles/<role>/vars/main.yml`` from
:mod:`hostkit.tunables`: the sysctls the role writes, where the kernel exposes each, its bounds.

    .venv/bin/python scripts/role_tunables.py          # rewrite the generated blocks
    .venv/bin/python scripts/role_tunables.py --check  # exit 1 when one is stale (tests run this)

Only the block between the BEGIN and END lines is the script's; the rest of the file is the role's.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from generated import sync  # noqa: E402  (scripts/generated.py)

from hostkit.tunables import tuned_sysctls  # noqa: E402

BEGIN = "# BEGIN hostkit.tunables: written by scripts/role_tunables.py from hostkit/tunables.py; edit the table"
END = "# END hostkit.tunables"


def roles() -> list[str]:
    return sorted({s.role for s in tuned_sysctls()})


def block(role: str) -> str:
    lines = [
        BEGIN,
        "# sysctl -> where the kernel exposes it, how its value compares, the values the role accepts",
        f"__{role}_sysctls:",
    ]
    for s in tuned_sysctls(role):
        lines.append(f"  {s.key}: {{path: {s.proc_path}, kind: {s.kind}, min: {s.min}, max: {s.max}}}")
    return "\n".join(lines + [END]) + "\n"


def render(text: str, role: str) -> str:
    """``text`` (the role's vars/main.yml) with its generated block replaced, or appended."""
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END + "\n", 1)[1] if END + "\n" in rest else ""
        return head + block(role) + tail
    return text.rstrip("\n") + "\n" + block(role)


def main() -> int:
    files = {}
    for role in roles():
        path = ROOT / "roles" / role / "vars" / "main.yml"
        files[path] = render(path.read_text(), role)
    return sync(files, "role variables", "scripts/role_tunables.py")


if __name__ == "__main__":
    raise SystemExit(main())
