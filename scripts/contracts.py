#!/usr/bin/env python3
"""Write docs/contracts.md: what other tools may rely on, generated from the code itself.

    .venv/bin/python scripts/contracts.py          # rewrite docs/contracts.md
    .venv/bin/python scripts/contracts.py --check  # exit 1 when it is stale (tests run this)

Generated: the exit codes (hostkit/errors.py), the shape of the facts and plan documents (every
fixture, every shipped profile), the JSON envelopes of the fleet commands (hostkit/api.py's result
objects) and every command's --help. Written by hand in this file: the smoke document's keys.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DOC = ROOT / "docs" / "contracts.md"
WIDTH = "100"  # argparse wraps --help to $COLUMNS

# Dicts keyed by data, shown as one entry (besides any dict keyed by numbers: "<n>").
MAPS = {
    "kernel.cmdline_args.args": "<argument>",
    "cpufreq.drivers": "<driver>",
    "cpufreq.governors": "<governor>",
    "steal.per_cpu": "<cpu>",
    "sysctl": "<sysctl>",
    "cmdline_set": "<argument>",
    "nic_irq_cpus": "<nic>",
    "pools": "<node>",
    "irq.assignments": "<irq>",
    "irq.by_name": "<action name>",
}

SMOKE_KEYS = """\
{"samples": int, "deschedule_ms": {"p50", "p99", "p999", "max", ...}, "queue_wait_ms": {...},
 "rpc_ms": {...}, "sched_fifo": {"used": bool, "policy": "budget"|"always"|"off",
 "limit_ms_per_period": float|null, "held_batches": int, ...}, "fifo_duty": float, "cpu": int, "transport": str,
 "slo": {"target_p999_ms": float, "p999_ms": float, "passed": bool, ...}, "diagnosis": [{"cause": str, ...}], ...}"""


# ----------------------------------------------------------------------------- shapes


def _type(v) -> str:
    return (
        "null" if v is None else {bool: "bool", int: "int", float: "float", str: "str"}.get(type(v), type(v).__name__)
    )


def shape_of(value, path: str = ""):
    """A value's shape: dicts keep their keys (or one ``<name>`` entry for MAPS), lists one element."""
    if isinstance(value, dict):
        if path in MAPS or (value and all(k.isdigit() for k in value)):
            inner = None
            for v in value.values():
                inner = merge(inner, shape_of(v, path + ".*"))
            return {"__map__": MAPS.get(path, "<n>"), "__of__": inner}
        return {"__keys__": {k: shape_of(v, f"{path}.{k}".lstrip(".")) for k, v in value.items()}, "__seen__": 1}
    if isinstance(value, list):
        inner = None
        for v in value:
            inner = merge(inner, shape_of(v, path + "[]"))
        return {"__list__": inner}
    return {"__types__": {_type(value)}}


def merge(a, b):
    """Two shapes of the same place, merged; a key missing in some documents becomes optional."""
    if a is None or b is None:
        return b if a is None else a
    out: dict = {}
    for k in set(a) | set(b):
        if k == "__types__":
            out[k] = a.get(k, set()) | b.get(k, set())
        elif k == "__seen__":
            out[k] = a.get(k, 0) + b.get(k, 0)
        elif k == "__keys__":
            ka, kb = a.get(k, {}), b.get(k, {})
            out[k] = {n: merge(ka.get(n), kb.get(n)) for n in list(ka) + [n for n in kb if n not in ka]}
            for n in out[k]:
                out[k][n] = dict(
                    out[k][n],
                    __opt__=(n not in ka)
                    or (n not in kb)
                    or ka[n].get("__opt__", False)
                    or kb[n].get("__opt__", False),
                )
        elif k in ("__list__", "__of__"):
            out[k] = merge(a.get(k), b.get(k))
        elif k == "__opt__":
            out[k] = a.get(k, False) or b.get(k, False)
        else:
            out[k] = a.get(k, b.get(k))
    return out


