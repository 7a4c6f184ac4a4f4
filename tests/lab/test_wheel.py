"""The release, installed as a user installs it: `make dist`'s build (scripts/dist.py) of this tree
into a directory outside the checkout (the sdist, the wheel built from it, the collection tarball,
SHA256SUMS), the wheel installed with pipx (its home, its venvs and its bin/ in a temporary
directory), and hostkit run from a directory outside the checkout with no HOSTKIT_PROJECT_DIR, no
checkout on sys.path and only pipx's bin/ added to PATH. It must find its playbooks, roles and
modules in the collection it carries (hostkit/collection/ansible_collections/hostkit/tuning),
install that collection for plain Ansible with its stdin closed or non-blocking (as CI jobs and AWX
tasks call it), and tune a lab host over SSH, then roll it back to the byte. The execution
environment's build context takes the same wheel, and pip resolves hostkit-tuning to it.

Dependencies come from pip's cache or the package index pip is configured with.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hostkit import __version__ as VERSION
from tests.conftest import REPO, lab_port
from tests.labutil import sysroot, trees

HOST = "w"
BIN = Path(sys.executable).parent  # the test run's venv: pipx, ansible-builder, pip


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """The release files, built as `make dist` builds them, into a directory outside the checkout."""
    out = tmp_path_factory.mktemp("release") / "dist"
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "dist.py"), str(out)],
        cwd=out.parent,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return out


def _wheel(released: Path) -> Path:
    (wheel,) = released.glob("hostkit_tuning-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(released, tmp_path_factory):
    """(venv, cwd, env): the wheel installed by pipx, a working directory and an environment that know
    nothing of the checkout (PATH: pipx's bin/, which holds `hostkit` alone, then the system's)."""
    base = tmp_path_factory.mktemp("pipx")
    bindir = base / "bin"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HOSTKIT_PROJECT_DIR", "HOSTKIT_STATE_DIR", "PYTHONPATH", "VIRTUAL_ENV", "ANSIBLE_CONFIG")
        and not k.startswith(("PYTEST", "PIPX_"))
    }
    system_path = [d for d in env.get("PATH", "/usr/bin:/bin").split(os.pathsep) if d and str(REPO) not in d]
    env["PATH"] = os.pathsep.join([str(bindir), *system_path])
    pipx_env = dict(env, PIPX_HOME=str(base / "home"), PIPX_BIN_DIR=str(bindir), PIPX_MAN_DIR=str(base / "man"))
    base_python = getattr(sys, "_base_executable", None) or sys.executable
    proc = subprocess.run(
        [str(BIN / "pipx"), "install", "--python", base_python, str(_wheel(released))],
        env=pipx_env,
        cwd=base,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    listed = subprocess.run(
        [str(BIN / "pipx"), "list", "--short"], env=pipx_env, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    assert listed.stdout.split() == ["hostkit-tuning", VERSION], listed.stdout + listed.stderr
    assert sorted(p.name for p in bindir.iterdir()) == ["hostkit"]  # pipx exposes the command alone
    venv = base / "home" / "venvs" / "hostkit-tuning"
    cwd = base / "work"
    cwd.mkdir()
    return venv, cwd, env


def hostkit(installed, *args, timeout: int = 600, stdin=subprocess.DEVNULL, **kw) -> subprocess.CompletedProcess:
    """``hostkit ARGS`` as the user's shell finds it (pipx's bin/ on PATH)."""
    _, cwd, env = installed
    return subprocess.run(
        ["hostkit", *map(str, args)],
        cwd=cwd,
        env=env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def hostkit_json(installed, *args, **kw):
    proc = hostkit(installed, *args, "--json", **kw)
    try:
        return proc.returncode, json.loads(proc.stdout), proc
    except json.JSONDecodeError:
        raise AssertionError(
            f"no JSON from hostkit {' '.join(map(str, args))}: rc={proc.returncode}\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        ) from None


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([(HOST, "epyc-9634-nps1")], lab_port(13))


def test_the_installed_package_runs_from_its_collection_not_the_checkout(installed):
    venv, cwd, env = installed
    code = (
        "import sys, hostkit, hostkit.paths as p; lay = p.layout(); "
        "print(hostkit.__file__); print(lay.kind); print(lay.root); print(lay.collections); "
        "print(any(x.rstrip('/') == sys.argv[1] for x in sys.path))"
    )
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code, str(REPO)], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    package, kind, root, collections, checkout_on_path = proc.stdout.split("\n")[:5]
    site = str(venv / "lib")
    assert package.startswith(site) and kind == "collection" and checkout_on_path == "False"
    assert root == f"{collections}/ansible_collections/hostkit/tuning" and root.startswith(site)
    assert sorted(p.name for p in (Path(root) / "plugins" / "modules").glob("*.py")) == sorted(
        p.name for p in (REPO / "library").glob("*.py")
    )


def test_the_release_files_their_checksums_and_the_wheels_name(released):
    """`make dist`: the sdist, the wheel (built from the sdist), the collection tarball, SHA256SUMS
    that `sha256sum -c` accepts; the wheel is the distribution hostkit-tuning at hostkit's version."""
    assert sorted(p.name for p in released.iterdir()) == sorted(
        [
            f"hostkit_tuning-{VERSION}.tar.gz",
            f"hostkit_tuning-{VERSION}-py3-none-any.whl",
            f"hostkit-tuning-{VERSION}.tar.gz",
            "SHA256SUMS",
        ]
    )
    check = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=released, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    assert check.returncode == 0 and check.stdout.count(": OK") == 3, check.stdout + check.stderr
    with zipfile.ZipFile(_wheel(released)) as whl:
        meta = whl.read(f"hostkit_tuning-{VERSION}.dist-info/METADATA").decode()
    assert f"\nName: hostkit-tuning\nVersion: {VERSION}\n" in meta


