"""Every example in a command's --help runs. The examples of each help page run in order, in a fresh
directory (an example may use what the one before it made: ``hostkit fixtures make NAME DIR``, then
``--sysroot DIR``), with HOME there too, so nothing outside it is touched. An example that needs an
inventory of real hosts, a lab or a guest cannot run here: COVERED names the test that runs it.
And no --help says "seed": the help speaks of the incident and the original inference actor."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _helps() -> dict[str, str]:
    spec = importlib.util.spec_from_file_location("contracts", REPO / "scripts" / "contracts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.helps())


HELPS = _helps()


def examples(text: str) -> list[str]:
    """The command lines under "examples:": one per line indented by two spaces (a description
    follows after two spaces or more; "; " separates two commands); a deeper indent continues a
    description, a blank line ends the list."""
    out, inside = [], False
    for line in text.splitlines():
        if line.strip() == "examples:":
            inside = True
        elif inside and not line.startswith("  "):
            inside = False
        elif inside and line[2] != " ":
            out += [c.strip() for c in re.split(r"\s{2,}", line.strip())[0].split("; ")]
    return out


# Examples that need what this machine's fast suite has not: a pattern, the test that runs the
# same command, and what it needs.
COVERED = [
    (
        r"^hostkit lab up .*--vm",
        "tests/vm/test_numa2.py::test_facts_match_the_qemu_topology",
        "a QEMU guest, started by the Lab.up the command calls",
    ),
    (r"^hostkit lab (up|down|status)\b", "tests/lab/test_lab.py::test_lab_cli_up_status_down", "sshd lab hosts"),
    (r"^hostkit facts -i ", "tests/lab/test_lab.py::test_cli_facts_inventory_json", "lab hosts"),
    (
        r"^hostkit drift -i .*--inject-stall",
        "tests/unit/test_drift_latency_live.py::test_injected_stalls_are_a_tail_that_moved_with_the_state_unchanged",
        "a baseline of the same host first",
    ),
    (
        r"^hostkit drift -i .*--timer",
        "tests/vm/test_tuned.py::test_the_drift_timer_judges_the_tuned_host_under_systemd_and_node_exporter_reads_it",
        "a host running systemd: a QEMU guest",
    ),
    (
        r"^hostkit (baseline|drift) -i ",
        "tests/lab/test_drift.py::test_a_real_upgrade_undoing_a_sysctl_is_drift_named_with_the_upgrade_beside_it",
        "lab hosts",
    ),
    (
        r"^hostkit bios ",
        "tests/unit/test_bmc.py::test_apply_is_pending_until_the_cycle_then_in_effect_and_rollback_restores_it",
        "a BMC: the lab's Redfish emulator",
    ),
    (
        r"^hostkit gaps -i ",
        "tests/vm/test_gaps.py::test_confined_qemu_co_stops_the_guest_far_more_than_spread",
        "a guest",
    ),
    (
        r"^hostkit rollout (-i |--resume |--abort )",
        "tests/lab/test_rollout.py::test_a_rollout_killed_mid_apply_resumes_each_host_applied_once_in_order_then_aborts",
        "lab hosts, and a rollout to resume or abort",
    ),
]


def covered_by(example: str) -> str | None:
    return next((test for pattern, test, _ in COVERED if re.search(pattern, example)), None)


def runnable(page: str) -> list[str]:
    return [e for e in examples(HELPS[page]) if not covered_by(e)]


# Pages whose examples measure this machine (make test runs those alone): an SLO missed or a short
# run's INCONCLUSIVE is exit 1, a result, not a broken example.
MEASURING = {"hostkit smoke", "hostkit gaps"}
PAGES = [
    pytest.param(page, marks=[pytest.mark.measures] if page in MEASURING else []) for page in HELPS if runnable(page)
]


def test_examples_are_found_and_each_is_run_or_covered():
    found = {page: examples(text) for page, text in HELPS.items()}
    assert sum(map(len, found.values())) >= 20, found
    assert {"hostkit", "hostkit plan", "hostkit smoke", "hostkit gaps", "hostkit collection"} <= {
        p for p, e in found.items() if runnable(p)
    }
    for page, lines in found.items():
        for example in lines:
            assert example.split()[0] in ("hostkit", "ansible-doc"), f"{page}: not a command: {example!r}"
            test = covered_by(example)
            if test:
                path, _, name = test.partition("::")
                tree = ast.parse((REPO / path).read_text())
                assert name in {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}, test


@pytest.mark.parametrize("page", PAGES)
def test_every_help_example_runs(page, tmp_path):
    env = dict(os.environ, HOME=str(tmp_path), COLUMNS="120")
    env.pop("HOSTKIT_STATE_DIR", None)
    bin_dir = Path(sys.executable).parent
    env["PATH"] = f"{bin_dir}:{env.get('PATH', '')}"
    for example in runnable(page):
        argv = shlex.split(example)
        argv = (
            [sys.executable, "-m", "hostkit.cli", *argv[1:]]
            if argv[0] == "hostkit"
            else [str(bin_dir / argv[0]), *argv[1:]]
        )
        proc = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
        )
        allowed = (0, 1) if page in MEASURING else (0,)
        assert proc.returncode in allowed, f"{page}: `{example}` exit {proc.returncode}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.stdout.strip(), f"{page}: `{example}` printed nothing"


def test_no_help_says_seed():
    said = {
        page: line.strip()
        for page, text in HELPS.items()
        for line in text.splitlines()
        if re.search(r"\bseed", line, re.I)
    }
    assert not said, said
