"""The irq_affinity role on a lab host: it installs the boot-time IRQ unit, its program and its
rules; the program finds IRQs by name after a renumbering; rollback removes them byte-exact.
(The program itself: tests/unit/test_irq_boot.py.)"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from hostkit.core.cpulist import format_cpulist, parse_cpulist
from tests.conftest import lab_port
from tests.labutil import cli_json, sysroot, trees
from tests.unit.test_irq_boot import (
    BOOT_DEFAULT,
    INSTALLED,
    PROGRAM,
    PYTHON,
    RULES,
    UNIT,
    affinity_by_irq,
    names_by_irq,
    next_boot,
    run_program,
)

# ----------------------------------------------------------------------------- the role, on a lab host


@pytest.fixture(scope="module")
def lab(make_lab):
    # irqbalance installed (its /etc/default/irqbalance is in the fixture) but not running (no irqbalance
    # process in the sysroot's proc): hostkit owns the IRQs, and only the boot-time unit keeps its pins
    # across a reboot. The ban still goes into irqbalance's file, for the day it is started.
    return make_lab([("bm", "epyc-9634-nps1")], lab_port(11))


def test_role_installs_the_unit_and_its_program_finds_irqs_by_name_after_renumbering(lab, tmp_path):
    root = sysroot(lab, "bm")
    before = trees(lab)["bm"]
    rc, doc, proc = cli_json("apply", "-i", lab.inventory, "--limit", "bm", "--tags", "irq_affinity")
    assert rc == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rc, plans, _ = cli_json("plan", "-i", lab.inventory, "--limit", "bm")
    plan = plans["hosts"]["bm"]
    assert plan["irq"]["owner"] == "hostkit" and plan["irq"]["irqbalance_config"] == "/etc/default/irqbalance"
    banned = re.findall(r"^IRQBALANCE_BANNED_CPULIST=(.*)$", (root / "etc/default/irqbalance").read_text(), re.M)
    assert banned == [plan["irq"]["banned_cpulist"]] and banned != [""], banned
    # Apply found the IRQs by name in this boot: each NIC queue on its NIC's node's IRQ CPUs.
    names = names_by_irq(root)
    nic_queues = {i: n for i, n in names.items() if re.fullmatch(r"ens1f[01]np[01]-TxRx-\d+", n)}
    assert nic_queues
    got = affinity_by_irq(root)
    for irq, name in nic_queues.items():
        assert got[irq] == plan["nic_irq_cpus"][name.split("-")[0]], (irq, name)

    unit = (root / UNIT).read_text()
    assert re.findall(r"^ExecStart=(.*)$", unit, re.M) == [f"{PYTHON} /{INSTALLED} /{RULES}"]
    assert (root / INSTALLED).read_bytes() == PROGRAM.read_bytes()
    rules = json.loads((root / RULES).read_text())
    assert rules == {"by_name": plan["irq"]["by_name"], "default_smp_affinity": plan["irq"]["default_smp_affinity"]}
    saved = tmp_path / "saved"
    saved.mkdir()
    for rel in (INSTALLED, RULES):
        shutil.copy(root / rel, saved / Path(rel).name)

    rc, rb, proc = cli_json("rollback", "-i", lab.inventory, "--limit", "bm")
    assert rc == 0, proc.stdout[-2000:]
    assert trees(lab)["bm"] == before  # unit, program, rules and the directories made for them gone
    assert not (root / "etc/hostkit").exists() and not (root / "usr/local/lib/hostkit").exists()

    # The next boot numbers the IRQs differently; the unit's program, as the role installed it,
    # finds each one by name.
    moved = next_boot(root)
    assert all(moved[i] != i for i in nic_queues)
    proc = run_program(saved / "irq-affinity.json", root, saved / "irq_affinity.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names, got = names_by_irq(root), affinity_by_irq(root)
    managed = {int(m.parent.name) for m in root.glob("proc/irq/*/.managed")}
    assert managed
    for irq, name in names.items():
        if irq in managed:
            assert got[irq] == BOOT_DEFAULT, (irq, name)
            assert f"IRQ {irq} ({name}): the kernel refuses to move it" in proc.stdout
        elif re.fullmatch(r"ens1f[01]np[01]-TxRx-\d+", name):
            assert got[irq] == plan["nic_irq_cpus"][name.split("-")[0]], (irq, name)
        else:
            assert parse_cpulist(got[irq]) == parse_cpulist(plan["irq_cpus"]), (irq, name)
    assert format_cpulist(parse_cpulist(plan["irq_cpus"])) == plan["irq_cpus"]
    assert (root / "proc/irq/default_smp_affinity").read_text().strip() == plan["irq"]["default_smp_affinity"]
