# -*- coding: utf-8 -*-
"""How a kernel value compares: the one normaliser for ints, strings, cpulists and hex CPU masks.

``/proc/sys/kernel/sched_rt_runtime_us`` holds ``"950000\\n"``, a plan holds ``950000``;
``/proc/irq/default_smp_affinity`` holds a hex mask where a plan holds a cpulist. Everything
that asks "is this value already what we want" (the audit on the controller, rollback and its
verification on the host) normalises both sides with :func:`normalise` of the value's kind
(the kinds of :mod:`hostkit.tunables` and of the journal's value entries).

Standard library only; Python 2-compatible syntax so that hostkit's Ansible modules can share it
through ``module_utils`` like :mod:`hostkit.core.cpulist`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    from hostkit.core.cpulist import parse_cpulist, parse_mask
except ImportError:  # inside an Ansible module
    from ansible.module_utils.hostkit_cpulist import parse_cpulist, parse_mask

KINDS = ("int", "str", "cpulist", "mask", "choice")


def normalise(kind, value):
    """``value`` (text read from a file, or a plan's int/str) as a comparable value of ``kind``.

    int: the first word as an integer (``"0\\t1"`` from a two-valued sysctl compares by its first);
    cpulist and mask: a frozenset of CPUs (so ``"0-3"`` equals ``"f"``); str: stripped text;
    choice: the bracketed word of a sysfs choice file (``"always [madvise] never"`` is ``"madvise"``),
    which is also what the kernel accepts written back.
    Text that does not parse as its kind stays text: it then equals only the same text.
    """
    if kind not in KINDS:
        raise ValueError("unknown value kind %r (known: %s)" % (kind, ", ".join(KINDS)))
    if value is None:
        return None
    text = str(value).strip()
    try:
        if kind == "int":
            return int(text.split()[0]) if text else text
        if kind == "cpulist":
            return parse_cpulist(text)
        if kind == "mask":
            return parse_mask(text) if text else frozenset()
        if kind == "choice" and "[" in text:
            return text.split("[", 1)[1].split("]", 1)[0]
    except ValueError:  # CpulistError is a ValueError
        return text
    return text


def same(kind, want, got, got_kind=None):
    """Whether ``got`` (of ``got_kind``, default ``kind``) holds ``want`` once both are normalised."""
    return normalise(kind, want) == normalise(got_kind or kind, got)
