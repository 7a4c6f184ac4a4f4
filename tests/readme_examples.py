"""The README's shell examples, read as the tests run them (tests/unit/test_readme.py and
tests/lab/test_readme.py).

Every fenced block of README.md is preceded by a marker saying which test runs it:

    <!-- example: unit -->        no root-owned state: run by the fast suite
    <!-- example: measures -->    times something on this machine: run alone, with the measuring tests
    <!-- example: lab -->         needs the sshd lab: run by one lab-tier test
    <!-- example: not run here: REASON -->

A command's expected exit code is 0, unless its comment names others: ``# exit 3: refused ...``, or
``# exit 0: PASSED, exit 1: MISSED`` (either).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
KINDS = ("unit", "measures", "lab")
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```\n", re.S | re.M)
MARKER = re.compile(r"<!--\s*example:\s*(.*?)\s*-->\s*$")
COMMENT = re.compile(r"(?:^|\s)#\s?(.*)$")
EXIT = re.compile(r"\bexit (\d)\b")


@dataclass
class Command:
    shell: str  # the command as bash runs it, comment removed
    exits: tuple[int, ...]  # the exit codes the README gives it
    comment: str = ""

    @property
    def words(self) -> list[str]:
        return self.shell.split()


@dataclass
class Block:
    marker: str  # "unit", "measures", "lab", or "not run here: REASON"
    lang: str
    text: str
    line: int  # where the block starts in README.md
    commands: list[Command] = field(default_factory=list)


def parse_commands(text: str) -> list[Command]:
    """One Command per line of a shell block (backslash continuations joined); comment lines skipped."""
    commands: list[Command] = []
    for line in text.replace("\\\n", " ").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = COMMENT.search(line)
        comment = m.group(1) if m else ""
        shell = line[: m.start()].strip() if m else line.strip()
        exits = tuple(sorted({int(c) for c in EXIT.findall(comment)})) or (0,)
        commands.append(Command(shell, exits, comment))
    return commands


def blocks(text: str | None = None) -> list[Block]:
    """Every fenced block of the README with the marker on the line before it ("" when there is none)."""
    text = README.read_text() if text is None else text
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").splitlines()
        marker = MARKER.match(before[-1].strip()) if before else None
        block = Block(marker.group(1) if marker else "", m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
        if block.marker in KINDS:
            block.commands = parse_commands(block.text)
        out.append(block)
    return out


def examples(kind: str) -> list[Command]:
    assert kind in KINDS, kind
    found = [c for b in blocks() if b.marker == kind for c in b.commands]
    assert found, f"README.md has no <!-- example: {kind} --> block"
    return found


def shell_env(cwd: Path) -> dict[str, str]:
    """The environment the examples run in: this interpreter's ``hostkit`` first on PATH, hostkit's
    state (runs, agent builds) under the working directory, as for a user who starts there."""
    bindir = Path(sys.executable).parent
    if not (bindir / "hostkit").exists():  # an interpreter without the console script: the same entry point
        bindir = cwd / ".bin"
        bindir.mkdir(exist_ok=True)
        wrapper = bindir / "hostkit"
        wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m hostkit.cli "$@"\n')
        wrapper.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env["HOSTKIT_STATE_DIR"] = str(cwd / ".hostkit")
    env.pop("COLUMNS", None)
    return env


def run(cmd: Command, cwd: Path, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess:
    assert shutil.which("bash"), "bash runs the README's examples"
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", cmd.shell],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def check(cmd: Command, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode in cmd.exits, (
        f"README example `{cmd.shell}` exited {proc.returncode}, the README says {' or '.join(map(str, cmd.exits))}\n"
        f"stdout: {proc.stdout[-1500:]}\nstderr: {proc.stderr[-2500:]}"
    )