def render(s, indent: int = 0) -> str:
    pad = "  " * indent
    if s is None:
        return "[]"
    parts = []
    if "__types__" in s:
        parts.append("|".join(sorted(s["__types__"], key=lambda t: (t == "null", t))))
    if "__list__" in s:
        parts.append("[" + render(s["__list__"], indent) + "]" if s["__list__"] else "[]")
    if "__map__" in s:
        parts.append("{" + f'"{s["__map__"]}": ' + render(s["__of__"], indent + 1) + "}")
    if s.get("__keys__") or ("__keys__" in s and "__map__" not in s):
        lines = [
            f'{pad}  "{k}"{"?" if v.get("__opt__") else ""}: {render(v, indent + 1)}' for k, v in s["__keys__"].items()
        ]
        parts.append("{\n" + ",\n".join(lines) + "\n" + pad + "}")
    return "|".join(parts) or "null"


def facts_and_plans(sysroots: dict[str, Path]) -> tuple[dict, dict]:
    from hostkit.errors import BadInput
    from hostkit.facts import gather
    from hostkit.plan import make_plan
    from hostkit.profiles import load_profile, shipped

    facts_shape = plan_shape = None
    for name in sorted(sysroots):
        facts = gather(str(sysroots[name]))
        facts_shape = merge(facts_shape, shape_of(facts))
        for profile in shipped():
            for force in (False, True):
                try:
                    plan = make_plan(facts, load_profile(profile), force=force, host=name)
                except BadInput:  # a fixture this profile cannot plan for (said so, exit 2)
                    continue
                plan_shape = merge(plan_shape, shape_of(plan))
    return facts_shape, plan_shape


# ----------------------------------------------------------------------------- exit codes, envelopes, --help


def exit_codes() -> list[tuple[str, int, str]]:
    """(name, value, meaning) of every ``EXIT_*`` in hostkit/errors.py, meaning from its comment."""
    path = ROOT / "hostkit" / "errors.py"
    lines = path.read_text().splitlines()
    out = []
    for node in ast.parse("\n".join(lines)).body:
        if isinstance(node, ast.Assign) and node.targets[0].id.startswith("EXIT_"):
            comment = lines[node.lineno - 1].partition("#")[2].strip()
            out.append((node.targets[0].id, node.value.value, comment or "ok"))
    return out


def exceptions() -> list[tuple[str, int, str]]:
    from hostkit import errors

    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.HostkitError)]
    return [
        (c.__name__, c.exit_code, (c.__doc__ or "").strip().splitlines()[0])
        for c in sorted(classes, key=lambda c: (c.exit_code, c.__name__))
    ]


def envelopes() -> list[tuple[str, dict]]:
    """The JSON documents of the fleet commands, from hostkit.api's result objects (sample values)."""
    from hostkit import api
    from hostkit.ansible.agent_call import AgentReply
    from hostkit.ansible.apply import HostApply
    from hostkit.ansible.run import RunResult

    run = RunResult("<run-id>", "successful", 0, {}, {}, ".hostkit/runs/<run-id>", 0.0)
    ok = AgentReply("h", "ok", doc={"...": "the agent's document"})
    bad = AgentReply("h2", "failed", error="str", exit_code=2)
    applied = api.ApplyResult(
        "<run-id>", False, {"h": HostApply("h", "changed")}, run, {"h": api.SmokeVerdict(False, "str", "str")}
    )
    adopted = api.AdoptResult(
        {"h": api.HostAdopt("<run-id>", ["/etc/default/grub"], "changed", "<run-id>", False)}, {"h": ok}, applied
    )
    return [
        ("hostkit facts -i INVENTORY --json", api.FactsResult({"h": ok, "h2": bad}, run).to_dict()),
        (
            "hostkit plan -i INVENTORY --json",
            api.fleet_document(
                "<run-id>", {"h": {"...": "the plan document"}, "h2": {"status": "str", "error": "str"}}
            ),
        ),
        ("hostkit apply -i INVENTORY --json", applied.to_dict()),
        ("hostkit rollback -i INVENTORY --json", api.RollbackResult(False, {"h": ok, "h2": bad}, run).to_dict()),
        ("hostkit rollback -i INVENTORY --adopt --json", adopted.to_dict()),
        ("hostkit history -i INVENTORY --json", api.HistoryResult({"h": ok, "h2": bad}, run).to_dict()),
        ("hostkit smoke -i INVENTORY --json", api.SmokeResult({"h": ok, "h2": bad}, run, 1, {}).to_dict()),
        (
            "hostkit unlock -i INVENTORY --json",
            api.UnlockResult({"h": True, "h2": False}, {"h2": "str"}, "<run-id>").to_dict(),
        ),
        (
            "hostkit audit -i INVENTORY --json",
            api.AuditResult(
                {
                    "h": {
                        "status": "pass|drift|pending_reboot|unreachable|failed|refused",
                        "counts": {"pass": 0, "...": 0},
                        "findings": [
                            {
                                "check": "str",
                                "status": "str",
                                "expected": "...",
                                "actual": "...",
                                "source": "str",
                                "note?": "str",
                            }
                        ],
                    }
                },
                False,
            ).to_dict(),
        ),
    ]


