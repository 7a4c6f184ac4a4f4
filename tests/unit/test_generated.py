"""`make generate` regenerates every file generated from the code: scripts/generated.py runs each
generator, none is left out, and a stale file fails its --check. That each generator's output equals
the committed files is checked by the generator's own test (named below), not run twice here."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"


@pytest.fixture
def generated(monkeypatch):
    spec = importlib.util.spec_from_file_location("generated", SCRIPTS / "generated.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generator_is_run_and_each_is_checked_by_a_test(generated):
    """A script with a --check mode writes files from the code: it is one of GENERATORS, and a unit
    test runs it against the committed files."""
    with_check = {p.name for p in SCRIPTS.glob("*.py") if "--check" in p.read_text()} - {"generated.py"}
    assert with_check == set(generated.GENERATORS)
    tests = {
        p.name: p.read_text() for p in (REPO / "tests" / "unit").glob("test_*.py") if p.name != "test_generated.py"
    }
    for script in generated.GENERATORS:
        assert [t for t, text in tests.items() if f"scripts/{script}" in text or f'"scripts" / "{script}"' in text], (
            script
        )


def test_make_generate_runs_them_all():
    proc = subprocess.run(["make", "-n", "generate"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"python\S* scripts/generated\.py\s*$", proc.stdout, re.M), proc.stdout


def test_a_stale_file_fails_the_check_and_is_rewritten_without_it(generated, tmp_path, monkeypatch):
    """sync(): --check names a stale or missing file and writes nothing; without it, only the stale
    files are written."""
    fresh, stale, missing = tmp_path / "fresh", tmp_path / "stale", tmp_path / "missing"
    fresh.write_text("a\n")
    stale.write_text("old\n")
    files = {fresh: "a\n", stale: "new\n", missing: "m\n"}
    monkeypatch.setattr(sys, "argv", ["x.py", "--check"])
    assert generated.sync(files, "things", "x.py") == 1
    assert stale.read_text() == "old\n" and not missing.exists()
    monkeypatch.setattr(sys, "argv", ["x.py"])
    before = fresh.stat().st_mtime_ns
    assert generated.sync(files, "things", "x.py") == 0
    assert (stale.read_text(), missing.read_text(), fresh.stat().st_mtime_ns) == ("new\n", "m\n", before)
    monkeypatch.setattr(sys, "argv", ["x.py", "--check"])
    assert generated.sync(files, "things", "x.py") == 0


def test_main_runs_every_generator_and_fails_when_one_does(generated, tmp_path, monkeypatch, capsys):
    ran = tmp_path / "ran"
    for name, rc in (("one.py", 0), ("two.py", 1), ("three.py", 0)):
        (tmp_path / name).write_text(
            f"import sys\nopen({str(ran)!r}, 'a').write({name!r} + ' ' + ' '.join(sys.argv[1:]) + '\\n')\n"
            f"raise SystemExit({rc} if '--check' in sys.argv else 0)\n"
        )
    monkeypatch.setattr(generated, "HERE", tmp_path)
    monkeypatch.setattr(generated, "GENERATORS", {"one.py": "", "two.py": "", "three.py": ""})
    assert generated.main([]) == 0
    assert generated.main(["--check"]) == 1
    assert ran.read_text().split("\n") == [
        "one.py ",
        "two.py ",
        "three.py ",
        "one.py --check",
        "two.py --check",
        "three.py --check",
        "",
    ]
    assert capsys.readouterr().err.strip() == "stale: two.py"
