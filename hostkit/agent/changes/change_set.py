# -*- coding: utf-8 -*-
"""One role's changes in one call (the work of ``hostkit_changes``): each change checked with its
kind's argument spec before the first is made (:func:`parse`, where Ansible is: the module, or the
action plugin on the controller), then made in order, each journaled first, a ``run`` change only
when a change before it changed something (:func:`apply_changes`, on the host: in the module, or in
hostkit's agent from a parsed request, :func:`run_request`)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shutil

try:  # as Ansible ships it (AnsiballZ), and in-process beside the project's module_utils
    from ansible.module_utils.hostkit_change_bootargs import OPTIONS as BOOTARGS
    from ansible.module_utils.hostkit_change_bootargs import work as bootargs_work
    from ansible.module_utils.hostkit_change_file import OPTIONS as FILE
    from ansible.module_utils.hostkit_change_file import RULES as FILE_RULES
    from ansible.module_utils.hostkit_change_file import work as file_work
    from ansible.module_utils.hostkit_change_irqs import OPTIONS as IRQS
    from ansible.module_utils.hostkit_change_irqs import work as irqs_work
    from ansible.module_utils.hostkit_change_kthreads import OPTIONS as KTHREADS
    from ansible.module_utils.hostkit_change_kthreads import work as kthreads_work
    from ansible.module_utils.hostkit_change_kubelet_state import OPTIONS as KUBELET_STATE
    from ansible.module_utils.hostkit_change_kubelet_state import work as kubelet_state_work
    from ansible.module_utils.hostkit_change_run import OPTIONS as RUN
    from ansible.module_utils.hostkit_change_run import work as run_work
    from ansible.module_utils.hostkit_change_values import OPTIONS as VALUES
    from ansible.module_utils.hostkit_change_values import work as values_work
    from ansible.module_utils.hostkit_host_lock import ARGUMENT_SPEC as LOCK_SPEC
    from ansible.module_utils.hostkit_host_lock import hold as hold_lock
    from ansible.module_utils.hostkit_journal_io import Journal, ModuleFailure, journaled_module_options
except ImportError:  # in hostkit's agent on the host, which carries no Ansible
    from hostkit.agent.changes.bootargs import OPTIONS as BOOTARGS
    from hostkit.agent.changes.bootargs import work as bootargs_work
    from hostkit.agent.changes.file import OPTIONS as FILE
    from hostkit.agent.changes.file import RULES as FILE_RULES
    from hostkit.agent.changes.file import work as file_work
    from hostkit.agent.changes.irqs import OPTIONS as IRQS
    from hostkit.agent.changes.irqs import work as irqs_work
    from hostkit.agent.changes.kthreads import OPTIONS as KTHREADS
    from hostkit.agent.changes.kthreads import work as kthreads_work
    from hostkit.agent.changes.kubelet_state import OPTIONS as KUBELET_STATE
    from hostkit.agent.changes.kubelet_state import work as kubelet_state_work
    from hostkit.agent.changes.run import OPTIONS as RUN
    from hostkit.agent.changes.run import work as run_work
    from hostkit.agent.changes.values import OPTIONS as VALUES
    from hostkit.agent.changes.values import work as values_work
    from hostkit.agent.journal_io import Journal, ModuleFailure, journaled_module_options
    from hostkit.agent.lock import ARGUMENT_SPEC as LOCK_SPEC
    from hostkit.agent.lock import hold as hold_lock

# kind -> (its options, their rules, its work)
KINDS = {
    "file": (FILE, FILE_RULES, file_work),
    "values": (VALUES, {}, values_work),
    "bootargs": (BOOTARGS, {}, bootargs_work),
    "kthreads": (KTHREADS, {}, kthreads_work),
    "kubelet_state": (KUBELET_STATE, {}, kubelet_state_work),
    "irqs": (IRQS, {}, irqs_work),
    "run": (dict(RUN, if_changed=dict(type="raw", default=True)), {}, run_work),
}
HOISTED = ("reboot_required", "pending_args", "booted_cmdline", "next_boot_cmdline", "bootloader")
# The module's own options (hostkit_changes; its action plugin checks the same). ``lock``: hold the
# run's host-side lock first (hostkit_lock's state=acquired), so an apply needs no call of its own for it.
ARGUMENT_SPEC = journaled_module_options(
    changes=dict(type="list", elements="dict", required=True),
    lock=dict(type="bool", default=False),
    controller=dict(type="str", default=""),
)


def ansible_validate(spec, rules, given):
    """(validated parameters, error messages) of ``given`` against an argument spec, by Ansible's own
    validator: :func:`parse` runs where Ansible is (the module, the controller), never in the agent."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    checked = ArgumentSpecValidator(spec, **rules).validate(given)
    return checked.validated_parameters, checked.error_messages


