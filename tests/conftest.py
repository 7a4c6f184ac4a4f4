"""Shared fixtures: sysroot trees built from the fixture specs, and the SSH lab."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from hostkit.lab import fixtures
from hostkit.lab.lab import Lab
from hostkit.smoke.sched_trace import TRACEFS_ROOTS

REPO = Path(__file__).resolve().parent.parent
# Tests run their lab on their own port so a developer's `hostkit lab up` (2222) is left alone.
TEST_LAB_PORT = int(os.environ.get("HOSTKIT_TEST_LAB_PORT", "2322"))
# A run's labs use TEST_LAB_PORT .. TEST_LAB_PORT + LAB_PORTS - 1 (lab hosts share one port per lab
# on 127.0.0.2, .3, ...): two runs whose HOSTKIT_TEST_LAB_PORT differ by LAB_PORTS never collide.
LAB_PORTS = 16


def lab_port(offset: int) -> int:
    """The port of one of this run's labs: offset 0 is the session lab, each module lab has its own."""
    assert 0 <= offset < LAB_PORTS, offset
    return TEST_LAB_PORT + offset


# A test's tier is its directory: tests/unit (no lab host, no guest: seconds), tests/lab (real sshd
# hosts on loopback), tests/vm (real kernels in QEMU guests), tests/floors (every dependency at its
# floor). The marker of the tier is added here, never written in a test file, so `-m lab` selects
# exactly tests/lab/. `live` and `measures` (tests/unit only) stay marks of the test itself.
TIERS = {"unit": "unit", "lab": "lab", "vm": "vm", "floors": "floors"}


def tier_of(path: Path) -> str:
    rel = Path(path).resolve().relative_to(REPO / "tests")
    if len(rel.parts) < 2 or rel.parts[0] not in TIERS:
        raise pytest.UsageError(f"{path}: a test file lives in tests/<tier>/ (one of {', '.join(TIERS)})")
    return TIERS[rel.parts[0]]


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(getattr(pytest.mark, tier_of(item.path)))


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


SHM = Path("/dev/shm")
LAB_ROOT_PREFIX = "hostkit-test-labs-"


def _sweep_dead_lab_roots() -> None:
    """Remove lab roots in /dev/shm left by a test session that was killed (its pid is gone and no
    process still uses the root): tmpfs is memory, and nothing else would ever free it."""
    for root in SHM.glob(LAB_ROOT_PREFIX + "*"):
        pid = root.name[len(LAB_ROOT_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        in_use = False
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                in_use = str(root).encode() in cmdline.read_bytes()
            except OSError:
                continue
            if in_use:
                break
        if not in_use:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def lab_root(tmp_path_factory):
    """Where this session's labs live. On tmpfs when there is one: a lab host's sysroot is thousands
    of small files, written, hashed and removed several times faster there than on a disk (here an
    ext4 mounted with discard); else under pytest's tmp dir."""
    if SHM.is_dir() and os.access(SHM, os.W_OK):
        _sweep_dead_lab_roots()
        root = Path(tempfile.mkdtemp(prefix=f"{LAB_ROOT_PREFIX}{os.getpid()}-", dir=SHM))
        try:
            yield root
        finally:
            shutil.rmtree(root, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("labs")


def new_lab(lab_root: Path, name: str) -> Lab:
    """A Lab object in a fresh directory of this session's lab root (not started)."""
    return Lab(Path(tempfile.mkdtemp(prefix=f"{name}-", dir=lab_root)) / "lab")


@pytest.fixture(scope="session")
def lab(lab_root):
    """One real sshd lab host per fixture on 127.0.0.2..., torn down at the end."""
    if not Path("/usr/sbin/sshd").exists():
        pytest.fail("openssh-server is not installed: `make setup` installs it")
    lab = new_lab(lab_root, "session")
    lab.up(host_specs=[(f"h-{name}", name) for name in fixtures.fixture_names()], port=lab_port(0))
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
def make_lab(lab_root):
    """Start a private lab for one test module: ``make_lab([(name, fixture), ...], lab_port(N))``,
    N unique to the module; stopped when the module's tests are done."""
    labs = []

    def start(specs, port):
        lab = new_lab(lab_root, "module")
        lab.up(host_specs=specs, port=port)
        labs.append(lab)
        return lab

    yield start
    for lab in labs:
        lab.down()


@pytest.fixture
def tracefs():
    """tracefs mounted for the test (and unmounted afterwards if it was not)."""
    if os.geteuid() != 0:
        pytest.skip("tracing needs root")
    root = TRACEFS_ROOTS[0]
    mounted = os.path.isdir(os.path.join(root, "instances"))
    if not mounted:
        subprocess.run(["mount", "-t", "tracefs", "nodev", root], check=True)
    try:
        yield root
    finally:
        if not mounted:
            subprocess.run(["umount", root], check=True)


def pytest_terminal_summary(terminalreporter):
    """The real-kernel guests this session started and the kernels they booted (tests/vmutil.py)."""
    from tests.vmutil import GUEST_LOG, guest_summary

    if GUEST_LOG:
        terminalreporter.write_line(guest_summary(GUEST_LOG))
