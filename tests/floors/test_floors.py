"""The dependency floors in pyproject.toml are tested: hostkit and its test extra installed into a
fresh venv with every direct dependency pinned to its floor (``name>=X`` -> ``name==X``), then the
lint and unit suites run with that venv's Python. A floor nobody ran is not a floor.

Slow (one venv, installed from pip's cache or the configured index): marked ``floors`` and run by
``make test-floors`` (part of ``make test``), not by the fast suite.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
# What runs at the floors: the suites that exercise each dependency's API — ansible-lint over the
# roles (ansible-lint, ansible-core), the modules' cases through ansible-core's module runner
# (ansible-core), the planner (pyyaml, hypothesis), the metrics read back and plots (prometheus-client,
# matplotlib). The smoke test's real runs (standard library only) stay out: they add minutes to
# `make test` and depend on no pinned package. So do the collection's build and ansible-doc
# (tests/unit/test_collection.py, a minute of CPU) and the tunables' end-to-end runs: they call the
# same ansible-core entry points as the modules' cases, and the floors suite runs beside the lab and
# VM suites on a 2-core machine, where every minute of CPU is a minute of `make test`.
SUITE = [
    "tests/unit/test_ansible_lint.py",
    "tests/unit/test_modules.py",
    "tests/unit/test_plan.py",
    "tests/unit/test_smoke_metrics.py",
]


def floors() -> dict[str, str]:
    """name -> floor of every ``>=`` requirement of hostkit and of its plots, onnx-free test extra."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    out = {}
    for req in project["dependencies"] + extras["plots"] + extras["test"]:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9][0-9.]*)", req)
        if m:
            out[m.group(1).lower()] = m.group(2)
        else:
            assert req == "hostkit-tuning[plots]", f"{req}: a requirement without a tested floor"
    return out


def test_every_dependency_has_a_floor():
    got = floors()
    assert "ansible-core" in got and "matplotlib" in got and "ansible-lint" in got


def test_lint_and_unit_suites_pass_at_the_floors(tmp_path):
    pins = tmp_path / "floors.txt"
    pins.write_text("".join(f"{name}=={version}\n" for name, version in sorted(floors().items())))
    venv = tmp_path / "venv"
    base_python = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    proc = subprocess.run(
        # --no-compile: the suites compile what they import (the Makefile lets Python cache it), not
        # every installed file, ansible-core's and matplotlib's whole trees among them
        [str(python), "-m", "pip", "install", "-q", "--no-compile", "-c", str(pins), f"{REPO}[test]"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    frozen = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    installed = {canonicalize_name(n): Version(v) for n, v in re.findall(r"^([^=\s]+)==(\S+)$", frozen, re.M)}
    assert {n: installed.get(canonicalize_name(n)) for n in floors()} == {n: Version(v) for n, v in floors().items()}
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not lab and not vm and not live and not floors",
            "-k",
            "not sanity",
            *SUITE,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert proc.returncode == 0, proc.stdout[-5000:]
