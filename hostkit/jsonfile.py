"""Reading a document a user named (a profile, an inventory, a smoke or migration report, a rollout's
state): one way for every such file, so that nothing in it can make hostkit trace back, hang or eat
the controller's memory. Each failure is :class:`BadInput` (exit 2, nothing changed) in one line that
names the file and quotes at most a short excerpt.

- the file must be a regular file (not a directory, FIFO or device), at most :data:`MAX_BYTES`;
- its bytes must be UTF-8 (the error gives the offset of the first bad byte);
- JSON and YAML nest at most :data:`MAX_DEPTH` levels (YAML's aliases are bounded too,
  :mod:`hostkit.yamlfile`);
- every number is one hostkit can compute with (:func:`number_problem`): an integer of at most
  :data:`MAX_INT` in magnitude, a finite float. Python refuses to convert an integer of more than
  4,300 digits to or from text (ValueError), an integer beyond float range to a float
  (OverflowError), and JSON's ``NaN``/``Infinity``/``1e999`` or YAML's ``.inf``/``.nan`` pass
  every ``<``/``>`` bound unnoticed or poison the arithmetic after it;
- the file's name is one the file system can hold (:func:`check_name`): no NUL byte, no component
  over :data:`NAME_MAX` bytes, no path of :data:`PATH_MAX` bytes or more (the kernel's ENAMETOOLONG);
- a document's shape (the keys a reader reads and the type of each) is checked by one walker,
  :func:`check_shape`, before anything reads it.

YAML is read by :mod:`hostkit.yamlfile` under the same rules (this module is the standard library's
alone: the host agent ships it). Inventories are read by Ansible's own loader: :func:`check_numbers` bounds the variables hostkit
takes from them (:mod:`hostkit.ansible.inventory`) by the same rule.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from hostkit.core.sysroot import HostFileError, excerpt, read_bytes
from hostkit.errors import BadInput

MAX_BYTES = 16 << 20
MAX_DEPTH = 64
# The largest integer magnitude a document may hold: every value hostkit reads (a kernel's u64, a
# sample count, a port, a pid) fits, and so does its conversion to a float.
MAX_INT = 2**64
MAX_INT_DIGITS = len(str(MAX_INT))
NAME_MAX = 255  # bytes of one path component (linux/limits.h; ext4, xfs, btrfs and tmpfs alike)
PATH_MAX = 4096  # bytes of a path with its terminating NUL (linux/limits.h)


# ----------------------------------------------------------------------------- names


def name_problem(path: str | os.PathLike) -> str | None:
    """What keeps any file from having the name ``path`` (None: nothing): a NUL byte, text the file
    system encoding cannot hold, a component longer than :data:`NAME_MAX` bytes or a path of
    :data:`PATH_MAX` bytes or more (the kernel's ENAMETOOLONG)."""
    text = os.fspath(path)
    try:
        raw = os.fsencode(text)
    except UnicodeError:
        return "not a name this system's file names can hold"
    if b"\0" in raw:
        return "a file name cannot hold a NUL byte"
    if len(raw) >= PATH_MAX:
        return f"a path of {len(raw)} bytes, longer than the file system allows ({PATH_MAX - 1})"
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        return f"a name of {len(longest)} bytes in it, longer than the file system allows ({NAME_MAX})"
    return None


def check_name(path: str | os.PathLike, what: str = "file") -> str:
    """``path``, a file or directory a user named, as a string; :class:`BadInput` naming it
    (``what``) when no file can have that name (:func:`name_problem`)."""
    text = os.fsdecode(os.fspath(path))
    problem = name_problem(text)
    if problem:
        raise BadInput(f"{what} {excerpt(text)}: {problem}")
    return text


# ----------------------------------------------------------------------------- numbers


def _int_text(n: int) -> str:
    """An integer as an error quotes it, whatever its size (``str()`` refuses over 4,300 digits)."""
    if n.bit_length() > 200:
        return f"an integer of about {int(n.bit_length() * math.log10(2)) + 1} digits"
    return excerpt(n)


def number_problem(value) -> str | None:
    """What makes ``value`` a number hostkit cannot compute with (None: it can, or it is no number):
    the one rule for every document a user hands in."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) > MAX_INT:
        return f"{_int_text(value)} is out of range (integers are read up to 2**64 in magnitude)"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} is not a finite number"
    return None


def check_number(value, where: str):
    """``value`` if :func:`number_problem` has nothing against it, else :class:`BadInput` naming ``where``."""
    problem = number_problem(value)
    if problem:
        raise BadInput(f"{where}: {problem}")
    return value


def check_numbers(doc, where: str):
    """``doc`` if every number in it passes :func:`check_number` (``where.key[0]...`` names a bad one)."""
    todo = [(doc, where)]
    while todo:
        node, at = todo.pop()
        if isinstance(node, dict):
            todo.extend((v, f"{at}.{excerpt(k) if not isinstance(k, str) else k}") for k, v in node.items())
        elif isinstance(node, (list, tuple)):
            todo.extend((v, f"{at}[{i}]") for i, v in enumerate(node))
        else:
            check_number(node, at)
    return doc


# ----------------------------------------------------------------------------- shapes

NUMBER = "number"  # a shape: an int or a float, not a bool (bool is an int to Python)
OPT_NUMBER = "number or null"
INTEGER = "integer"  # an int, not a bool
OPT_INTEGER = "integer or null"
COUNT = "count (an integer >= 0)"
_SCALARS = {
    COUNT: lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    NUMBER: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    OPT_NUMBER: lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)),
    INTEGER: lambda v: isinstance(v, int) and not isinstance(v, bool),
    OPT_INTEGER: lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
}


# A JSON/YAML value's type as an error names it.
_TYPE_WORDS = {
    bool: "true or false",
    str: "a string",
    dict: "an object",
    list: "a list",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


class Nullable:
    """A shape (:func:`check_shape`) that also takes null: ``Nullable({"host": str})``."""

    def __init__(self, shape) -> None:
        self.shape = shape


def _type_name(value) -> str:
    return "null" if value is None else type(value).__name__


def check_shape(value, shape, where: str):
    """``value`` if it has ``shape``, else :class:`BadInput` naming the first field that is wrong.

    A shape is a dict (an object with at least these keys, each of its shape; a key ending in ``?``
    is optional, its shape checked where the key is present), ``{str: shape}`` (an object whose
    every value has that shape), ``[shape]`` (a list
    whose every item has that shape), one of :data:`NUMBER`, :data:`INTEGER` (and their ``OPT_``
    forms, null allowed), :data:`COUNT`, a Python type or tuple of types (``str``, ``bool``, ``(str, type(None))``),
    :class:`Nullable` (null or the shape it wraps), or a callable returning None or what is wrong
    with the value."""
    if isinstance(shape, Nullable):
        if value is not None:
            check_shape(value, shape.shape, where)
    elif isinstance(shape, dict) and list(shape) == [str]:  # a mapping: any string key, each value of one shape
        if not isinstance(value, dict):
            raise BadInput(f"{where} must be an object, got {_type_name(value)}")
        for key, item in value.items():
            check_shape(item, shape[str], f"{where}.{key}")
    elif isinstance(shape, dict):
        if not isinstance(value, dict):
            raise BadInput(f"{where} must be an object, got {_type_name(value)}")
        for key, sub in shape.items():
            if key.endswith("?"):  # optional: checked where present
                key = key[:-1]
                if key not in value:
                    continue
            elif key not in value:
                raise BadInput(f"{where}.{key} is missing")
            check_shape(value[key], sub, f"{where}.{key}")
    elif isinstance(shape, list):
        if not isinstance(value, list):
            raise BadInput(f"{where} must be a list, got {_type_name(value)}")
        for n, item in enumerate(value):
            check_shape(item, shape[0], f"{where}[{n}]")
    elif isinstance(shape, str):
        if not _SCALARS[shape](value):
            raise BadInput(f"{where} must be a {shape}, got {_type_name(value)} {_shown(value)}")
        check_number(value, where)
    elif isinstance(shape, (type, tuple)):
        if not isinstance(value, shape):
            names = " or ".join(_TYPE_WORDS.get(t, t.__name__) for t in _types(shape))
            raise BadInput(f"{where} must be {names}, got {_type_name(value)} {_shown(value)}")
    else:
        problem = shape(value)
        if problem:
            raise BadInput(f"{where} {problem}")
    return value


def _types(shape) -> tuple:
    return shape if isinstance(shape, tuple) else (shape,)


def _shown(value) -> str:
    return _int_text(value) if isinstance(value, int) and not isinstance(value, bool) else excerpt(value)


# ----------------------------------------------------------------------------- reading


def read_text(path: str | Path, missing: str | None = None) -> str:
    """The text of the file ``path``; ``missing``: the message when there is no such file."""
    check_name(path)
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
    """A JSON document from a file a user named (``source`` names it in the error), its numbers bounded."""

    def integer(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_INT_DIGITS:
            raise BadInput(f"{source}: the integer {excerpt(digits)} is out of range (integers are read up to 2**64)")
        return check_number(int(digits), source)

    def constant(name: str):
        raise BadInput(f"{source}: {name} is not a finite number (JSON has no NaN or Infinity)")

    try:
        doc = json.loads(
            text,
            parse_int=integer,
            parse_float=lambda digits: check_number(float(digits), f"{source}: {excerpt(digits)}"),
            parse_constant=constant,
        )
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
