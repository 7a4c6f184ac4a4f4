"""Every sysroot fixture agrees with util-linux: `lscpu --sysroot DIR -J` is the oracle."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from hostkit.core.cpulist import parse_cpulist
from hostkit.facts import gather
from hostkit.lab import fixtures

FIXTURES = fixtures.fixture_names()


def lscpu(sysroot: str | None) -> dict[str, str]:
    cmd = ["lscpu", "-J"] + (["--sysroot", str(sysroot)] if sysroot else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return {e["field"].rstrip(":"): e["data"] for e in json.loads(out)["lscpu"]}


def l3_instances(fields: dict[str, str]) -> int:
    m = re.search(r"\((\d+) instances?\)", fields["L3 cache"])
    assert m, fields["L3 cache"]
    return int(m.group(1))


def assert_agrees(facts: dict, oracle: dict[str, str]) -> None:
    t = facts["topology"]
    assert t["sockets"] == int(oracle["Socket(s)"])
    assert t["cores_per_socket"] == int(oracle["Core(s) per socket"])
    assert t["threads_per_core"] == int(oracle["Thread(s) per core"])
    assert t["cpus"] == int(oracle["CPU(s)"])
    assert len(t["numa_nodes"]) == int(oracle["NUMA node(s)"])
    assert len(t["l3_groups"]) == l3_instances(oracle)
    for node in t["numa_nodes"]:
        # lscpu writes two-CPU ranges as "0,1" where the kernel writes "0-1": compare sets.
        assert parse_cpulist(node["cpus"]) == parse_cpulist(oracle[f"NUMA node{node['id']} CPU(s)"])


def test_every_fixture_is_covered():
    assert {
        "epyc-9634-nps1",
        "epyc-9654-nps4-smt",
        "xeon-8480-snc2-ht",
        "vmware-88vcpu",
        "kvm-small",
        "this-machine",
    } <= set(FIXTURES)


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_agrees_with_lscpu(sysroots, name):
    assert_agrees(gather(str(sysroots[name])), lscpu(sysroots[name]))


@pytest.mark.live
def test_this_machine_agrees_with_lscpu():
    assert_agrees(gather("/"), lscpu(None))


def test_online_cpu_list_matches_lscpu(sysroots):
    for name, root in sysroots.items():
        oracle = lscpu(root)["On-line CPU(s) list"]
        assert parse_cpulist(gather(str(root))["topology"]["online"]) == parse_cpulist(oracle), name
