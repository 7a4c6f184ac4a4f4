"""The ``hostkit`` command.

Exit codes (DESIGN §4): 0 ok · 1 a check, host or SLO failed · 2 bad input
(nothing was changed) · 3 refused by a safety guard.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hostkit.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_REFUSED, BadInput, HostkitError

EPILOG = """\
exit codes: 0 ok, 1 a check/host/SLO failed, 2 bad input (nothing changed), 3 refused by a safety guard

examples:
  hostkit facts                                  this machine, human summary
  hostkit facts --sysroot tests/sysroots/x --json  a fixture tree, as JSON
  hostkit lab up --hosts 3                       three sshd lab hosts on 127.0.0.2-4
  hostkit facts -i .hostkit/lab/inventory.yml    every lab host over SSH (Ansible)
  hostkit lab down
"""


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with a one-line error (its own convention, and ours)."""

    def error(self, message: str):  # noqa: D401
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, f"hostkit: error: {message}\n")


def _emit_json(doc) -> None:
    json.dump(doc, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def _console(stderr: bool = False):
    """A rich console; when not a terminal, wide enough that host names never fold."""
    import os

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else int(os.environ.get("COLUMNS") or 0) or 160
    return Console(stderr=stderr, highlight=False, soft_wrap=stderr, width=width)


def _table(header: list[str], rows: list[list[str]], title: str | None = None):
    from rich.table import Table

    table = Table(title=title, show_lines=False, header_style="bold")
    for i, h in enumerate(header):
        # The first column names the host: never folded, whatever the width.
        table.add_column(h, overflow="fold", no_wrap=(i == 0))
    for r in rows:
        table.add_row(*r)
    return table


# ----------------------------------------------------------------------------- facts

def cmd_facts(args) -> int:
    if args.inventory:
        return _facts_remote(args)
    from hostkit.facts import gather
    from hostkit.facts.render import summary

    facts = gather(args.sysroot)
    if args.json:
        _emit_json(facts)
    else:
        print(summary(facts))
    return EXIT_OK


def _facts_remote(args) -> int:
    from hostkit.facts.render import FLEET_HEADER, fleet_row
    from hostkit.ansible.agent_call import call_agent

    err = _console(stderr=True)
    seen = {"n": 0}

    def progress(host: str, task: str, status: str) -> None:
        seen["n"] += 1
        if not args.json or args.verbose:
            err.print(f"[dim]{host}[/dim]: {status}", highlight=False)

    calls, run = call_agent(args.inventory, ["facts"], args.limit, forks=args.forks, on_event=progress)
    results = {h: ({"status": "ok", "facts": r["doc"]} if r["status"] == "ok" else r) for h, r in calls.items()}
    failed = [h for h, r in results.items() if r["status"] != "ok"]
    if args.json:
        _emit_json({"run_id": run.run_id, "hosts": results})
    else:
        rows = []
        for host, r in results.items():
            if r["status"] == "ok":
                rows.append(fleet_row(host, r["facts"]))
            else:
                rows.append([host, r["status"].upper(), "", "", "", "", "", r.get("error", "")[:60]])
        _console().print(_table(FLEET_HEADER, rows, title=f"hostkit facts: {len(results)} host(s)"))
        for host in failed:
            err.print(f"{host}: {results[host]['status']}: {results[host].get('error')}")
        err.print(f"run {run.run_id}: {len(results) - len(failed)} ok, {len(failed)} failed/unreachable "
                  f"({run.seconds:.1f} s); artifacts in {run.private_data_dir}")
    return EXIT_FAILED if failed else EXIT_OK


# ----------------------------------------------------------------------------- plan

def plans_for(args, writable: bool = False) -> dict[str, dict]:
    """Per host: {"plan": ...} or {"status": "unreachable"|"failed", "error": ...}; BadInput on bad input."""
    from hostkit.facts import gather
    from hostkit.plan import make_plan
    from hostkit.profiles import apply_overrides, load_profile

    if not getattr(args, "inventory", None):
        facts = gather(args.sysroot)
        profile = load_profile(args.profile)
        return {"localhost": {"status": "ok", "facts": facts,
                              "plan": make_plan(facts, profile, force=args.force, host="localhost")}}
    from hostkit.ansible.agent_call import call_agent
    from hostkit.ansible.inventory import load_inventory

    hosts = {h.name: h for h in load_inventory(args.inventory, args.limit)}
    # Profiles and overrides are checked for every host before any host is contacted.
    profiles = {}
    for name, h in hosts.items():
        profile = load_profile(args.profile or h.vars.get("hostkit_profile"))
        profiles[name] = apply_overrides(profile, h.vars.get("hostkit_overrides"),
                                         source=f"{name}: hostkit_overrides")
    results, _ = call_agent(args.inventory, ["facts"], args.limit, forks=getattr(args, "forks", None))
    out = {}
    for name, r in results.items():
        if r["status"] == "failed" and r.get("exit_code") == 2:
            raise BadInput(f"{name}: {r['error']}")  # the host's sysroot is bad input, not a host failure
        if r["status"] != "ok":
            out[name] = r
            continue
        facts = r["doc"]
        if writable and not facts.get("sysroot_writable", True):
            raise BadInput(f"{name}: sysroot {facts['sysroot']} is read-only: nothing can be applied there")
        profile, pinned = profiles[name]
        try:
            plan = make_plan(facts, profile, pinned, force=args.force, host=name)
        except BadInput as exc:
            raise BadInput(f"{name}: {exc}") from None
        out[name] = {"status": "ok", "facts": facts, "plan": plan}
    return out


def cmd_plan(args) -> int:
    from hostkit.plan.render import PLAN_HEADER, plan_rows, plan_text

    results = plans_for(args)
    if args.json:
        doc = {h: (r["plan"] if r["status"] == "ok" else {"status": r["status"], "error": r.get("error")})
               for h, r in results.items()}
        _emit_json(doc if args.inventory else doc["localhost"])
    else:
        con = _console()
        for host, r in results.items():
            if r["status"] != "ok":
                con.print(f"[bold]{host}[/bold]: {r['status']}: {r.get('error')}")
                continue
            plan = r["plan"]
            con.print(_table(PLAN_HEADER, plan_rows(plan),
                             title=f"{host}: profile {plan['profile']}" + (" (REFUSED)" if plan["refused"] else "")))
            print(plan_text(plan))
            print()
    if any(r["status"] == "ok" and r["plan"]["refused"] for r in results.values()):
        return EXIT_REFUSED
    return EXIT_FAILED if any(r["status"] != "ok" for r in results.values()) else EXIT_OK


# ----------------------------------------------------------------------------- apply

def cmd_apply(args) -> int:
    from hostkit.ansible.apply import apply, validate_tags

    validate_tags(args.tags)  # before any host is contacted
    err = _console(stderr=True)
    if not args.json:
        err.print(f"gathering facts and planning ({args.inventory})...")
    plans = plans_for(args, writable=not args.check)

    def progress(host: str, task: str, status: str) -> None:
        if not args.json:
            mark = {"ok": "ok", "failed": "FAILED", "unreachable": "UNREACHABLE", "skipped": "skip"}.get(status, status)
            err.print(f"  {host}: {task} [{mark}]", markup=False)

    if args.revert_on_fail and not args.verify_smoke:
        raise BadInput("--revert-on-fail needs --verify-smoke")
    result = apply(plans, args.inventory, check=args.check, diff=args.diff, tags=args.tags,
                   forks=args.forks, on_event=progress)
    verification = _verify_smoke(args, result) if args.verify_smoke and not args.check else {}
    if args.json:
        _emit_json({
            "run_id": result.run_id, "check": args.check,
            "hosts": {n: {"status": h.status, "changed": h.changed, "roles": h.roles,
                          "reboot_required": h.reboot_required, "refused": h.refused, "msg": h.msg,
                          "would_run": h.would_run, "irq_refused": h.irq_refused}
                      for n, h in result.hosts.items()},
            "artifacts": result.run.private_data_dir if result.run else None,
            "verify_smoke": verification,
        })
    else:
        rows = []
        for n, h in result.hosts.items():
            failed_roles = [r for r, v in h.roles.items() if v["failed"]]
            rows.append([n, h.status.upper() if h.status in ("failed", "unreachable", "refused") else h.status,
                         str(h.changed), ",".join(failed_roles) or "-",
                         "yes" if h.reboot_required else "no", str(len(h.would_run)),
                         (h.msg or "; ".join(h.refused) or "")[:100]])
        _console().print(_table(["host", "status", "changed", "failed roles", "reboot required", "would run",
                                 "message"], rows,
                                title=f"hostkit apply{' --check' if args.check else ''}: run {result.run_id}"))
        for n, h in result.hosts.items():
            for reason in h.refused:
                print(f"{n}: REFUSED: {reason}")
            if h.status in ("failed", "unreachable") and h.msg:
                print(f"{n}: {h.status.upper()}: {h.msg}")
        if args.diff and result.run:
            for n in result.plans:
                for t in result.run.hosts.get(n).tasks if result.run.hosts.get(n) else []:
                    for d in _diffs(t.res):
                        print(f"--- {n}: {d.get('before_header', t.task)}\n{_unified(d)}")
        for host, v in verification.items():
            print(f"smoke {host}: {v['verdict']}" + (f"; rolled back ({v['rollback']})" if v.get("rollback") else ""))
    if result.failed or any(not v["passed"] for v in verification.values()):
        return EXIT_FAILED
    return EXIT_REFUSED if result.refused else EXIT_OK


def _verify_smoke(args, result) -> dict:
    """Smoke-test each changed host; with --revert-on-fail, roll back the run on hosts that miss the SLO."""
    from hostkit.ansible.agent_call import SMOKE_OUTPUT, call_agent
    from hostkit.ansible.inventory import load_inventory

    changed = [h for h, r in result.hosts.items() if r.status == "changed"]
    if not changed:
        return {}
    limit = ",".join(changed)

    class SmokeArgs:  # the smoke command's options, from apply's
        profile, duration, infer_ms, clients = args.profile, args.smoke_duration, 2.0, 2
        transport = target_p999_ms = inject_stall = None

    settings = smoke_settings_for(args.inventory, limit, SmokeArgs)
    lab = any(h.vars.get("hostkit_lab") for h in load_inventory(args.inventory, limit))
    results, _ = call_agent(args.inventory, [], limit, forks=1 if lab else len(changed), playbook="smoke.yml",
                            output=SMOKE_OUTPUT, extravars={"hostkit_smoke_settings": settings})
    out = {}
    for host, r in results.items():
        passed = r["status"] == "ok" and r["doc"]["slo"]["passed"]
        verdict = (f"{'PASSED' if passed else 'MISSED'} p999 {r['doc']['slo']['p999_ms']} ms vs "
                   f"{r['doc']['slo']['target_p999_ms']} ms" if r["status"] == "ok" else f"{r['status']}: {r.get('error')}")
        out[host] = {"passed": passed, "verdict": verdict}
        if not passed and args.revert_on_fail:
            rb, _ = call_agent(args.inventory, ["rollback", "--run-id", result.run_id], host)
            ok = rb[host]["status"] == "ok" and not rb[host]["doc"]["errors"]
            out[host]["rollback"] = f"run {result.run_id} rolled back" if ok else f"rollback failed: {rb[host]}"
    return out


def _diffs(res: dict) -> list[dict]:
    d = res.get("diff")
    if not d:
        return []
    return [x for x in (d if isinstance(d, list) else [d]) if x.get("before") != x.get("after")]


def _unified(d: dict) -> str:
    import difflib

    return "".join(difflib.unified_diff(str(d.get("before", "")).splitlines(True), str(d.get("after", "")).splitlines(True),
                                        fromfile="before", tofile="after"))


# ----------------------------------------------------------------------------- history / rollback

def cmd_history(args) -> int:
    from hostkit.ansible.agent_call import call_agent

    results, _ = call_agent(args.inventory, ["history"], args.limit)
    if args.json:
        _emit_json({h: (r["doc"] if r["status"] == "ok" else r) for h, r in results.items()})
    else:
        rows = []
        for host, r in results.items():
            if r["status"] != "ok":
                rows.append([host, r["status"].upper(), "", "", "", r.get("error", "")[:80]])
                continue
            if not r["doc"]["runs"]:
                rows.append([host, "(no hostkit runs)", "", "", "", ""])
            for run in r["doc"]["runs"]:
                rows.append([host, run["run_id"] + (" (adopted)" if run["adopted"] else ""), str(run["changes"]),
                             ",".join(run["roles"]), run["last_change"] or "-", run["rolled_back"] or "-"])
        _console().print(_table(["host", "run", "changes", "roles", "last change", "rolled back"], rows,
                                title="hostkit history"))
    return EXIT_FAILED if any(r["status"] != "ok" for r in results.values()) else EXIT_OK


def cmd_adopt(args) -> int:
    """rollback --adopt: record each host's current tuning as a baseline run, then apply the profile."""
    from hostkit.ansible.apply import apply
    from hostkit.ansible.agent_call import call_agent

    plans = plans_for(args)  # bad input and refusals are known before anything is written
    results, _ = call_agent(args.inventory, ["adopt"], args.limit)
    failed = [h for h, r in results.items() if r["status"] != "ok"]
    for h in failed:
        plans[h] = {"status": results[h]["status"], "error": results[h].get("error")}
    applied = apply(plans, args.inventory, check=args.check, diff=args.diff)
    doc = {h: {"adopted_run": r["doc"]["run_id"] if r["status"] == "ok" else None,
               "adopted_files": r["doc"]["files"] if r["status"] == "ok" else [],
               "apply_status": applied.hosts[h].status if h in applied.hosts else "not run",
               "apply_run": applied.run_id, "reboot_required": applied.hosts[h].reboot_required
               if h in applied.hosts else False}
           for h, r in results.items()}
    if args.json:
        _emit_json({"hosts": doc})
    else:
        rows = [[h, v["adopted_run"] or "FAILED", str(len(v["adopted_files"])), v["apply_status"],
                 "yes" if v["reboot_required"] else "no"] for h, v in doc.items()]
        _console().print(_table(["host", "adopted baseline run", "files recorded", "apply", "reboot required"],
                                rows, title="hostkit rollback --adopt"))
        print(f"`hostkit rollback -i {args.inventory}` now returns these hosts to the adopted state.")
    if failed or applied.failed:
        return EXIT_FAILED
    return EXIT_REFUSED if applied.refused else EXIT_OK


def cmd_rollback(args) -> int:
    from hostkit.ansible.agent_call import call_agent

    if args.adopt:
        if args.run_id or args.all:
            raise BadInput("--adopt takes no --run-id or --all: it records a new baseline, then applies")
        return cmd_adopt(args)

    if args.run_id and args.all:
        raise BadInput("--run-id and --all exclude each other")
    if args.run_id and not all(c.isalnum() or c in "-_T" for c in args.run_id):
        raise BadInput(f"--run-id {args.run_id!r} is not a hostkit run id")
    argv = ["rollback"] + (["--run-id", args.run_id] if args.run_id else []) + (["--all"] if args.all else []) \
        + (["--check"] if args.check else []) + (["--diff"] if args.diff else [])
    results, run = call_agent(args.inventory, argv, args.limit)
    failed = False
    if args.json:
        _emit_json({"check": args.check, "hosts": {h: (r["doc"] if r["status"] == "ok" else r)
                                                    for h, r in results.items()}})
    rows = []
    for host, r in results.items():
        if r["status"] != "ok":
            failed = True
            rows.append([host, r["status"].upper(), "", "", "", "", "", r.get("error", "")[:80]])
            continue
        d = r["doc"]
        ok = not d["errors"] and (d["verify"] is None or d["verify"]["ok"])
        failed = failed or not ok
        rows.append([host, ("would change" if d["check"] and d["changed"] else
                            "changed" if d["changed"] else "unchanged") if ok else "FAILED",
                     ",".join(d["runs"]) or "-", str(len(d["actions"])), str(d["unchanged"]),
                     "-" if d["verify"] is None else ("ok" if d["verify"]["ok"] else
                                                     f"{len(d['verify']['mismatches'])} mismatch(es)"),
                     "yes" if d["reboot_required"] else "no",
                     "; ".join(e["path"] + ": " + e["error"] for e in d["errors"])[:80]])
        if args.diff and not args.json:
            for a in d["actions"]:
                if a.get("diff"):
                    print(f"--- {host}: {a['path']}\n{_unified(a['diff'])}")
                elif a["kind"] == "value":
                    print(f"--- {host}: {a['path']}: {a['from']} -> {a['to']}")
    if not args.json:
        _console().print(_table(["host", "status", "runs", "restored", "unchanged", "re-check", "reboot required",
                                 "errors"], rows, title=f"hostkit rollback{' --check' if args.check else ''}"))
    return EXIT_FAILED if failed else EXIT_OK


# ----------------------------------------------------------------------------- smoke

def cmd_smoke(args) -> int:
    from hostkit.smoke.report import plot, prometheus, table_rows, text_summary
    from hostkit.smoke.runner import SmokeConfig, parse_stall, run_smoke

    if args.inventory:
        return _smoke_remote(args)
    profile = None
    if args.profile:
        from hostkit.profiles import load_profile

        profile = load_profile(args.profile)
    stall_ms = stall_every = None
    if args.inject_stall:
        stall_ms, stall_every = parse_stall(args.inject_stall)
    cfg = SmokeConfig(
        transport=args.transport or (profile["smoke"]["transport"] if profile else "shm"),
        allocator=args.allocator, state_stride=args.state_stride, nslots=args.slots, infer_ms=args.infer_ms,
        model=args.model, requests=args.requests, duration=args.duration, clients=args.clients,
        client_batch=args.client_batch, rate=args.rate, max_batch=args.max_batch, min_batch=args.min_batch,
        busy_poll=args.busy_poll, cpu=args.cpu, fifo=not args.no_fifo, request_timeout_s=args.request_timeout,
        inject_stall_ms=stall_ms, inject_every_s=stall_every, with_cyclictest=args.with_cyclictest,
        target_p999_ms=args.target_p999_ms or (profile["smoke"]["target_p999_ms"] if profile else 1.0))
    if args.requests is not None and args.duration is not None:
        raise BadInput("--requests and --duration exclude each other")
    from hostkit.facts import gather

    facts = gather("/")
    if args.json:
        result = run_smoke(cfg, facts=facts)
    else:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("smoke"), BarColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=_console(stderr=True), transient=True) as bar:
            task = bar.add_task("starting", total=cfg.duration or cfg.requests or 1)

            def progress(done, total, elapsed, duration):
                if duration:
                    bar.update(task, completed=min(elapsed, duration), description=f"{done or 0} inferences")
                else:
                    bar.update(task, completed=done or 0, description=f"{done or 0}/{total}")

            result = run_smoke(cfg, progress=progress, facts=facts)
    values = result.pop("_deschedule_raw")
    if args.prom:
        Path(args.prom).write_text(prometheus(result, facts.get("hostname") or "localhost"))
    if args.plot:
        plot([(f"{result['transport']} (n={result['samples']})", result, values)], args.plot, cfg.target_p999_ms)
    if args.json:
        _emit_json(result)
    else:
        _console().print(_table(["metric (ms)", "n", "p50", "p99", "p999", "max"], table_rows(result),
                                title="hostkit smoke"))
        print(text_summary(result))
    return EXIT_OK if result["slo"]["passed"] else EXIT_FAILED


