# -*- coding: utf-8 -*-
"""IRQs found by what they are, not by their number: the one parser of ``/proc/interrupts`` and the
one rule that turns the plan's IRQ rules (action name -> cpulist) into this boot's IRQ numbers.

IRQ numbers are not stable across boots (MSI-X vectors are allocated in probe order; a new kernel
or a new device renumbers them), the action names in the last column of ``/proc/interrupts``
(``eth0-TxRx-3``, ``nvme0q2``, ``virtio1-input.0``, ``ahci[0000:00:17.0]``) are. The planner keys
its rules by that column; the ``irq_affinity`` role resolves them to numbers at apply time
(``--resolve``, the numbers go to the journaled ``hostkit_values`` write) and, on hosts without
irqbalance, the boot-time unit ``hostkit-irq-affinity.service`` runs this file to write
``smp_affinity_list`` of every IRQ a rule names, in the boot it runs in.

An IRQ whose name is empty cannot be found again after a reboot: it has no rule (the planner says
so in the plan's reasons) and keeps what the kernel's ``irqaffinity=`` / ``default_smp_affinity``
gave it. Several IRQs with one name (``ACPI:Ged``, ``PCIe PME, aerdrv`` on every root port) are all
written with that name's cpulist; the planner drops a name whose IRQs it wanted on different CPUs.

Standard library only, no hostkit imports: it runs on hosts with nothing but python3 (the role
installs this file as it is; ``roles/irq_affinity/files/`` links here). The ``hostkit_values`` module
reads the kernel's refusal rule from it (as ``module_utils/hostkit_irq_affinity.py``). Usage::

    python3 irq_affinity.py RULES.json [--root DIR]     # write (the boot-time unit)
    python3 irq_affinity.py RULES.json --resolve [--root DIR]   # print this boot's numbers as JSON

RULES.json (or the JSON text itself with ``--rules-json``): ``{"by_name": {name: cpulist},
"default_smp_affinity": hex mask or null}``. Every write, refusal and miss is logged on stdout (the
journal, under the unit); the exit status is 0 unless a write failed for a reason other than the
kernel's refusal (EIO: managed IRQ; EPERM/EINVAL: per-CPU or chip-restricted), or the input is bad (2).
"""

from __future__ import absolute_import, division, print_function

import errno
import json
import os
import sys

# How the kernel refuses an IRQ affinity (as hostkit_values reads it): EIO for managed IRQs,
# EPERM/EINVAL for per-CPU or chip-restricted ones.
REFUSED_ERRNOS = (errno.EIO, errno.EPERM, errno.EINVAL)
# In a lab sysroot (root other than /), this file beside an IRQ's files stands for that EIO.
LAB_MANAGED_MARKER = ".managed"


def parse_interrupts(text):
    """Numbered IRQ rows of ``/proc/interrupts``: irq, per-CPU counts, chip, hwirq, name.

    Raises ValueError naming the IRQ and its line when a count does not parse."""
    lines = text.splitlines()
    if not lines:
        return []
    ncols = len(lines[0].split())
    rows = []
    for line in lines[1:]:
        label, sep, rest = line.partition(":")
        label = label.strip()
        if not sep or not label.isdigit():
            continue  # NMI, LOC, ERR, ... : architecture counters, not IRQ lines
        fields = rest.split()
        counts_txt, tail = fields[:ncols], fields[ncols:]
        try:
            counts = [int(c) for c in counts_txt]
        except ValueError:
            raise ValueError("for IRQ %s: %r" % (label, line.strip()))
        rows.append(
            {
                "irq": int(label),
                "total": sum(counts),
                "per_cpu": counts,
                "chip": tail[0] if tail else "",
                "hwirq": tail[1] if len(tail) > 1 else "",
                "name": " ".join(tail[2:]) if len(tail) > 2 else "",
            }
        )
    return rows


def name_rules(assignments, names):
    """The plan's IRQ rules by name: ``assignments`` (IRQ number -> cpulist, in the boot the facts
    were read in) and ``names`` (IRQ number -> its action name there) -> (name -> cpulist, IRQ
    number -> why it has no rule). An empty name, or a name whose IRQs want different CPUs, cannot
    be matched in another boot."""
    by_name, conflict, unmatched = {}, set(), {}  # type: dict, set, dict
    for irq, cpus in assignments.items():
        name = names.get(irq, "")
        if not name:
            unmatched[irq] = "no action name"
        elif by_name.setdefault(name, cpus) != cpus:
            conflict.add(name)
    for irq in assignments:
        if names.get(irq, "") in conflict:
            unmatched[irq] = "name %r shared by IRQs planned on different CPUs" % names[irq]
    return {n: c for n, c in by_name.items() if n not in conflict}, unmatched