def parse(changes, validate=ansible_validate):
    """Params only: each change's kind, name, validated options and needed programs, before anything
    is done (a ModuleFailure naming the change otherwise)."""
    parsed, names = [], set()
    for n, change in enumerate(changes, 1):
        if not isinstance(change, dict):
            raise ModuleFailure("change %d is not a mapping: %r; nothing changed" % (n, change), failed_change=n)
        if not change.get("when", True):
            continue
        name = change.get("name")
        kinds = [k for k in change if k not in ("name", "when", "needs")]
        if len(kinds) != 1 or kinds[0] not in KINDS:
            raise ModuleFailure(
                "change %d needs exactly one kind of %s, got %s; nothing changed"
                % (n, ", ".join(sorted(KINDS)), ", ".join(sorted(kinds)) or "none"),
                failed_change=n,
            )
        kind = kinds[0]
        spec, rules, _work = KINDS[kind]
        given = change[kind] if isinstance(change[kind], dict) else None
        if given is None:
            raise ModuleFailure(
                "change %d (%s): its options must be a mapping; nothing changed" % (n, kind), failed_change=n
            )
        params, errors = validate(spec, rules, given)
        if errors:
            raise ModuleFailure("change %d (%s): %s; nothing changed" % (n, kind, "; ".join(errors)), failed_change=n)
        if kind == "run":
            trigger = params["if_changed"]
            if not isinstance(trigger, (bool, list)) or (isinstance(trigger, list) and not set(trigger) <= names):
                raise ModuleFailure(
                    "change %d (run): if_changed must be true, false or a list of names of changes "
                    "before it (%s), got %r; nothing changed" % (n, ", ".join(sorted(names)) or "none named", trigger),
                    failed_change=n,
                )
        needs = change.get("needs") or []
        if not isinstance(needs, list) or not all(isinstance(x, str) and x for x in needs):
            raise ModuleFailure(
                "change %d (%s): needs must be a list of program names, got %r; nothing changed" % (n, kind, needs),
                failed_change=n,
            )
        if name is not None:
            names.add(name)
        parsed.append((kind, name, params, needs))
    return parsed


def missing_programs(needs, which=shutil.which):
    return [p for p in needs if which(p) is None]


def triggered(trigger, changed_names, any_changed):
    if trigger is True:
        return any_changed
    if trigger is False:
        return True
    return bool(set(trigger) & changed_names)


def apply_changes(common, parsed, journal, check_mode, diff_mode):
    """Make the changes in order; the module's result. A failing change raises ModuleFailure with the
    results so far and its position."""
    results, changed_names, any_changed = [], set(), False
    for n, (kind, name, params, needs) in enumerate(parsed, 1):
        params = dict(params, **common)
        label = {"kind": kind, "name": name}
        absent = missing_programs(needs)
        if absent:
            results.append(dict(label, changed=False, not_applicable="%s is not installed" % ", ".join(absent)))
            continue
        if kind == "run" and not triggered(params["if_changed"], changed_names, any_changed):
            results.append(dict(label, changed=False, not_triggered=True, argv=params["argv"]))
            continue
        try:
            res = KINDS[kind][2](params, journal, check_mode, diff_mode)
        except ModuleFailure as exc:
            results.append(dict(label, failed=True, msg=str(exc), **exc.fields))
            raise ModuleFailure(
                "change %d (%s%s): %s" % (n, kind, " %s" % name if name else "", exc),
                **summary(results, failed_change=n),
            )
        results.append(dict(label, **res))
        if res.get("changed") and kind != "run":
            any_changed = True
            if name is not None:
                changed_names.add(name)
    return summary(results)


