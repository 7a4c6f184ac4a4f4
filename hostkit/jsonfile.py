"""Reading a JSON document a user named: a missing or malformed file is bad input (exit 2), named."""

from __future__ import annotations

import json
from pathlib import Path

from hostkit.errors import BadInput


def read_json(path: str | Path, missing: str | None = None):
    """The parsed document at ``path``; ``missing``: the message when there is no such file."""
    p = Path(path)
    if not p.is_file():
        raise BadInput(missing or f"{path}: no such file")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path} is not JSON: {exc}") from None