def smoke_settings_for(inventory: str, limit: str | None, args) -> dict[str, dict]:
    """Per host: the profile's transport and target, then what the command line says."""
    from hostkit.profiles import apply_overrides, load_profile
    from hostkit.ansible.inventory import load_inventory

    settings = {}
    for h in load_inventory(inventory, limit):
        profile, _ = apply_overrides(load_profile(args.profile or h.vars.get("hostkit_profile")),
                                     h.vars.get("hostkit_overrides"), source=f"{h.name}: hostkit_overrides")
        settings[h.name] = {
            "duration": args.duration or 10, "infer_ms": args.infer_ms, "clients": args.clients,
            "transport": args.transport or profile["smoke"]["transport"],
            "target_p999_ms": args.target_p999_ms or profile["smoke"]["target_p999_ms"],
            "inject_stall": args.inject_stall or "",
        }
    return settings


def _smoke_remote(args) -> int:
    from hostkit.ansible.agent_call import SMOKE_OUTPUT, call_agent
    from hostkit.ansible.inventory import load_inventory
    from hostkit.smoke.runner import parse_stall

    if args.requests is not None:
        raise BadInput("hostkit smoke -i runs for --duration seconds per host (not --requests)")
    if args.inject_stall:
        parse_stall(args.inject_stall)
    settings = smoke_settings_for(args.inventory, args.limit, args)
    hosts = load_inventory(args.inventory, args.limit)
    # Lab hosts share this machine: one at a time, or they would measure each other.
    forks = args.forks or (1 if any(h.vars.get("hostkit_lab") for h in hosts) else len(hosts))
    err = _console(stderr=True)
    if not args.json:
        err.print(f"smoke test on {len(hosts)} host(s), {forks} at a time, {settings[hosts[0].name]['duration']} s each")
    results, run = call_agent(args.inventory, [], args.limit, forks=forks, playbook="smoke.yml",
                              output=SMOKE_OUTPUT, extravars={"hostkit_smoke_settings": settings},
                              on_event=None if args.json else (lambda h, t, s: err.print(f"  {h}: {t} [{s}]",
                                                                                           markup=False)))
    docs = {h: (r["doc"] if r["status"] == "ok" else r) for h, r in results.items()}
    if args.json:
        _emit_json({"run_id": run.run_id, "hosts": docs})
    else:
        rows = []
        for host, r in results.items():
            if r["status"] != "ok":
                rows.append([host, r["status"].upper(), "", "", "", "", "", r.get("error", "")[:60]])
                continue
            d = r["doc"]
            rows.append([host, d["transport"], str(d["samples"]), str(d["deschedule_ms"]["p99"]),
                         str(d["deschedule_ms"]["p999"]), str(d["deschedule_ms"]["max"]),
                         "PASSED" if d["slo"]["passed"] else "MISSED",
                         ", ".join(x["cause"] for x in d["diagnosis"])])
        _console().print(_table(["host", "transport", "samples", "p99 ms", "p999 ms", "max ms", "SLO", "diagnosis"],
                                rows, title="hostkit smoke (deschedule)"))
    ok = all(r["status"] == "ok" and r["doc"]["slo"]["passed"] for r in results.values())
    return EXIT_OK if ok else EXIT_FAILED


