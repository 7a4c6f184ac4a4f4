"""The CLI's shared output pieces without a host: the progress display, -v/--log as bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hostkit.ansible.apply import ROLES
from hostkit.cli import output


def test_progress_counts_roles_done_of_total_and_names_the_current_one():
    p = output.Progress(ROLES, total_roles=len(ROLES), live=False)
    with p:
        p("a", "bios_nps: check NPS", "ok")
        p("a", "isolcpus: write grub", "ok")
        p("a", "isolcpus: record", "ok")
        p("b", "bios_nps: check NPS", "failed")
        assert p.line("a").startswith(f"  a: 1/{len(ROLES)} roles, isolcpus (")
        assert p.line("b").startswith(f"  b: 0/{len(ROLES)} roles, FAILED (")


def test_progress_of_a_playbook_without_roles_counts_tasks():
    p = output.Progress(live=False)
    with p:
        p("h", "copy the agent", "ok")
        p("h", "run the agent", "ok")
        assert p.line("h").startswith("  h: 2 tasks, run the agent (")
    assert p.line("h", done=True).startswith("  h: 2 tasks, done (")


def test_quiet_progress_prints_nothing(capsys):
    with output.task_progress(quiet=True) as p:
        p("h", "task", "ok")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "args,message",
    [
        (["-vvvvv"], "goes up to -vvvv"),
        (["--log", "/nonexistent-dir/x.log"], "directory /nonexistent-dir does not exist"),
        (["--log", "/tmp"], "is a directory"),
    ],
    ids=["five-v", "log-dir-missing", "log-is-dir"],
)
def test_verbosity_and_log_bad_input_exit_2_before_any_host(tmp_path, args, message):
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    h1:\n      ansible_host: 192.0.2.1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "hostkit.cli", "apply", "-i", str(inv), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and proc.stderr.count("hostkit: error:") == 1
    assert not (tmp_path / ".hostkit" / "runs").exists() or not any((tmp_path / ".hostkit" / "runs").iterdir())
