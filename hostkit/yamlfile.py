"""Reading a YAML document a user named (a profile, an inventory's variables, a vendor map), under
:mod:`hostkit.jsonfile`'s rules: nesting at most :data:`~hostkit.jsonfile.MAX_DEPTH` levels, at most
:data:`MAX_ALIASES` aliases (a few hundred bytes of ``&a [*b, *b, ...]`` can otherwise stand for
billions of values once anything walks them), every number one hostkit can compute with. Each
failure is :class:`BadInput` in one line naming the file."""

from __future__ import annotations

from pathlib import Path

import yaml

from hostkit.core.sysroot import excerpt
from hostkit.errors import BadInput
from hostkit.jsonfile import MAX_DEPTH, number_problem, read_text

MAX_ALIASES = 256


class _OutOfRange(yaml.YAMLError):
    """A YAML number :func:`number_problem` refuses (``mark``: where it is)."""

    def __init__(self, problem: str, mark) -> None:
        super().__init__(problem)
        self.problem, self.mark = problem, mark


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, counting aliases and nesting while it composes the document, and
    bounding every number it constructs (:func:`number_problem`)."""

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

    def construct_bounded_int(self, node):
        text = str(node.value).replace("_", "")
        # YAML 1.1 writes an int in base 2, 8, 10, 16 or 60; 2**64 takes at most 66 characters in any.
        if len(text) > 70:
            raise _OutOfRange(
                f"the integer {excerpt(node.value)} is out of range (integers are read up to 2**64)", node.start_mark
            )
        return self._bounded(super().construct_yaml_int(node), node)

    def construct_bounded_float(self, node):
        return self._bounded(super().construct_yaml_float(node), node)

    def _bounded(self, value, node):
        problem = number_problem(value)
        if problem:
            raise _OutOfRange(problem, node.start_mark)
        return value


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_bounded_int)
_BoundedLoader.add_constructor("tag:yaml.org,2002:float", _BoundedLoader.construct_bounded_float)


def parse_yaml(text: str, source: str):
    """A YAML document from a file a user named (``source`` names it in the error)."""
    try:
        return yaml.load(text, Loader=_BoundedLoader)
    except _OutOfRange as exc:
        raise BadInput(f"{source}: line {exc.mark.line + 1}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
        raise BadInput(f"{source} is not valid YAML{where}: {problem[:200]}") from None
    except RecursionError:
        raise BadInput(f"{source} nests deeper than Python can parse") from None


def read_yaml(path: str | Path, missing: str | None = None):
    return parse_yaml(read_text(path, missing), str(path))