def helps() -> list[tuple[str, str]]:
    """Every command's --help, wrapped at WIDTH columns whatever the terminal."""
    import argparse

    from hostkit.cli.main import build_parser

    def walk(parser: argparse.ArgumentParser, name: str):
        yield name, parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    yield from walk(sub, f"{name} {sub_name}")

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return list(walk(build_parser(), "hostkit"))
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


# ----------------------------------------------------------------------------- the document


def document(sysroots: dict[str, Path]) -> str:
    import json

    facts_shape, plan_shape = facts_and_plans(sysroots)
    out = [
        "<!-- Generated by scripts/contracts.py from the code; edit that, then run it. -->",
        "# Contracts",
        "",
        "What scripts, CI jobs and other tools may rely on. `key?` is a key some documents lack; "
        '`a|b` are the types a value takes; CPU sets are kernel cpulist strings (`"0-3,8-11"`).',
        "",
        "## Exit codes",
        "",
        "| code | name | meaning |",
        "|---|---|---|",
    ]
    out += [f"| {v} | `{n}` | {m} |" for n, v, m in exit_codes()]
    out += [
        "",
        "Errors hostkit raises on purpose, and the exit code each gives:",
        "",
        "| exception | exit code | meaning |",
        "|---|---|---|",
    ]
    out += [f"| `{n}` | {c} | {m} |" for n, c, m in exceptions()]
    out += [
        "",
        "A failed play or check is a status in a result (exit 1), never an exception. Interrupted: 130.",
        "",
        "## `hostkit facts --json`",
        "",
        f"The shape of the facts document over every fixture ({', '.join(sorted(sysroots))}):",
        "",
        "```",
        render(facts_shape),
        "```",
        "",
        "## `hostkit plan --json`",
        "",
        "The shape of the plan document over every fixture and shipped profile:",
        "",
        "```",
        render(plan_shape),
        "```",
        "",
        "## `hostkit smoke --json`",
        "",
        "At least:",
        "",
        "```",
        SMOKE_KEYS,
        "```",
        "",
        "## Fleet commands (`-i INVENTORY --json`)",
        "",
        'Every one is the same envelope, `{"run_id": str|null, "hosts": {NAME: ...}, ...}` '
        "(`hostkit.api.fleet_document`): the Ansible run the command made (null for the audit, which "
        "runs testinfra over SSH), one entry per host, then what the command adds. Changed from the "
        'earlier shapes: `plan -i` and `history -i` were `{NAME: ...}`, `unlock -i` was `{"released", "failed"}`, '
        "and `audit`, `rollback` and `rollback --adopt` had no `run_id`.",
        "",
        'A host that gave no document is `{"status": "unreachable"|"failed", "error": str}` '
        '(`"exit_code": 2` when its input, e.g. its sysroot, was bad).',
        "",
    ]
    for title, doc in envelopes():
        out += [f"`{title}`:", "", "```json", json.dumps(doc, indent=1), "```", ""]
    out += ["## Command line", ""]
    for name, text in helps():
        out += [f"### `{name}`", "", "```", text.rstrip(), "```", ""]
    return "\n".join(out).rstrip() + "\n"


def materialized(dest: Path) -> dict[str, Path]:
    from hostkit.lab import fixtures

    return {n: fixtures.materialize(n, dest / n) for n in fixtures.fixture_names()}


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        text = document(materialized(Path(tmp)))
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC.relative_to(ROOT)} is stale: run scripts/contracts.py")
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