# ----------------------------------------------------------------------------- unlock

def cmd_unlock(args) -> int:
    from hostkit.ansible.apply import unlock

    run = unlock(args.inventory, args.limit, run_id=args.run_id, force=args.run_id is None)
    released = {h: any((t.res or {}).get("released") for t in r.tasks) for h, r in run.hosts.items()}
    failed = {h: r.msg for h, r in run.hosts.items() if r.status != "ok"}
    if args.json:
        _emit_json({"released": released, "failed": failed})
    else:
        for h in sorted(run.hosts):
            print(f"{h}: " + (f"FAILED {failed[h]}" if h in failed else ("lock released" if released[h] else "not locked")))
    return EXIT_FAILED if failed else EXIT_OK


# ----------------------------------------------------------------------------- audit

def cmd_audit(args) -> int:
    from hostkit.audit.runner import audit, junit_xml

    results = audit(args.inventory, args.limit, profile=args.profile, force=args.force)
    if args.junit:
        Path(args.junit).write_text(junit_xml(results))
    if args.json:
        _emit_json({"hosts": results})
    else:
        rows = []
        for host, r in results.items():
            c = r.get("counts") or {}
            rows.append([host, r["status"].upper() if r["status"] not in ("pass",) else "pass",
                         str(c.get("pass", "")), str(c.get("drift", "")), str(c.get("pending_reboot", "")),
                         str(c.get("tolerated", "")), str(c.get("not_applicable", "")), (r.get("error") or "")[:70]])
        _console().print(_table(["host", "status", "pass", "drift", "pending reboot", "tolerated", "n/a", "error"],
                                rows, title="hostkit audit"))
        for host, r in results.items():
            for f in r.get("findings", []):
                if f["status"] in ("drift", "pending_reboot"):
                    print(f"{host}: {f['status'].upper()} {f['check']}: expected {f['expected']}, got {f['actual']} "
                          f"({f['source']})" + (f" - {f['note']}" if f.get("note") else ""))
    bad = any(r["status"] in ("drift", "unreachable", "failed", "refused") for r in results.values())
    pending = any(r["status"] == "pending_reboot" for r in results.values())
    if pending and not args.json:
        print("WARNING: reboot pending on some hosts (planned kernel arguments not booted yet)"
              + ("; --strict makes that a failure" if not args.strict else ""), file=sys.stderr)
    return EXIT_FAILED if bad or (pending and args.strict) else EXIT_OK