def summary(results, **extra):
    out = dict(
        changed=any(r.get("changed") for r in results),
        results=results,
        refused=[x for r in results for x in r.get("refused") or []],
        **extra,
    )
    diffs = []
    for r in results:
        d = r.pop("diff", None)
        diffs += d if isinstance(d, list) else [d] if d else []
    if diffs:
        out["diff"] = diffs
    for r in results:
        if r["kind"] == "bootargs":
            out.update((k, r[k]) for k in HOISTED if k in r)
    return out


def request(params, parsed, check_mode, diff_mode):
    """What the controller sends the agent (JSON on its stdin; the sysroot is the agent's
    ``--sysroot``): the run, role and lock of the module's options, the parsed changes, the modes."""
    return dict(
        run_id=params["run_id"],
        role=params.get("role") or "",
        changes=[list(p) for p in parsed],
        lock=bool(params.get("lock")),
        controller=params.get("controller") or "",
        check_mode=bool(check_mode),
        diff_mode=bool(diff_mode),
    )


def run_request(req, sysroot):
    """The agent's side of :func:`request`: the module's result, ``failed`` with ``msg`` (and the
    fields of the failure) when a change failed. A request of another shape changes nothing."""
    try:
        parsed = [(kind, name, params, list(needs)) for kind, name, params, needs in req["changes"]]
        if not all(kind in KINDS and isinstance(params, dict) for kind, _name, params, _needs in parsed):
            raise ValueError("unknown kind or options")
        common = dict(sysroot=sysroot, run_id=req["run_id"], role=req["role"])
        check_mode, diff_mode = bool(req["check_mode"]), bool(req["diff_mode"])
        lock = {"controller": req.get("controller") or ""} if req.get("lock") else None
    except (KeyError, TypeError, ValueError) as exc:
        return dict(
            failed=True, changed=False, msg="hostkit agent: not a hostkit_changes request (%s); nothing changed" % exc
        )
    return outcome(common, parsed, check_mode, diff_mode, lock)


def outcome(common, parsed, check_mode, diff_mode, lock=None):
    """The module's result for ``parsed`` changes on the host, for the module and the agent alike:
    ``failed`` with the failing change's ``msg`` and fields (the changes before it stay made and
    journaled), or ``failed`` with nothing changed when an option is wrong for the host.

    ``lock`` (``{"controller": ...}``): first hold the run's host-side lock - taken when free
    (``acquired`` in the result), kept when this run holds it, refused with nothing changed when
    another run does (``locked``, ``holder``), as hostkit_lock does."""
    acquired = {}
    try:
        if lock is not None:
            params = {k: spec.get("default") for k, spec in LOCK_SPEC.items()}
            params.update(
                sysroot=common["sysroot"],
                run_id=common["run_id"],
                state="acquired",
                controller=lock.get("controller") or "",
            )
            held = hold_lock(params, check_mode)
            acquired = {"acquired": True} if held.get("acquired") else {}
        result = apply_changes(common, parsed, Journal(common["sysroot"], common["run_id"]), check_mode, diff_mode)
        return dict(result, **acquired)
    except ModuleFailure as exc:
        return dict(exc.fields, failed=True, msg=str(exc), **acquired)
    except ValueError as exc:
        return dict(failed=True, changed=False, msg=str(exc), **acquired)
