"""Shared fixtures: sysroot trees built from the fixture specs, and the SSH lab."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hostkit.lab import fixtures
from hostkit.lab.lab import Lab

REPO = Path(__file__).resolve().parent.parent
# Tests run their lab on their own port so a developer's `hostkit lab up` (2222) is left alone.
TEST_LAB_PORT = int(os.environ.get("HOSTKIT_TEST_LAB_PORT", "2322"))


@pytest.fixture(scope="session")
def sysroots(tmp_path_factory) -> dict[str, Path]:
    """Every fixture materialized once per session (read-only use!)."""
    base = tmp_path_factory.mktemp("sysroots")
    return {name: fixtures.materialize(name, base / name) for name in fixtures.fixture_names()}


@pytest.fixture
def sysroot_copy(sysroots, tmp_path):
    """A writable copy of one fixture: ``sysroot_copy("kvm-small")``."""

    def make(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(sysroots[name], dest, symlinks=True)
        return dest

    return make


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """One real sshd lab host per fixture on 127.0.0.2..., torn down at the end."""
    if not Path("/usr/sbin/sshd").exists():
        pytest.fail("openssh-server is not installed: `make setup` installs it")
    lab = Lab(tmp_path_factory.mktemp("lab") / "lab")
    lab.up(host_specs=[(f"h-{name}", name) for name in fixtures.fixture_names()], port=TEST_LAB_PORT)
    try:
        yield lab
    finally:
        lab.down()


@pytest.fixture(autouse=True)
def _state_dir(tmp_path, monkeypatch):
    """Runs and runtime artifacts of a test go to its own tmp dir, not the checkout."""
    monkeypatch.setenv("HOSTKIT_STATE_DIR", str(tmp_path / ".hostkit"))
    monkeypatch.setenv("HOSTKIT_PROJECT_DIR", str(REPO))


def excluding_hostkit_state(tree: dict[str, str]) -> dict[str, str]:
    """A tree hash without hostkit's own state (journal, would-run log): what 'no byte changed' compares."""
    return {k: v for k, v in tree.items() if not k.startswith("var/lib/hostkit")}


@pytest.fixture(scope="module")
def make_lab(tmp_path_factory):
    """Start a private lab for one test module: ``make_lab([(name, fixture), ...], port)``."""
    labs = []

    def start(specs, port):
        lab = Lab(tmp_path_factory.mktemp("modlab") / "lab")
        lab.up(host_specs=specs, port=port)
        labs.append(lab)
        return lab

    yield start
    for lab in labs:
        lab.down()