# ----------------------------------------------------------------------------- migrate

def cmd_migrate_report(args) -> int:
    from hostkit.smoke import migration

    pairs = migration.pair(migration.load_results(args.before), migration.load_results(args.after))
    md = migration.markdown(pairs, args.before, args.after)
    if args.md:
        Path(args.md).write_text(md)
    if args.plot:
        migration.plot(pairs, args.plot)
    if args.json:
        _emit_json({host: {"before": {"p999_ms": b["slo"]["p999_ms"], "passed": b["slo"]["passed"],
                                      "diagnosis": [d["cause"] for d in b["diagnosis"]]},
                           "after": {"p999_ms": a["slo"]["p999_ms"], "passed": a["slo"]["passed"],
                                     "diagnosis": [d["cause"] for d in a["diagnosis"]]}}
                    for host, b, a in pairs})
    elif not args.md:
        print(md)
    else:
        for host, b, a in pairs:
            print(f"{host}: before {migration.verdict(b)}; after {migration.verdict(a)}")
        print(f"wrote {args.md}" + (f" and {args.plot}" if args.plot else ""))
    return EXIT_OK if all(a["slo"]["passed"] for _, _, a in pairs) else EXIT_FAILED


# ----------------------------------------------------------------------------- lab

def cmd_lab(args) -> int:
    from hostkit.lab.lab import Lab

    lab = Lab(args.dir)
    if args.lab_cmd == "up":
        specs = []
        for item in args.host or []:
            name, sep, source = item.partition("=")
            if not sep or not name or not source:
                raise BadInput(f"--host expects NAME=SYSROOT_DIR (or NAME=FIXTURE), got {item!r}")
            specs.append((name, source))
        err = _console(stderr=True)
        hosts = lab.up(n_hosts=args.hosts, host_specs=specs, port=args.port,
                       progress=None if args.json else
                       (lambda h: err.print(f"started {h.name} on {h.address}:{h.port} ({h.source})")))
        if args.json:
            _emit_json({"dir": str(lab.dir), "inventory": str(lab.inventory),
                        "hosts": [h.__dict__ for h in hosts]})
        else:
            print(f"lab up: {len(hosts)} host(s); inventory {lab.inventory}")
            print(f"  ssh -F {lab.ssh_config} {hosts[0].name}")
            print(f"  hostkit facts -i {lab.inventory}")
        return EXIT_OK
    if args.lab_cmd == "down":
        stopped = lab.down()
        if args.json:
            _emit_json({"stopped": stopped})
        else:
            print(f"lab down: stopped {len(stopped)} sshd(s)" + (f": {', '.join(stopped)}" if stopped else ""))
        return EXIT_OK
    # status
    status = lab.status()
    if args.json:
        _emit_json({"dir": str(lab.dir), "hosts": status})
    elif not status:
        print(f"no lab in {lab.dir}")
    else:
        rows = [[h["name"], f"{h['address']}:{h['port']}", str(h["pid"]),
                 "up" if h["answering"] else ("running" if h["running"] else "DOWN"), h["source"], h["sysroot"]]
                for h in status]
        _console().print(_table(["host", "address", "pid", "state", "fixture", "sysroot"], rows))
    down = [h for h in status if not h["answering"]]
    return EXIT_FAILED if down else EXIT_OK