def _nonblocking_stdin():
    read, write = os.pipe()
    os.set_blocking(read, False)
    return read, write


def test_collection_install_with_stdin_closed_or_non_blocking_then_ansible_doc_lists_every_module(installed, tmp_path):
    """`hostkit --version`; `hostkit collection install -p DIR` from the pipx install, with stdin
    closed and with stdin non-blocking (ansible-galaxy refuses a non-blocking stdin of its own);
    then `ansible-doc -l hostkit.tuning` lists every module of library/ from DIR."""
    venv, cwd, env = installed
    version = hostkit(installed, "--version")
    assert (version.returncode, version.stdout) == (0, f"hostkit {VERSION}\n"), version.stderr

    # Both at once (the lab suite's critical path): one with fd 0 closed, one with a non-blocking pipe.
    read, write = _nonblocking_stdin()
    modes = {"closed": {"preexec_fn": lambda: os.close(0)}, "nonblocking": {"stdin": read}}
    probe = "import os\ntry:\n    print(os.get_blocking(0))\nexcept OSError:\n    print('closed')"
    try:
        seen = {
            how: subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, **kw).stdout
            for how, kw in modes.items()
        }
        assert seen == {"closed": "closed\n", "nonblocking": "False\n"}, seen  # the child's stdin is as said
        running = {
            how: subprocess.Popen(
                ["hostkit", "collection", "install", "-p", str(tmp_path / how), "--json"],
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                **kw,
            )
            for how, kw in modes.items()
        }
        outputs = {how: (proc.communicate(timeout=600), proc.returncode) for how, proc in running.items()}
    finally:
        os.close(read)
        os.close(write)
    for how, ((stdout, stderr), rc) in outputs.items():
        assert rc == 0, f"stdin {how}: {stderr}"
        doc = json.loads(stdout)
        assert (doc["collection"], doc["version"]) == ("hostkit.tuning", VERSION), (how, doc)

    listed = subprocess.run(
        [str(venv / "bin" / "ansible-doc"), "-l", "hostkit.tuning"],
        env={**env, "ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "closed"), "ANSIBLE_NOCOLOR": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert sorted(line.split()[0] for line in listed.stdout.splitlines()) == sorted(
        f"hostkit.tuning.{p.stem}" for p in (REPO / "library").glob("*.py")
    ), listed.stdout + listed.stderr
    manifests = [
        json.loads((tmp_path / how / "ansible_collections/hostkit/tuning/MANIFEST.json").read_text())
        for how in ("closed", "nonblocking")
    ]
    assert manifests[0] == manifests[1]  # the same collection, whatever the caller's stdin


def test_the_execution_environments_context_takes_the_released_wheel(released, tmp_path):
    """`ansible-builder create` on the repository's execution environment beside the released dist/:
    the context holds that wheel, and pip, with the find-links the Containerfile sets, resolves
    ee/requirements.txt's hostkit-tuning to it (the index has no such wheel of this version)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("execution-environment.yml", "requirements.yml"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "ee", src / "ee")
    shutil.copytree(released, src / "dist")
    ctx = tmp_path / "ctx"
    proc = subprocess.run(
        [str(BIN / "ansible-builder"), "create", "-f", "execution-environment.yml", "--context", str(ctx)],
        cwd=src,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = ctx / "_build" / "wheels"
    assert [p.name for p in wheels.iterdir()] == [_wheel(released).name]
    assert (wheels / _wheel(released).name).read_bytes() == _wheel(released).read_bytes()
    resolved = subprocess.run(
        [str(BIN / "python"), "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed", "--no-deps"]
        + ["--report", "-", "--find-links", str(wheels), "-r", str(ctx / "_build" / "requirements.txt")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    (chosen,) = json.loads(resolved.stdout)["install"]
    assert (chosen["metadata"]["name"], chosen["metadata"]["version"]) == ("hostkit-tuning", VERSION)
    assert chosen["download_info"]["url"] == (wheels / _wheel(released).name).as_uri()


def test_fixtures_list_finds_the_packaged_captures(installed):
    proc = hostkit(installed, "fixtures", "list")
    assert proc.returncode == 0, proc.stderr
    names = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert {"this-machine", "epyc-9634-nps1"} <= names  # a capture and a generated fixture


def test_facts_plan_check_apply_rollback_from_the_installed_wheel(installed, lab):
    pristine = trees(lab)[HOST]
    inv = lab.inventory

    # ansible-runner's run of ansible-playbook with the caller's stdin non-blocking (its own pty)
    read, write = _nonblocking_stdin()
    try:
        rc, facts, proc = hostkit_json(installed, "facts", "-i", inv, stdin=read)
    finally:
        os.close(read)
        os.close(write)
    assert rc == 0, proc.stderr[-3000:]
    assert facts["hosts"][HOST]["status"] == "ok"
    assert facts["hosts"][HOST]["facts"]["topology"]["cpus"] == 168  # the fixture: 2 x EPYC 9634 (84 cores, no SMT)

    rc, plans, proc = hostkit_json(installed, "plan", "-i", inv)
    assert rc == 0, proc.stderr[-3000:]
    assert plans["hosts"][HOST]["isolated"] and not plans["hosts"][HOST]["refused"], plans["hosts"][HOST]

    rc, check, proc = hostkit_json(installed, "apply", "-i", inv, "--check")
    assert rc == 0, proc.stderr[-3000:]
    assert check["check"] is True and check["hosts"][HOST]["status"] == "changed"
    assert trees(lab)[HOST] == pristine  # check mode changes nothing

    rc, applied, proc = hostkit_json(installed, "apply", "-i", inv)
    assert rc == 0, proc.stderr[-3000:]
    assert applied["hosts"][HOST]["status"] == "changed", applied["hosts"][HOST]
    grub_dropin = sysroot(lab, HOST) / "etc/default/grub.d/hostkit.cfg"
    assert "isolcpus=" in grub_dropin.read_text()  # written by hostkit_bootargs from the collection

    rc, rolled, proc = hostkit_json(installed, "rollback", "-i", inv)
    assert rc == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert rolled["hosts"][HOST]["verify"]["ok"], rolled["hosts"][HOST]
    assert trees(lab)[HOST] == pristine  # to the byte


def test_lab_up_facts_and_down_from_the_installed_wheel(installed):
    venv, cwd, env = installed
    labdir = cwd / "lab"
    proc = hostkit(
        installed,
        "lab",
        "up",
        "--host",
        "w1=epyc-9634-nps1",
        "--host",
        "w2=this-machine",
        "--port",
        lab_port(14),
        "--dir",
        labdir,
    )
    try:
        assert proc.returncode == 0, proc.stderr[-3000:]
        rc, facts, proc = hostkit_json(installed, "facts", "-i", labdir / "inventory.yml")
        assert rc == 0, proc.stderr[-3000:]
        assert {h: r["status"] for h, r in facts["hosts"].items()} == {"w1": "ok", "w2": "ok"}
    finally:
        down = hostkit(installed, "lab", "down", "--dir", labdir)
    assert down.returncode == 0 and "stopped 2 host(s)" in down.stdout, down.stdout + down.stderr
