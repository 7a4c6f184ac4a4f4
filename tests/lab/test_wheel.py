"""The wheel, installed as a user installs it: built from this tree, installed into a fresh venv in a
temporary directory, run from a directory outside the checkout with no HOSTKIT_PROJECT_DIR and no
checkout on sys.path. It must find its playbooks, roles and modules in the collection it carries
(hostkit/collection/ansible_collections/hostkit/tuning) and tune a lab host over SSH, then roll
it back to the byte.

Dependencies come from pip's cache or the package index pip is configured with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, lab_port
from tests.labutil import sysroot, trees

HOST = "w"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv, cwd, env): hostkit installed from its wheel, a working directory and an environment
    that know nothing of the checkout."""
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(dist)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = dist.glob("hostkit-*.whl")
    venv = base / "venv"
    base_python = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True, timeout=300)
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cwd = base / "work"
    cwd.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HOSTKIT_PROJECT_DIR", "HOSTKIT_STATE_DIR", "PYTHONPATH", "VIRTUAL_ENV", "ANSIBLE_CONFIG")
        and not k.startswith("PYTEST")
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return venv, cwd, env


def hostkit(installed, *args, timeout: int = 600) -> subprocess.CompletedProcess:
    venv, cwd, env = installed
    return subprocess.run(
        [str(venv / "bin" / "hostkit"), *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def hostkit_json(installed, *args):
    proc = hostkit(installed, *args, "--json")
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


def test_fixtures_list_finds_the_packaged_captures(installed):
    proc = hostkit(installed, "fixtures", "list")
    assert proc.returncode == 0, proc.stderr
    names = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert {"this-machine", "epyc-9634-nps1"} <= names  # a capture and a generated fixture


def test_facts_plan_check_apply_rollback_from_the_installed_wheel(installed, lab):
    pristine = trees(lab)[HOST]
    inv = lab.inventory

    rc, facts, proc = hostkit_json(installed, "facts", "-i", inv)
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