# ----------------------------------------------------------------------------- fixtures

def cmd_fixtures(args) -> int:
    from hostkit.lab import fixtures

    if args.fx_cmd == "list":
        names = fixtures.fixture_names()
        if args.json:
            _emit_json([{"name": n, "description": fixtures.describe(n)} for n in names])
        else:
            for n in names:
                print(f"{n:<22} {fixtures.describe(n)}")
        return EXIT_OK
    if args.fx_cmd == "make":
        dest = Path(args.dest)
        if dest.exists() and any(dest.iterdir()):
            raise BadInput(f"{dest} exists and is not empty")
        fixtures.materialize(args.name, dest)
        print(dest)
        return EXIT_OK
    # capture
    from hostkit.facts.capture import capture

    doc = capture(args.sysroot)
    Path(args.out).write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")
    print(f"captured {len(doc['files'])} files from {args.sysroot} into {args.out}")
    return EXIT_OK


# ----------------------------------------------------------------------------- parser

def _fleet_args(p: argparse.ArgumentParser, json_help: str = "print JSON on stdout") -> None:
    """-i/--limit/--json, the same on every command that works on an inventory."""
    p.add_argument("-i", "--inventory", required=True, metavar="INVENTORY")
    p.add_argument("--limit", metavar="PATTERN", help="only hosts matching this Ansible pattern")
    p.add_argument("--json", action="store_true", help=json_help)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="hostkit", description=(
        "Tune Linux hosts for latency-critical CPU inference, audit them, roll back, and prove the result."),
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version="hostkit 0.1.0")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    f = sub.add_parser("facts", help="discover a host's CPU/NUMA/IRQ/kernel state",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Read topology, virtualization, kernel, cpufreq, IRQ and NIC facts.\n"
                                   "Locally from a sysroot (default /), or from every inventory host over SSH.",
                       epilog="JSON fields: topology{sockets,cores_per_socket,threads_per_core,cpus,online,isolated,\n"
                              "numa_nodes,numa_per_socket,l3_groups}, virtualization{hypervisor,deceptive_topology,\n"
                              "reasons}, kernel{cmdline,sched_rt_runtime_us,...}, cpufreq, irqs, nics, steal.")
    src = f.add_mutually_exclusive_group()
    src.add_argument("--sysroot", default="/", metavar="DIR",
                     help="read /proc and /sys under DIR (a fixture tree or another root); default /")
    src.add_argument("-i", "--inventory", metavar="INVENTORY",
                     help="gather from every host of an Ansible inventory through ansible-runner")
    f.add_argument("--limit", metavar="PATTERN", help="with -i: only hosts matching this Ansible pattern")
    f.add_argument("--forks", type=int, default=None, help="with -i: parallel hosts (default: all of them)")
    f.add_argument("--json", action="store_true", help="print JSON on stdout instead of the summary")
    f.add_argument("-v", "--verbose", action="store_true", help="with --json -i: still print progress on stderr")
    f.set_defaults(func=cmd_facts)

    pl = sub.add_parser("plan", help="compute the tuning plan (CPU partition, cmdline, sysctls, ...)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="Facts + profile -> a concrete tuning plan, per host. Nothing is changed.\n"
                                    "Exit 3 when a guard refuses (isolation on a VM or deceptive topology,\n"
                                    "a node without housekeeping, nothing isolated); exit 2 on bad input.",
                        epilog="profiles: bare-metal-inference (default), vmware-guest, baseline, or a YAML path.\n"
                               "inventory vars: hostkit_profile chooses the profile, hostkit_overrides overrides\n"
                               "any profile key or pins isolated/housekeeping/irq_cpus, e.g.\n"
                               "  hostkit_overrides: {isolated: \"8-63\", reserve_per_node: 3}")
    psrc = pl.add_mutually_exclusive_group()
    psrc.add_argument("--sysroot", default="/", metavar="DIR", help="plan for the host under DIR (default /)")
    psrc.add_argument("-i", "--inventory", metavar="INVENTORY", help="plan for every inventory host (facts over SSH)")
    pl.add_argument("--limit", metavar="PATTERN")
    pl.add_argument("--profile", metavar="NAME|FILE", help="override the profile (default: hostkit_profile or "
                    "bare-metal-inference)")
    pl.add_argument("--force", action="store_true", help="allow isolation on a VM / deceptive topology")
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(func=cmd_plan)

    ap = sub.add_parser("apply", help="plan and apply the tuning through Ansible (journaled, check/diff)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="Facts -> plan per host -> playbooks/apply.yml through ansible-runner.\n"
                                    "Every change is journaled on the host first; --check changes nothing.\n"
                                    "A host refused by a guard is reported and not touched; the others proceed.",
                        epilog="roles (for --tags): bios_nps, isolcpus, irq_affinity, cpu_governor, rt_runtime,\n"
                               "numa_sysctl, containerd, kubelet. Run artifacts: .hostkit/runs/<run-id>/")
    _fleet_args(ap)
    ap.add_argument("--profile", metavar="NAME|FILE")
    ap.add_argument("--force", action="store_true", help="allow isolation on a VM / deceptive topology")
    ap.add_argument("--check", action="store_true", help="report what would change; change nothing")
    ap.add_argument("--diff", action="store_true", help="show file and value diffs")
    ap.add_argument("--tags", metavar="ROLES", help="comma-separated roles to run")
    ap.add_argument("--forks", type=int, default=None)
    ap.add_argument("--verify-smoke", action="store_true", help="smoke-test every changed host after the apply")
    ap.add_argument("--revert-on-fail", action="store_true",
                    help="with --verify-smoke: roll a host back automatically when it misses its SLO")
    ap.add_argument("--smoke-duration", type=float, default=10, metavar="S", help="seconds of smoke per host")
    ap.set_defaults(func=cmd_apply, sysroot="/")

    hi = sub.add_parser("history", help="list hostkit runs per host (from the hosts' journals)")
    _fleet_args(hi)
    hi.set_defaults(func=cmd_history)

    rb = sub.add_parser("rollback", help="restore exactly what hostkit changed, newest change first",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="From each host's journal, restore previous runtime values and file contents\n"
                                    "(mode and owner included; files hostkit created are removed). Default: the\n"
                                    "latest run; --all: every run back to the first. A second rollback changes\n"
                                    "nothing. The host is re-checked against the restored values afterwards.")
    _fleet_args(rb)
    rbw = rb.add_mutually_exclusive_group()
    rbw.add_argument("--run-id", metavar="ID", help="roll back this run (see hostkit history)")
    rbw.add_argument("--all", action="store_true", help="roll back every hostkit run, newest first")
    rb.add_argument("--check", action="store_true", help="report what would be restored; change nothing")
    rb.add_argument("--diff", action="store_true", help="show file diffs and value changes")
    rb.add_argument("--adopt", action="store_true",
                    help="host tuned by another tool: record its current tuning as a baseline run, then apply "
                         "the profile (--profile or hostkit_profile), so even that can be rolled back")
    rb.add_argument("--profile", metavar="NAME|FILE", help="with --adopt: the profile to apply")
    rb.add_argument("--force", action="store_true", help="with --adopt: allow isolation on a VM")
    rb.set_defaults(func=cmd_rollback, sysroot="/")

    sm = sub.add_parser("smoke", help="on-host SHM inference smoke test: p999 deschedule against a target",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="Rebuilds the seeds' shared-memory inference path on this host and measures\n"
                                    "deschedule = wall - thread CPU of every inference (time runnable but not\n"
                                    "running). Exit 1 when p999 misses --target-p999-ms or the run faulted.",
                        epilog="examples:\n"
                               "  hostkit smoke --duration 10                        shm transport, 2 ms model\n"
                               "  hostkit smoke --transport socket --requests 20000  TCP loopback + pickle\n"
                               "  hostkit smoke --inject-stall 20@0.5 --duration 5   calibration: stalls it must see\n"
                               "  hostkit smoke --with-cyclictest --plot cdf.png --prom /var/lib/node_exporter/hk.prom\n"
                               "credible p999 needs >= 10,000 samples (100,000 for a stable one)")
    sm.add_argument("-i", "--inventory", metavar="INVENTORY",
                    help="run on every inventory host through the smoke role (the host agent needs only python3)")
    sm.add_argument("--limit", metavar="PATTERN", help="with -i: only these hosts")
    sm.add_argument("--forks", type=int, default=None, help="with -i: hosts at a time (lab: 1)")
    sm.add_argument("--profile", metavar="NAME|FILE", help="take transport and target from a profile")
    sm.add_argument("--transport", choices=["shm", "socket"], default=None, help="default shm")
    sm.add_argument("--allocator", choices=["partition", "flock"], default="partition",
                    help="slot allocation: lock-free partition (default) or the seed's flock")
    sm.add_argument("--state-stride", type=int, choices=[4, 64], default=64,
                    help="bytes per slot state: 64 (own cache line, default) or 4 (packed, false sharing)")
    sm.add_argument("--slots", type=int, default=256)
    sm.add_argument("--infer-ms", type=float, default=2.0, help="synthetic model time (0: transport only)")
    sm.add_argument("--model", metavar="FILE.onnx", help="an ONNX model (needs onnxruntime)")
    run_len = sm.add_mutually_exclusive_group()
    run_len.add_argument("--requests", type=int, default=None, help="number of inferences (default 20000)")
    run_len.add_argument("--duration", type=float, default=None, metavar="S", help="run for S seconds")
    sm.add_argument("--clients", type=int, default=2)
    sm.add_argument("--client-batch", type=int, default=4, help="requests each client submits at once")
    sm.add_argument("--rate", type=float, default=None, help="open loop: requests/s (coordinated-omission correct)")
    sm.add_argument("--max-batch", type=int, default=16)
    sm.add_argument("--min-batch", type=int, default=8)
    sm.add_argument("--busy-poll", action="store_true", help="worker polls without the 0.5 ms idle sleep")
    sm.add_argument("--cpu", type=int, default=None, help="worker CPU (default: an isolated CPU, else the last)")
    sm.add_argument("--no-fifo", action="store_true", help="never use SCHED_FIFO")
    sm.add_argument("--request-timeout", type=float, default=2.0, metavar="S")
    sm.add_argument("--inject-stall", metavar="MS@EVERY_S", help="SIGSTOP the worker MS every EVERY_S seconds")
    sm.add_argument("--with-cyclictest", action="store_true", help="run cyclictest on the worker CPU alongside")
    sm.add_argument("--target-p999-ms", type=float, default=None, help="SLO (default 1.0 or the profile's)")
    sm.add_argument("--json", action="store_true")
    sm.add_argument("--plot", metavar="FILE.png")
    sm.add_argument("--prom", metavar="FILE", help="Prometheus textfile for node_exporter")
    sm.set_defaults(func=cmd_smoke)

    ul = sub.add_parser("unlock", help="clear the host-side lock left by a dead run",
                        description="Every apply takes <sysroot>/var/lib/hostkit/lock on each host; a second apply "
                                    "is refused naming the holder. A run that died keeps its lock: this clears it "
                                    "(any holder, or only --run-id's).")
    _fleet_args(ul)
    ul.add_argument("--run-id", metavar="ID", help="only release the lock when this run holds it")
    ul.set_defaults(func=cmd_unlock)

    au = sub.add_parser("audit", help="audit hosts with testinfra: drift, pending reboots, cross-layer consistency",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="Compares each host's live state with its plan (computed as apply does), over\n"
                                    "one testinfra SSH connection per host (host keys verified), hosts in parallel.\n"
                                    "Exit 1 on drift or an unreachable host; a pending reboot alone warns (exit 0)\n"
                                    "unless --strict.")
    _fleet_args(au)
    au.add_argument("--profile", metavar="NAME|FILE")
    au.add_argument("--force", action="store_true", help="plan isolation on VMs as apply --force did")
    au.add_argument("--junit", metavar="FILE", help="JUnit XML: one testcase per host x check")
    au.add_argument("--strict", action="store_true", help="a pending reboot is a failure")
    au.set_defaults(func=cmd_audit)

    mg = sub.add_parser("migrate", help="migration evidence: smoke results before and after, side by side")
    mgsub = mg.add_subparsers(dest="mg_cmd", required=True, parser_class=_Parser)
    mr = mgsub.add_parser("report", help="compare two `hostkit smoke --json` files (exit 1 if after misses the SLO)")
    mr.add_argument("before", metavar="BEFORE.json")
    mr.add_argument("after", metavar="AFTER.json")
    mr.add_argument("--md", metavar="FILE", help="write Markdown for a change ticket")
    mr.add_argument("--plot", metavar="FILE.png", help="overlay the two deschedule CDFs")
    mr.add_argument("--json", action="store_true")
    mr.set_defaults(func=cmd_migrate_report)

    lab = sub.add_parser("lab", help="start/stop real sshd lab hosts on loopback",
                         description="A lab of real sshd hosts on 127.0.0.2, 127.0.0.3, ... each with its own "
                                     "writable sysroot (a fixture copy), host keys in known_hosts (strict "
                                     "checking on) and an Ansible inventory DIR/inventory.yml.")
    lsub = lab.add_subparsers(dest="lab_cmd", required=True, parser_class=_Parser)
    up = lsub.add_parser("up", help="start the lab")
    up.add_argument("--hosts", type=int, default=None, metavar="N",
                    help="N hosts built from the fixtures round-robin (default: one per fixture)")
    up.add_argument("--host", action="append", metavar="NAME=SYSROOT_DIR",
                    help="a host with a copy of this sysroot directory (or fixture name); repeatable")
    up.add_argument("--port", type=int, default=2222, help="sshd port on every loopback address (default 2222)")
    for sp in (up, lsub.add_parser("down", help="stop exactly the sshd processes the lab started; remove it"),
               lsub.add_parser("status", help="show lab hosts and whether their sshd answers")):
        sp.add_argument("--dir", default=".hostkit/lab", help="lab directory (default .hostkit/lab)")
        sp.add_argument("--json", action="store_true", help="print JSON")
    lab.set_defaults(func=cmd_lab)

    fx = sub.add_parser("fixtures", help="sysroot fixtures standing in for other machines")
    fsub = fx.add_subparsers(dest="fx_cmd", required=True, parser_class=_Parser)
    fl = fsub.add_parser("list", help="list the fixtures")
    fl.add_argument("--json", action="store_true")
    fm = fsub.add_parser("make", help="write a fixture's sysroot tree to DEST")
    fm.add_argument("name")
    fm.add_argument("dest")
    fc = fsub.add_parser("capture", help="capture the files hostkit reads from a root into a fixture JSON")
    fc.add_argument("out")
    fc.add_argument("--sysroot", default="/")
    fx.set_defaults(func=cmd_fixtures)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except HostkitError as exc:
        print(f"hostkit: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("hostkit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
