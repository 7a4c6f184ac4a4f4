"""hostkit's own subprocesses get a closed stdin unless hostkit feeds them input.

A child that inherits the caller's stdin inherits its state too: a CI job or AWX task whose stdin
is non-blocking makes ``ansible-galaxy`` refuse to run ("Ansible requires blocking IO on
stdin/stdout/stderr"), and a child that reads stdin would take the caller's input. So every
``subprocess`` call in ``hostkit/`` names ``stdin=`` (``subprocess.DEVNULL``, or a pipe it writes)
or ``input=``; ``tests/unit/test_collection.py`` and ``tests/lab/test_wheel.py`` run
``hostkit collection install`` with stdin closed and non-blocking.

Ansible runs go through ansible-runner, whose default (pexpect) mode starts ansible-playbook on a
pseudo-terminal of its own: the child never sees the caller's stdin. Its ``subprocess`` mode passes
the caller's stdin on (``input_fd``, else inherited), so hostkit never selects it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SPAWNERS = {"run", "Popen", "call", "check_call", "check_output"}


def _subprocess_calls(tree: ast.AST) -> list[ast.Call]:
    """Calls of ``subprocess.<spawner>`` and of spawners imported by name (``from subprocess import run``)."""
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "subprocess"
        for alias in node.names
        if alias.name in SPAWNERS
    }
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (
            isinstance(f, ast.Attribute)
            and f.attr in SPAWNERS
            and isinstance(f.value, ast.Name)
            and f.value.id == "subprocess"
        ) or (isinstance(f, ast.Name) and f.id in imported):
            calls.append(node)
    return calls


def _runner_calls(tree: ast.AST) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "ansible_runner"
    ]


def _sources() -> list[Path]:
    return sorted((REPO / "hostkit").rglob("*.py"))


def _without_stdin(path: Path, root: Path = REPO) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    return [
        f"{path.relative_to(root)}:{call.lineno}: {ast.unparse(call.func)}(...) without stdin= or input="
        for call in _subprocess_calls(tree)
        if not {k.arg for k in call.keywords} & {"stdin", "input"}
    ]


def test_every_subprocess_hostkit_starts_names_its_stdin():
    found = [line for path in _sources() for line in _without_stdin(path)]
    assert not found, "\n".join(found)


def test_the_scan_sees_the_calls_it_must_see():
    """The scan finds hostkit's calls (a scan that finds nothing passes on anything)."""
    counted = sum(len(_subprocess_calls(ast.parse(p.read_text()))) for p in _sources())
    assert counted >= 20, counted
    assert _runner_calls(ast.parse((REPO / "hostkit" / "ansible" / "run.py").read_text()))


@pytest.mark.parametrize(
    "source, flagged",
    [
        ("import subprocess\nsubprocess.run(['true'], capture_output=True)\n", 1),
        ("import subprocess\nsubprocess.Popen(['true'], stdout=subprocess.PIPE)\n", 1),
        ("from subprocess import check_output as co\nco(['true'])\n", 1),
        ("import subprocess\nsubprocess.run(['true'], stdin=subprocess.DEVNULL)\n", 0),
        ("import subprocess\nsubprocess.run(['cat'], input=b'x')\n", 0),
        ("import subprocess\nsubprocess.PIPE\n", 0),
    ],
)
def test_the_scan_flags_a_call_without_stdin(tmp_path, source, flagged):
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    assert len(_without_stdin(probe, root=tmp_path)) == flagged


def test_ansible_runner_runs_in_its_pexpect_mode(tmp_path):
    """ansible-runner's pexpect mode gives ansible-playbook a pseudo-terminal as stdin; it is the mode
    of ``ansible_runner.run`` unless a caller asks for ``runner_mode="subprocess"``, and none does."""
    from ansible_runner.config.runner import RunnerConfig

    assert RunnerConfig(private_data_dir=str(tmp_path)).runner_mode == "pexpect"
    for path in _sources():
        for call in _runner_calls(ast.parse(path.read_text())):
            mode = next((k.value for k in call.keywords if k.arg == "runner_mode"), None)
            assert mode is None or (isinstance(mode, ast.Constant) and mode.value == "pexpect"), (
                f"{path.relative_to(REPO)}:{call.lineno}: runner_mode={ast.unparse(mode)}"
            )
