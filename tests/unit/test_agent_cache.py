"""The agent zipapp as hosts keep it (hostkit/ansible/agent_zipapp.py): bytecode shipped beside the
sources, reused builds, and the host-side cache script run for real with sh (a non-root user's
cache under a temporary HOME; `id` answers a non-zero uid through PATH)."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hostkit.ansible import agent_zipapp

SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="module")
def pyz(tmp_path_factory) -> Path:
    return agent_zipapp.build(tmp_path_factory.mktemp("agent"))


def test_every_shipped_source_has_the_controllers_bytecode_beside_it(pyz):
    with zipfile.ZipFile(pyz) as zf:
        names = set(zf.namelist())
        sources = {n for n in names if n.endswith(".py") and n != "__main__.py"}
        assert sources == {f"hostkit/{rel}" for rel in agent_zipapp.shipped()}
        for src in sources:
            assert src + "c" in names
            head = zf.read(src + "c")[:8]
            assert head[:4] == importlib.util.MAGIC_NUMBER
            assert int.from_bytes(head[4:8], "little") == 0b01  # hash-based, unchecked


def test_an_unchanged_package_names_the_same_artifact(pyz):
    assert agent_zipapp.build(pyz.parent) == pyz
    (pyz.parent / next(p.name for p in pyz.parent.glob(".sources-*"))).unlink()  # the fast path gone
    assert agent_zipapp.build(pyz.parent) == pyz  # same sources, same content: the file is reused
    assert pyz.name == f"hostkit-agent-{agent_zipapp.sha256(pyz)[:16]}.pyz"  # named by its content


# A process that has interned strings the agent's sources hold as constants ("[" and "]" in
# hostkit/core/values.py), and hashes strings with another seed: marshal wrote such constants
# differently when the agent was compiled in the building process.
BUSY = "import sys; [sys.intern(c) for c in '[](){}<>,.:;=+-*/ _']; "


@pytest.mark.parametrize(
    "prelude, env",
    [
        ("", {"PYTHONHASHSEED": "0"}),
        (BUSY, {"PYTHONHASHSEED": "1"}),
        (BUSY, {"PYTHONHASHSEED": "random"}),
        ("", {"PYTHONOPTIMIZE": "2"}),
    ],
    ids=["plain", "interned", "interned-random-seed", "optimized"],
)
def test_the_same_sources_build_the_same_bytes_in_any_process(pyz, tmp_path, prelude, env):
    """One version of hostkit ships one file: hosts share one cache (one file name, one content), and
    a file of the same name with other bytes would be swapped under an agent running from it."""
    code = prelude + "from hostkit.ansible import agent_zipapp; print(agent_zipapp.build(sys.argv[1]))"
    env = {**os.environ, **env}
    out = subprocess.run(
        [sys.executable, "-c", "import sys; " + code, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(out).name == pyz.name and Path(out).read_bytes() == pyz.read_bytes()


@pytest.fixture
def user_env(tmp_path) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n")
    (bin_dir / "id").chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    return dict(os.environ, HOME=str(home), PATH=f"{bin_dir}:{os.environ['PATH']}")


def _run(pyz: Path, env: dict, *args: str, upload: bool = False) -> subprocess.CompletedProcess:
    script = agent_zipapp.locate_script(pyz, upload=upload) + 'p=$1; shift; exec "$p" "$f" "$@"'
    return subprocess.run(
        ["sh", "-c", script, "hostkit-agent", SYSTEM_PYTHON, *args],
        env=env,
        input=pyz.read_bytes() if upload else None,
        capture_output=True,
    )


@pytest.mark.skipif(not os.path.exists(SYSTEM_PYTHON), reason="needs the system python3")
def test_a_host_without_the_agent_gets_it_once_then_runs_the_cached_copy(pyz, user_env):
    miss = _run(pyz, user_env, "--help")
    cached = Path(user_env["HOME"]) / ".cache/hostkit/agent" / pyz.name
    assert miss.returncode == agent_zipapp.CACHE_MISS
    assert miss.stdout.decode().strip() == str(cached)
    assert stat.S_IMODE(cached.parent.stat().st_mode) == 0o700 and not cached.exists()
    stored = _run(pyz, user_env, "--help", upload=True)
    assert stored.returncode == 0 and b"facts" in stored.stdout, stored.stderr
    assert cached.read_bytes() == pyz.read_bytes() and stat.S_IMODE(cached.stat().st_mode) == 0o600
    hit = _run(pyz, user_env, "--help")
    assert hit.returncode == 0 and hit.stdout == stored.stdout


@pytest.mark.skipif(not os.path.exists(SYSTEM_PYTHON), reason="needs the system python3")
def test_a_cached_copy_that_changed_is_never_run(pyz, user_env):
    assert _run(pyz, user_env, "--help", upload=True).returncode == 0
    cached = Path(user_env["HOME"]) / ".cache/hostkit/agent" / pyz.name
    cached.write_bytes(cached.read_bytes() + b"tampered")
    assert _run(pyz, user_env, "--help").returncode == agent_zipapp.CACHE_MISS
    assert _run(pyz, user_env, "--help", upload=True).returncode == 0  # stored again, verified
    assert cached.read_bytes() == pyz.read_bytes()
