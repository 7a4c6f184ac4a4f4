# -*- coding: utf-8 -*-
"""Kernel cpulists ("0-3,8-11") and hex CPU masks ("ff,00000000").

Formats as the kernel writes them (lib/bitmap.c ``bitmap_print_to_pagebuf``
for lists, ``bitmap_scnprintf`` for masks: 32-bit words, comma separated,
most significant first). Everything in hostkit that holds a set of CPUs holds
a ``frozenset[int]`` and converts at the edges with these functions.

Shared by the agent, the controller and hostkit's Ansible modules (as
``module_utils/hostkit_cpulist.py``, a symlink to this file). Standard library
only; Python 2-compatible syntax because Ansible may load it anywhere.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:  # in the hostkit package: a BadInput (exit code 2) as well as a ValueError
    from hostkit.errors import CpulistError
except ImportError:  # inside an Ansible module (module_utils/hostkit_cpulist.py)

    class CpulistError(ValueError):
        """A kernel cpulist or CPU mask that does not parse."""


# Large enough for any real machine (the kernel's NR_CPUS tops out at 8192),
# small enough that "0-99999999" cannot eat the controller's memory.
MAX_CPUS = 8192
SHOWN = 60  # characters of a bad cpulist or mask quoted in an error


def _shown(text):
    """The input as an error quotes it: at most SHOWN characters (a 1 MB value is not echoed)."""
    return repr(text) if len(text) <= SHOWN else "%r... (%d characters)" % (text[:SHOWN], len(text))


def _digits(s):
    """ASCII decimal digits only (``str.isdigit`` also takes ``²``, which int() refuses)."""
    return bool(s) and all("0" <= c <= "9" for c in s)


def _int(s, text):
    """A CPU number of ASCII digits (checked by the caller) as an int; leading zeros taken as the
    kernel takes them, and more than 9 significant digits refused before int() sees them (Python
    refuses to convert over 4300 digits, and no CPU number is that long)."""
    significant = s.lstrip("0") or "0"
    if len(significant) > 9:
        raise CpulistError("invalid cpulist %s: %s is not a CPU number" % (_shown(text), _shown(s)))
    return int(significant)


def parse_cpulist(text, max_cpus=MAX_CPUS):
    """Parse a kernel cpulist; also accepts the ``a-b:n/m`` stride form.

    The empty string (and a lone newline) is the empty set, as the kernel
    writes for ``/sys/devices/system/cpu/isolated`` with nothing isolated.
    """
    if not isinstance(text, str):
        raise CpulistError("cpulist must be a string, got %s: %s" % (type(text).__name__, _shown(repr(text))))
    body = text.strip()
    cpus = set()  # type: set[int]
    if not body:
        return frozenset()
    if _digits(body):  # the common single-CPU case, on the hot path of sysfs reads
        cpu = _int(body, text)
        if cpu >= max_cpus:
            raise CpulistError(
                "invalid cpulist %s: CPU %d is beyond the limit of %d CPUs" % (_shown(text), cpu, max_cpus)
            )
        return frozenset((cpu,))
    for part in body.split(","):
        part = part.strip()
        if not part:
            raise CpulistError("invalid cpulist %s: empty element" % (_shown(text),))
        stride_used, stride_group = 1, 1
        if ":" in part:
            part, _colon, stride = part.partition(":")
            used, slash, group = stride.partition("/")
            if not slash:
                raise CpulistError("invalid cpulist %s: stride must be ':used/group'" % (_shown(text),))
            stride_used, stride_group = _num(used, text), _num(group, text)
            if stride_used == 0 or stride_group == 0 or stride_used > stride_group:
                raise CpulistError("invalid cpulist %s: bad stride %r" % (_shown(text), stride))
        lo_s, dash, hi_s = part.partition("-")
        lo = _num(lo_s, text)
        hi = _num(hi_s, text) if dash else lo
        if hi < lo:
            raise CpulistError("invalid cpulist %s: range %d-%d runs backwards" % (_shown(text), lo, hi))
        if hi >= max_cpus:
            raise CpulistError(
                "invalid cpulist %s: CPU %d is beyond the limit of %d CPUs" % (_shown(text), hi, max_cpus)
            )
        if stride_group == 1:
            cpus.update(range(lo, hi + 1))
        else:
            for start in range(lo, hi + 1, stride_group):
                cpus.update(range(start, min(start + stride_used, hi + 1)))
    return frozenset(cpus)


def _num(s, text):
    s = s.strip()
    if not _digits(s):
        raise CpulistError("invalid cpulist %s: %s is not a CPU number" % (_shown(text), _shown(s)))
    return _int(s, text)


def format_cpulist(cpus):
    """Format CPUs as the kernel does: sorted, ranges collapsed, ``""`` if empty."""
    ordered = sorted(set(cpus))
    if any((not isinstance(c, int)) or c < 0 for c in ordered):
        raise CpulistError("CPU numbers must be non-negative integers: %r" % (ordered,))
    parts = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else "%d-%d" % (ordered[i], ordered[j]))
        i = j + 1
    return ",".join(parts)


def parse_mask(text, max_cpus=MAX_CPUS):
    """Parse a kernel hex CPU mask (``/proc/irq/N/smp_affinity``, ``cpumap``)."""
    if not isinstance(text, str):
        raise CpulistError("CPU mask must be a string, got %s: %s" % (type(text).__name__, _shown(repr(text))))
    body = text.strip().replace(",", "")
    if body.startswith(("0x", "0X")):
        body = body[2:]
    if not body:
        raise CpulistError("invalid CPU mask %s: empty" % (_shown(text),))
    if not all(c in "0123456789abcdefABCDEF" for c in body):
        raise CpulistError("invalid CPU mask %s: not hexadecimal" % (_shown(text),))
    if len(body.lstrip("0")) * 4 > max_cpus + 3:  # more hex digits than any mask of max_cpus bits
        raise CpulistError("invalid CPU mask %s: sets a CPU beyond %d" % (_shown(text), max_cpus))
    try:
        value = int(body, 16)
    except ValueError:
        raise CpulistError("invalid CPU mask %s: not hexadecimal" % (_shown(text),))
    if value.bit_length() > max_cpus:
        raise CpulistError("invalid CPU mask %s: sets a CPU beyond %d" % (_shown(text), max_cpus))
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def format_mask(cpus, nr_cpus=None):
    """Format CPUs as a kernel hex mask of 32-bit comma-separated words.

    ``nr_cpus`` (the possible CPU count) sets the width as the kernel would;
    without it the mask is as wide as its highest CPU needs.
    """
    value = 0
    for c in cpus:
        if c < 0:
            raise CpulistError("CPU numbers must be non-negative: %r" % (c,))
        value |= 1 << c
    nbits = max(nr_cpus or 0, value.bit_length(), 1)
    # The kernel's %*pb: 32-bit chunks, most significant first; the leading
    # chunk is only as wide as the bits left over (2 CPUs print as "3").
    chunks = []
    remaining = nbits
    while remaining > 0:
        width = remaining % 32 or 32
        remaining -= width
        chunks.append("%0*x" % ((width + 3) // 4, (value >> remaining) & ((1 << width) - 1)))
    return ",".join(chunks)
