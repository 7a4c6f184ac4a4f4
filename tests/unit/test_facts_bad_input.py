"""Bad input to `hostkit facts`: one clear line naming the input, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hostkit.errors import FactsError
from hostkit.facts import gather


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "hostkit.cli", *args], capture_output=True, text=True)


def assert_clean_error(proc, *needles, code=2):
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("hostkit: error:")]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0]


def test_nonexistent_sysroot(tmp_path):
    assert_clean_error(run_cli("facts", "--sysroot", str(tmp_path / "nope")), "does not exist", "nope")


def test_sysroot_without_cpu_dir(tmp_path):
    assert_clean_error(run_cli("facts", "--sysroot", str(tmp_path)), "sys/devices/system/cpu")


def test_sysroot_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    assert_clean_error(run_cli("facts", "--sysroot", str(f)), "not a directory")


@pytest.mark.parametrize(
    "rel,text,needle",
    [
        ("sys/devices/system/cpu/online", "0-x\n", "'0-x'"),
        ("sys/devices/system/cpu/isolated", "3-1\n", "'3-1'"),
        ("sys/devices/system/node/node0/cpulist", "zz\n", "'zz'"),
        ("proc/sys/kernel/sched_rt_runtime_us", "lots\n", "'lots'"),
        ("sys/devices/system/cpu/cpu0/topology/physical_package_id", "1.5\n", "'1.5'"),
        ("proc/cmdline", "ro isolcpus=domain,a-b\n", "isolcpus="),
    ],
)
def test_malformed_file_names_file_and_text(sysroot_copy, rel, text, needle):
    root = sysroot_copy("kvm-small")
    (root / rel).write_text(text)
    with pytest.raises(FactsError) as exc:
        gather(str(root))
    assert rel in str(exc.value) and needle in str(exc.value)
    assert_clean_error(run_cli("facts", "--sysroot", str(root)), rel)


def test_unknown_option_is_exit_2():
    proc = run_cli("facts", "--frobnicate")
    assert proc.returncode == 2 and "unrecognized arguments" in proc.stderr


def test_facts_reads_nothing_it_should_not_change(sysroot_copy):
    """facts is read-only: the tree is byte-identical after a run."""
    from tests.treehash import tree_hash

    root = sysroot_copy("epyc-9634-nps1")
    before = tree_hash(root)
    assert run_cli("facts", "--sysroot", str(root), "--json").returncode == 0
    assert tree_hash(root) == before


def test_inventory_that_does_not_parse(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts: [unclosed\n")
    assert_clean_error(run_cli("facts", "-i", str(inv)), "not valid YAML", str(inv))


def test_inventory_missing(tmp_path):
    assert_clean_error(run_cli("facts", "-i", str(tmp_path / "none.yml")), "does not exist")


def test_inventory_limit_matching_nothing(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    a:\n      ansible_host: 127.0.0.9\n")
    assert_clean_error(run_cli("facts", "-i", str(inv), "--limit", "nomatch"), "matches no host")


def test_lab_host_spec_errors(tmp_path):
    assert_clean_error(run_cli("lab", "up", "--dir", str(tmp_path / "l"), "--host", "x"), "NAME=SYSROOT_DIR")
    assert_clean_error(
        run_cli("lab", "up", "--dir", str(tmp_path / "l"), "--host", "x=no-such-fixture"),
        "neither a directory nor a fixture",
    )
    assert_clean_error(run_cli("lab", "up", "--dir", str(tmp_path / "l"), "--hosts", "0"), "--hosts")
    assert not (tmp_path / "l").exists()
