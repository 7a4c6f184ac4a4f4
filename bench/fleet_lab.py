"""Shared by the fleet benchmarks (apply_fleet.py, audit_fleet.py): one fresh lab of identical
hosts per fleet size, the machine's busy CPU time and load, the Ansible runs a command made
(playbook, span, slowest tasks), and the N-host/1-host ratio against a target."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hostkit.lab.lab import Lab


def machine_cpu_seconds() -> float:
    """Busy CPU time of the whole machine: the lab's sshd and remote Python run here too."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    """The 1-minute load average: other work on this machine skews every figure."""
    return open("/proc/loadavg").read().split()[0]


@contextlib.contextmanager
def fleets(sizes: list[int], fixture: str, port: int, prefix: str) -> Iterator[tuple[dict[int, Lab], dict]]:
    """({n: lab}, env): one lab of n hosts built from ``fixture`` per size, all up at once (size i
    on port ``port + i``) so that runs of the sizes can alternate under the same load; torn down
    at the end. env points hostkit's state directory into a temporary directory."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, HOSTKIT_STATE_DIR=str(Path(tmp) / "state"))
        labs: dict[int, Lab] = {}
        try:
            for i, n in enumerate(sizes):
                labs[n] = Lab(Path(tmp) / f"lab{n}")
                labs[n].up(host_specs=[(f"{prefix}{n}-{k}", fixture) for k in range(1, n + 1)], port=port + i)
            yield labs, env
        finally:
            for lab in labs.values():
                lab.down()


def hostkit(env: dict, *args: str) -> tuple[float, int, dict | None]:
    """Run ``hostkit ARGS --json`` as a user does: (wall seconds, exit code, the JSON document)."""
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "hostkit.cli", *args, "--json"], capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - t
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        doc = None
        print(f"hostkit {' '.join(args)}: exit {proc.returncode}, no JSON: {proc.stderr.strip()[-300:]}")
    return wall, proc.returncode, doc


def median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def ansible_runs(env: dict, since: set[str] | None = None) -> list[dict]:
    """The Ansible runs in the state directory of ``env`` not in ``since``: playbook, span of its
    events in seconds, task count and the three slowest tasks (seconds from start to last host)."""
    runs = Path(env["HOSTKIT_STATE_DIR"]) / "runs"
    out = []
    for run in sorted(runs.glob("*")) if runs.is_dir() else []:
        if since is not None and run.name in since:
            continue
        events = sorted(
            (json.loads(p.read_text()) for p in (run / "artifacts/run/job_events").glob("*.json")),
            key=lambda e: e["counter"],
        )
        if not events:
            continue
        stamp = [datetime.fromisoformat(e["created"]).timestamp() for e in events]
        tasks: dict[str, list] = {}
        for e, t in zip(events, stamp):
            d = e.get("event_data", {})
            if e["event"] == "playbook_on_task_start":
                tasks[d["task_uuid"]] = [d.get("task", ""), t, t]
            elif d.get("task_uuid") in tasks and e["event"].startswith("runner_on_"):
                tasks[d["task_uuid"]][2] = max(tasks[d["task_uuid"]][2], t)
        cmd = json.loads((run / "artifacts/run/command").read_text())["command"]
        slow = sorted(tasks.values(), key=lambda x: x[1] - x[2])[:3]
        out.append(
            {
                "run": run.name,
                "playbook": cmd[-1],
                "span": stamp[-1] - stamp[0],
                "tasks": len(tasks),
                "slowest": [(name, end - start) for name, start, end in slow],
            }
        )
    return out


# Task actions that run on the controller, never on a host: not a module call on the host.
CONTROLLER_ACTIONS = {
    "ansible.builtin.debug",
    "ansible.builtin.assert",
    "ansible.builtin.set_fact",
    "ansible.builtin.fail",
    "ansible.builtin.validate_argument_spec",
    "ansible.builtin.meta",
    "ansible.builtin.include_role",
    "ansible.builtin.import_role",
    "ansible.builtin.include_tasks",
    "debug",
    "assert",
    "set_fact",
    "fail",
    "validate_argument_spec",
    "meta",
    "hostkit.tuning.plan",
}  # the plan: hostkit's planner on the controller


def module_calls(env: dict, since: set[str] | None = None) -> dict[str, int]:
    """Per host, the module calls the Ansible runs not in ``since`` executed on it: each task (each
    loop item) that ran there, not skipped, controller-side actions (debug, assert, ...) left out.
    A loop is told by its item events (a module's own ``results``, as hostkit_changes returns one
    per change, is one call)."""
    runs = Path(env["HOSTKIT_STATE_DIR"]) / "runs"
    calls: dict[str, int] = {}
    for run in sorted(runs.glob("*")) if runs.is_dir() else []:
        if since is not None and run.name in since:
            continue
        events = [json.loads(p.read_text()) for p in (run / "artifacts/run/job_events").glob("*.json")]
        looped = {
            (e["event_data"].get("host"), e["event_data"].get("task_uuid"))
            for e in events
            if e["event"].startswith("runner_item_on_")
        }
        for e in events:
            d = e.get("event_data", {})
            if d.get("task_action") in CONTROLLER_ACTIONS or not d.get("host"):
                continue
            if e["event"] in ("runner_item_on_ok", "runner_item_on_failed") or (
                e["event"] in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable")
                and (d["host"], d.get("task_uuid")) not in looped
            ):
                calls[d["host"]] = calls.get(d["host"], 0) + 1
    return calls


def round_trip(inventory: str, host: str, runs: int = 5) -> float:
    """Median wall time of one Ansible module round trip to ``host`` (``ansible HOST -m ping`` with the
    lab's inventory: Ansible's start, the SSH connection, the module on the host)."""
    ansible = str(Path(sys.executable).parent / "ansible")
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(
            [ansible, "-i", inventory, host, "-m", "ansible.builtin.ping"],
            check=True,
            capture_output=True,
            env=dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="True"),
        )
        times.append(time.perf_counter() - t)
    return median(times)


def run_names(env: dict) -> set[str]:
    runs = Path(env["HOSTKIT_STATE_DIR"]) / "runs"
    return {p.name for p in runs.glob("*")} if runs.is_dir() else set()


def print_ratio(results: dict[int, float], target: float) -> None:
    """The largest fleet's time over one host's, against the target."""
    if 1 in results and max(results) > 1:
        big = max(results)
        ratio = results[big] / results[1]
        print(
            f"ratio {big}-host/1-host: {ratio:.2f}  (target <= {target:.2f}: {'met' if ratio <= target else 'MISSED'})"
        )
