"""The README's examples run as written: the first run on fixtures (no root-owned state) and the smoke
test on this machine. The lab's walk-through runs in tests/lab/test_readme.py; what no test can run
(the install from a wheel, make demo, make test) says so, and why, in its marker."""

from __future__ import annotations

import json

import pytest

from tests.readme_examples import KINDS, README, blocks, check, examples, parse_commands, run, shell_env
from tests.treehash import tree_hash


def test_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= 200, f"README.md has {lines} lines: at most 200, the rest belongs in docs/"


def test_every_block_says_which_test_runs_it():
    unmarked = [f"README.md:{b.line}" for b in blocks() if not b.marker]
    assert not unmarked, f"a fenced block without an <!-- example: ... --> marker: {unmarked}"
    for b in blocks():
        if b.marker not in KINDS:
            reason = b.marker.removeprefix("not run here:").strip()
            assert b.marker.startswith("not run here:") and len(reason) > 10, (
                f"README.md:{b.line}: the marker is one of {KINDS} or 'not run here: <why>', not {b.marker!r}"
            )
        else:
            assert b.lang in ("sh", "bash") and b.commands, (
                f"README.md:{b.line}: a {b.marker} block holds shell commands"
            )


def test_the_reader_of_the_examples():
    cmds = parse_commands(
        "hostkit plan --sysroot vm   # exit 3: refused\n"
        "# a comment line\n"
        "hostkit smoke --json > a.json   # exit 0: PASSED, exit 1: MISSED\n"
        "hostkit lab up \\\n    --hosts 1\n"
    )
    assert [(c.shell, c.exits) for c in cmds] == [
        ("hostkit plan --sysroot vm", (3,)),
        ("hostkit smoke --json > a.json", (0, 1)),
        ("hostkit lab up      --hosts 1", (0,)),
    ]


def test_first_run_examples_run_as_written_and_change_no_fixture(tmp_path):
    """The README's first run, command by command, with the exit codes it gives; `facts` and `plan`
    leave the fixture trees the examples made exactly as `fixtures make` wrote them."""
    env = shell_env(tmp_path)
    made: dict[str, dict[str, str]] = {}
    for cmd in examples("unit"):
        proc = run(cmd, tmp_path, env, timeout=300)
        check(cmd, proc)
        if ">" not in cmd.shell:
            assert proc.stdout.strip(), f"`{cmd.shell}` printed nothing"
        if cmd.words[:3] == ["hostkit", "fixtures", "make"]:
            dest = tmp_path / cmd.words[4]
            assert (dest / "proc" / "cpuinfo").is_file(), f"`{cmd.shell}` made no sysroot"
            made[cmd.words[4]] = tree_hash(dest)
    assert made, "the first run makes a fixture"
    for name, before in made.items():
        assert tree_hash(tmp_path / name) == before, f"a README example changed the fixture tree {name}"


@pytest.mark.measures
def test_smoke_examples_run_as_written(tmp_path):
    """The smoke test on this machine: PASSED or MISSED as the machine's load decides (the README says
    both), never INCONCLUSIVE or a failed run: the examples ask for a credible p99.9."""
    env = shell_env(tmp_path)
    for cmd in examples("measures"):
        proc = run(cmd, tmp_path, env, timeout=600)
        check(cmd, proc)
        if "--json" in cmd.words and ">" in cmd.words:
            report = json.loads((tmp_path / cmd.words[cmd.words.index(">") + 1]).read_text())
        else:
            assert "SLO p999" in proc.stdout, proc.stdout[-2000:]
            assert "INCONCLUSIVE" not in proc.stdout, proc.stdout[-2000:]
    assert report["samples"] >= 10_000 and report["slo"]["verdict"] in ("PASSED", "MISSED"), report["slo"]
