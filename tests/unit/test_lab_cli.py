"""`hostkit fixtures` and `hostkit lab` as a user runs them: the real CLI in a subprocess, each
command an operation of hostkit.api (a request in, a result with .rc and .to_dict() out); bad input
is one line, exit 2, nothing written. Starting lab hosts is the lab suite's (tests/lab/test_lab.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hostkit import api
from hostkit.errors import EXIT_FAILED, EXIT_OK
from tests.unit.test_agent import REPO, module_imports
from tests.unit.test_facts_bad_input import assert_clean_error


def hostkit(*args):
    return subprocess.run(
        [sys.executable, "-m", "hostkit.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_the_commands_reach_hostkit_through_the_api_only():
    """What `hostkit lab` and `hostkit fixtures` import of hostkit, inside functions too: the api,
    the CLI's own modules (output, argument parsing) and the errors; never hostkit.lab or
    hostkit.facts directly."""
    edges = module_imports(REPO / "hostkit")
    for command in ("lab", "fixtures"):
        imported = edges[f"hostkit.cli.{command}"]
        beyond = {
            m for m in imported if m not in ("hostkit.api", "hostkit.errors") and not m.startswith("hostkit.cli.")
        }
        assert not beyond, (command, beyond)
        assert "hostkit.api" in imported, command


def test_fixtures_list_in_text_and_json():
    listed = hostkit("fixtures", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert doc == api.fixture_list().to_dict()
    names = [f["name"] for f in doc["fixtures"]]
    assert {"epyc-9634-nps1", "vmware-88vcpu", "this-machine"} <= set(names) and len(names) == len(set(names))
    assert all(f["description"] for f in doc["fixtures"])
    text = hostkit("fixtures", "list")
    assert text.returncode == 0, text.stderr
    assert [line.split()[0] for line in text.stdout.splitlines()] == names


def test_fixtures_make_writes_a_sysroot_that_facts_and_lscpu_read(tmp_path):
    dest = tmp_path / "vm"
    made = hostkit("fixtures", "make", "vmware-88vcpu", dest)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == str(dest)
    facts = hostkit("facts", "--sysroot", dest, "--json")
    assert facts.returncode == 0, facts.stderr
    topo = json.loads(facts.stdout)["topology"]
    assert (topo["sockets"], topo["cpus"], len(topo["numa_nodes"])) == (88, 88, 1)  # the VMware guest's deception
    lscpu = subprocess.run(["lscpu", "--sysroot", str(dest)], capture_output=True, text=True)  # an oracle of its own
    said = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in lscpu.stdout.splitlines())}
    assert (said["Socket(s)"], said["NUMA node(s)"]) == ("88", "1"), lscpu.stdout


def test_fixtures_make_into_an_empty_directory(tmp_path):
    dest = tmp_path / "empty"
    dest.mkdir()
    made = hostkit("fixtures", "make", "epyc-9634-nps1", dest)
    assert made.returncode == 0, made.stderr
    assert (dest / "sys/devices/system/cpu/online").is_file()


@pytest.mark.parametrize(
    "name, dest, needle",
    [
        ("epyc-9634-nps1", "full", "is not empty"),
        ("epyc-9634-nps1", "file", "is not a directory"),
        ("epyc-9634-nps1", "missing/dest", "is not a directory: nowhere to write dest"),
        ("no-such-fixture", "new", "unknown fixture 'no-such-fixture'"),
    ],
)
def test_fixtures_make_bad_input_writes_nothing(tmp_path, name, dest, needle):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_text("mine\n")
    (tmp_path / "file").write_text("mine\n")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert_clean_error(hostkit("fixtures", "make", name, tmp_path / dest), needle)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert (tmp_path / "full" / "keep").read_text() == "mine\n"


def test_fixtures_capture_of_a_made_fixture(tmp_path):
    root = tmp_path / "root"
    assert hostkit("fixtures", "make", "epyc-9634-nps1", root).returncode == 0
    out = tmp_path / "cap.json"
    cap = hostkit("fixtures", "capture", out, "--sysroot", root)
    assert cap.returncode == 0, cap.stderr
    doc = json.loads(out.read_text())
    assert cap.stdout.strip() == f"captured {len(doc['files'])} files from {root} into {out}"
    online = (root / "sys/devices/system/cpu/online").read_text(errors="replace")
    assert doc["files"]["sys/devices/system/cpu/online"] == online


@pytest.mark.parametrize("out, needle", [(".", "is a directory"), ("missing/cap.json", "nowhere to write cap.json")])
def test_fixtures_capture_bad_input(tmp_path, out, needle):
    assert_clean_error(hostkit("fixtures", "capture", tmp_path / out, "--sysroot", "/"), needle)
    assert list(tmp_path.iterdir()) == []


def test_lab_status_and_down_without_a_lab(tmp_path):
    d = tmp_path / "lab"
    status = hostkit("lab", "status", "--dir", d)
    assert (status.returncode, status.stdout.strip()) == (0, f"no lab in {d}")
    status = hostkit("lab", "status", "--dir", d, "--json")
    assert (status.returncode, json.loads(status.stdout)) == (0, {"dir": str(d), "hosts": []})
    down = hostkit("lab", "down", "--dir", d, "--json")
    assert (down.returncode, json.loads(down.stdout)) == (0, {"stopped": []})
    assert not d.exists()


def test_lab_status_fails_while_a_host_does_not_answer():
    host = {"name": "h1", "answering": True, "running": True}
    assert api.LabStatusResult("/lab", [host]).rc == EXIT_OK
    down = api.LabStatusResult("/lab", [host, {"name": "h2", "answering": False, "running": True}])
    assert (down.rc, down.status, down.down) == (EXIT_FAILED, "failed", ["h2"])
    assert api.LabStatusResult("/lab", []).rc == EXIT_OK


def test_lab_up_help_lists_the_presets_and_setups():
    helped = hostkit("lab", "up", "--help")
    assert helped.returncode == 0, helped.stderr
    for name, spec in api.lab_vm_presets().items():
        assert f"  {name:12s} {spec}" in helped.stdout
    for name, about in api.lab_vm_setups().items():
        assert f"  {name}: {about}" in helped.stdout