def resolve(by_name, rows):
    """This boot's IRQs for the rules: (IRQ number as str -> cpulist, the names no IRQ carries)."""
    assign = {}
    seen = set()
    for row in rows:
        cpus = by_name.get(row["name"])
        if cpus is not None:
            assign[str(row["irq"])] = cpus
            seen.add(row["name"])
    return assign, sorted(set(by_name) - seen)


def _say(text, stream=None):
    """One line on stdout (the journal, under the unit) or ``stream``."""
    stream = stream or sys.stdout
    stream.write(text + "\n")


def _path(root, rel):
    return os.path.join(root, rel.lstrip("/"))


def _write(root, rel, value):
    """Write ``value`` to ``rel`` under ``root``: None when done, else the kernel's refusal (a str)
    or the exception of any other failure."""
    full = _path(root, rel)
    if root != "/" and os.path.exists(os.path.join(os.path.dirname(full), LAB_MANAGED_MARKER)):
        return "Input/output error (lab: managed IRQ)"
    try:
        with open(full, "w") as f:
            f.write(value + "\n")
    except (IOError, OSError) as exc:
        if exc.errno in REFUSED_ERRNOS:
            return os.strerror(exc.errno)
        return exc
    return None


def read_rows(root="/"):
    """The IRQ rows of ``root``'s /proc/interrupts (:func:`parse_interrupts`)."""
    with open(_path(root, "proc/interrupts")) as f:
        return parse_interrupts(f.read())


def apply_rules(rules, root="/", out=_say):
    """Write each IRQ the rules name (found in ``root``'s /proc/interrupts), then
    default_smp_affinity; log each step with ``out``. Returns the exit status."""
    rows = read_rows(root)
    assign, missed = resolve(rules.get("by_name") or {}, rows)
    name_of = {str(r["irq"]): r["name"] for r in rows}
    status, done, refused = 0, 0, 0
    for irq in sorted(assign, key=int):
        got = _write(root, "proc/irq/%s/smp_affinity_list" % irq, assign[irq])
        if got is None:
            done += 1
            out("IRQ %s (%s) -> %s" % (irq, name_of[irq], assign[irq]))
        elif isinstance(got, str):
            refused += 1
            out("IRQ %s (%s): the kernel refuses to move it (%s), left where it is" % (irq, name_of[irq], got))
        else:
            status = 1
            out("IRQ %s (%s): FAILED to write %s: %s" % (irq, name_of[irq], assign[irq], got))
    for name in missed:
        out("no IRQ named %r in this boot: its rule (%s) is not used" % (name, rules["by_name"][name]))
    mask = rules.get("default_smp_affinity")
    if mask:
        got = _write(root, "proc/irq/default_smp_affinity", mask)
        if got is None:
            out("default_smp_affinity -> %s" % mask)
        else:
            status = 1
            out("default_smp_affinity: FAILED to write %s: %s" % (mask, got))
    out("%d IRQ(s) moved, %d refused by the kernel, %d rule(s) without an IRQ" % (done, refused, len(missed)))
    return status


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: irq_affinity.py (RULES.json | --rules-json TEXT) [--resolve] [--root DIR]"
    root, resolve_only, text, path = "/", False, None, None
    try:
        while argv:
            arg = argv.pop(0)
            if arg == "--root":
                root = argv.pop(0) or "/"
            elif arg == "--resolve":
                resolve_only = True
            elif arg == "--rules-json":
                text = argv.pop(0)
            elif not arg.startswith("-") and path is None:
                path = arg
            else:
                raise IndexError
        if (text is None) == (path is None):
            raise IndexError
        if text is None:
            with open(path) as f:  # type: ignore[arg-type]  # exactly one of text, path is None
                text = f.read()
        rules = json.loads(text)
        if not isinstance(rules, dict) or not isinstance(rules.get("by_name", {}), dict):
            raise ValueError("rules must be an object with a by_name object")
    except IndexError:
        _say(usage, sys.stderr)
        return 2
    except (IOError, OSError, ValueError) as exc:
        _say("hostkit-irq-affinity: bad rules: %s" % exc, sys.stderr)
        return 2
    if resolve_only:
        assign, missed = resolve(rules.get("by_name") or {}, read_rows(root))
        _say(json.dumps({"assignments": assign, "missed": missed}, sort_keys=True))
        return 0
    return apply_rules(rules, root)


if __name__ == "__main__":
    raise SystemExit(main())
