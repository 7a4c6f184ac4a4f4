# -*- coding: utf-8 -*-
"""/proc and /sys values under the sysroot set in one call, previous values journaled first: the work
of the module ``hostkit_values`` and of a ``values`` change of ``hostkit_changes``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

try:  # as Ansible ships it (AnsiballZ), and in-process beside the project's module_utils
    from ansible.module_utils.hostkit_cpulist import parse_cpulist, parse_mask

    # How the kernel refuses an IRQ affinity (EIO: managed; EPERM/EINVAL: per-CPU or chip-restricted) and
    # the lab's stand-in for that EIO: one rule with the boot-time unit's program.
    from ansible.module_utils.hostkit_irq_affinity import LAB_MANAGED_MARKER, REFUSED_ERRNOS
    from ansible.module_utils.hostkit_journal_io import ModuleFailure
    from ansible.module_utils.hostkit_sysroot import is_live, sysroot_path
    from ansible.module_utils.hostkit_values import KINDS, same
except ImportError:  # in hostkit's agent on the host, which carries no Ansible
    from hostkit.agent.journal_io import ModuleFailure
    from hostkit.core.cpulist import parse_cpulist, parse_mask
    from hostkit.core.irq_affinity import LAB_MANAGED_MARKER, REFUSED_ERRNOS
    from hostkit.core.sysroot import is_live, sysroot_path
    from hostkit.core.values import KINDS, same

OPTIONS = dict(
    items=dict(type="list", elements="dict", required=True),
    tolerate_refused=dict(type="bool", default=False),
)
RULES = {}


def check_value(kind, text):
    """Raise ValueError, with the parser's reason, when ``text`` is not a ``kind`` (the shared
    normaliser would compare it as plain text, equal to nothing the module writes)."""
    text = text.strip()
    if kind == "cpulist":
        parse_cpulist(text)
    elif kind == "mask":
        parse_mask(text)
    elif kind == "int":
        try:
            int(text.split()[0])
        except (IndexError, ValueError):
            raise ValueError("%r is not an integer" % (text,))


def check_items(items):
    """Params only: every item has an absolute path, a known kind and a value of that kind."""
    for n, item in enumerate(items, 1):
        path, kind = item.get("path"), item.get("kind", "str")
        if not path or not os.path.isabs(path) or kind not in KINDS:
            raise ModuleFailure("bad item %r: needs an absolute path and kind %s" % (item, "/".join(KINDS)))
        if item.get("value") is None:
            raise ModuleFailure("bad item %d (%s): no value" % (n, path))
        try:
            check_value(kind, str(item["value"]))
        except ValueError as exc:
            raise ModuleFailure(
                "bad item %d (%s): value %r does not parse as %s: %s; nothing changed"
                % (n, path, item["value"], kind, exc)
            )


def read_host(sysroot, items, tolerate_refused):
    """For each item: the values its allowed_from file offers, whether the lab marks it managed,
    and its current content (None when it cannot be read)."""
    lab = not is_live(sysroot)
    seen = []
    for item in items:
        full = sysroot_path(sysroot, item["path"])
        allowed = None
        if item.get("allowed_from"):
            try:
                with open(sysroot_path(sysroot, item["allowed_from"])) as f:
                    allowed = f.read().split()
            except (IOError, OSError):
                pass
        managed = lab and tolerate_refused and os.path.exists(os.path.join(os.path.dirname(full), LAB_MANAGED_MARKER))
        current = None
        if not managed:
            try:
                with open(full) as f:
                    current = f.read()
            except (IOError, OSError):
                pass
        seen.append({"allowed": allowed, "managed": managed, "current": current})
    return seen


def decide(items, seen):
    """Pure: the values to write (path, before, after, kind) and the result, from the items and
    what ``read_host`` saw for each."""
    todo, missing, unchanged, refused = [], [], 0, []
    for item, s in zip(items, seen):
        path, kind = item["path"], item.get("kind", "str")
        value = str(item["value"])
        if s["allowed"] is not None and value not in s["allowed"]:
            raise ModuleFailure(
                "%s: %r is not offered (%s: %s); nothing changed"
                % (path, value, item["allowed_from"], " ".join(s["allowed"]))
            )
        if s["managed"]:
            refused.append({"path": path, "error": "Input/output error (lab: managed IRQ)"})
            continue
        if s["current"] is None:
            missing.append(path)
            continue
        try:
            check_value(kind, s["current"])
        except ValueError:
            raise ModuleFailure("%s: cannot compare %r with %r as %s" % (path, s["current"].strip(), value, kind))
        if same(kind, value, s["current"]):
            unchanged += 1
            continue
        todo.append({"path": path, "before": s["current"].rstrip("\n"), "after": value, "kind": kind})
    result = dict(
        changed=bool(todo),
        unchanged=unchanged,
        missing=missing,
        refused=refused,
        changes=[{"path": t["path"], "before": t["before"], "after": t["after"]} for t in todo],
    )
    return todo, result


def diff(todo):
    return dict(
        before="".join("%s = %s\n" % (t["path"], t["before"]) for t in todo),
        after="".join("%s = %s\n" % (t["path"], t["after"]) for t in todo),
    )


def do(params, journal, todo, result):
    """Journal every value in one entry, then write them; writes the kernel refuses are reported
    (with tolerate_refused) and dropped from the journal, anything else fails the module."""
    try:
        entry = journal.record({"kind": "values", "role": params["role"], "items": todo})
    except (IOError, OSError) as exc:
        raise ModuleFailure("cannot write the journal %s (nothing changed): %s" % (journal.path, exc))
    refused, written = list(result["refused"]), 0
    for t in todo:
        try:
            with open(sysroot_path(params["sysroot"], t["path"]), "w") as f:
                f.write(t["after"] + "\n")
            written += 1
        except (IOError, OSError) as exc:
            if exc.errno in REFUSED_ERRNOS and params["tolerate_refused"]:
                refused.append({"path": t["path"], "error": os.strerror(exc.errno)})
                continue
            result.update(refused=refused, written=written, changed=written > 0)
            raise ModuleFailure("writing %s failed: %s" % (t["path"], exc), **result)
    newly_refused = [r["path"] for r in refused[len(result["refused"]) :]]
    if newly_refused:
        journal.drop_items(entry["seq"], newly_refused)
    result.update(refused=refused, written=written, changed=written > 0)


def work(params, journal, check_mode=False, diff_mode=False):
    """Check the items, read the host, decide, then (unless in check mode) journal and write."""
    check_items(params["items"])
    todo, result = decide(params["items"], read_host(params["sysroot"], params["items"], params["tolerate_refused"]))
    if diff_mode and todo:
        result["diff"] = diff(todo)
    if todo and not check_mode:
        do(params, journal, todo, result)
    return result
