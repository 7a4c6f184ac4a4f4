"""Reading a document a user named (a profile, an inventory, a smoke or migration report, a rollout's
state): one way for every such file, so that nothing in it can make hostkit trace back, hang or eat
the controller's memory. Each failure is :class:`BadInput` (exit 2, nothing changed) in one line that
names the file and quotes at most a short excerpt.

- the file must be a regular file (not a directory, FIFO or device), at most :data:`MAX_BYTES`;
- its bytes must be UTF-8 (the error gives the offset of the first bad byte);
- JSON and YAML nest at most :data:`MAX_DEPTH` levels; a YAML document uses at most
  :data:`MAX_ALIASES` aliases (a few hundred bytes of ``&a [*b, *b, ...]`` can otherwise stand for
  billions of values once anything walks them).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from hostkit.core.sysroot import HostFileError, read_bytes
from hostkit.errors import BadInput

MAX_BYTES = 16 << 20
MAX_DEPTH = 64
MAX_ALIASES = 256


def read_text(path: str | Path, missing: str | None = None) -> str:
    """The text of the file ``path``; ``missing``: the message when there is no such file."""
    try:
        data = read_bytes(str(path), MAX_BYTES)
    except HostFileError as exc:
        raise BadInput(str(exc)) from None
    if data is None:
        p = Path(path)
        raise BadInput(f"{path} is a directory, not a file" if p.is_dir() else missing or f"{path}: no such file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path} is not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 4]!r})") from None


def depth(doc, limit: int = MAX_DEPTH) -> int:
    """How deep ``doc`` nests (lists and mappings), counted no further than ``limit + 1``."""
    todo, deepest = [(doc, 1)], 0
    while todo:
        node, level = todo.pop()
        if isinstance(node, (list, dict)):
            deepest = max(deepest, level)
            if level > limit:
                break
            todo.extend((v, level + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def parse_json(text: str, source: str):
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{source} is not JSON: {exc}") from None
    except RecursionError:
        raise BadInput(f"{source} nests deeper than Python can parse") from None
    if depth(doc) > MAX_DEPTH:
        raise BadInput(f"{source} nests deeper than {MAX_DEPTH} levels")
    return doc


def read_json(path: str | Path, missing: str | None = None):
    """The parsed JSON document at ``path``; ``missing``: the message when there is no such file."""
    return parse_json(read_text(path, missing), str(path))


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, counting aliases and nesting while it composes the document."""

    def __init__(self, stream):
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_ALIASES} aliases")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.YAMLError(f"nests deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def parse_yaml(text: str, source: str):
    """A YAML document from a file a user named (``source`` names it in the error)."""
    try:
        return yaml.load(text, Loader=_BoundedLoader)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BadInput(f"{source} is not valid YAML: {first[:200]}") from None
    except RecursionError:
        raise BadInput(f"{source} nests deeper than Python can parse") from None


def read_yaml(path: str | Path, missing: str | None = None):
    return parse_yaml(read_text(path, missing), str(path))
