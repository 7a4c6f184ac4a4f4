"""The boot-time IRQ unit finds IRQs by action name, never by a number from another boot.

The program the unit runs (roles/irq_affinity/files/hostkit_irq_affinity.py, the role installs it as
it is) is run for real with /usr/bin/python3, as the unit does, against copies of a real
/proc/interrupts (this machine's, and the EPYC fixture's as the role left it on a lab host) whose
IRQ numbers are moved to other IRQs between "boots"; each IRQ must get the cpulist of its name.
On this machine's live /proc it moves the real IRQs and puts them back. The lab test also proves the
role installs the program, its rules and the unit, and that rollback removes them byte-exact.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hostkit.core.irq_affinity import name_rules, parse_interrupts

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "roles/irq_affinity/files/hostkit_irq_affinity.py"
PYTHON = "/usr/bin/python3"  # what the unit's ExecStart runs
UNIT = "etc/systemd/system/hostkit-irq-affinity.service"
RULES = "etc/hostkit/irq-affinity.json"
INSTALLED = "usr/local/lib/hostkit/irq_affinity.py"
BOOT_DEFAULT = "boot-default"  # what a fresh boot's smp_affinity_list holds here (never a rule's value)


def run_program(rules: Path, root: Path, program: Path = PROGRAM, *extra: str) -> subprocess.CompletedProcess:
    if not os.access(PYTHON, os.X_OK):
        pytest.fail(f"{PYTHON} missing: the unit runs the program with it")
    return subprocess.run(
        [PYTHON, str(program), str(rules), "--root", str(root), *extra], capture_output=True, text=True, timeout=60
    )


def next_boot(root: Path) -> dict[int, int]:
    """Renumber ``root``'s IRQs as another boot might: every numbered IRQ takes another one's number
    (a rotation by about half, no IRQ keeps its own), in /proc/interrupts, /proc/irq/<n>/ and the devices'
    msi_irqs; every smp_affinity_list is reset. Returns old number -> new number."""
    text = (root / "proc/interrupts").read_text()
    nums = [r["irq"] for r in parse_interrupts(text)]
    k = (len(nums) // 2) | 1  # odd: with alternating rules, a number from the other boot picks the other CPU
    new = {old: nums[(i + k) % len(nums)] for i, old in enumerate(nums)}
    lines = text.splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        label, sep, rest = line.partition(":")
        if sep and label.strip().isdigit():
            line = f"{new[int(label)]:>{len(label)}}:{rest}"
        out.append(line)
    (root / "proc/interrupts").write_text("\n".join(out) + "\n")
    irqdir = root / "proc/irq"
    for old in nums:
        if (irqdir / str(old)).exists():
            (irqdir / str(old)).rename(irqdir / f"moving-{new[old]}")
    for old in nums:
        if (irqdir / f"moving-{new[old]}").exists():
            (irqdir / f"moving-{new[old]}").rename(irqdir / str(new[old]))
    for f in irqdir.glob("[0-9]*/smp_affinity_list"):
        f.write_text(BOOT_DEFAULT + "\n")
    msi = sorted((root / "sys").rglob("msi_irqs/[0-9]*")) if (root / "sys").exists() else []
    for f in msi:
        f.rename(f.with_name(f"moving-{new[int(f.name)]}"))
    for f in msi:
        moved = f.with_name(f"moving-{new[int(f.name)]}")
        moved.rename(moved.with_name(moved.name[len("moving-") :]))
    return new


def affinity_by_irq(root: Path) -> dict[int, str]:
    return {int(f.parent.name): f.read_text().strip() for f in (root / "proc/irq").glob("[0-9]*/smp_affinity_list")}


def names_by_irq(root: Path) -> dict[int, str]:
    return {r["irq"]: r["name"] for r in parse_interrupts((root / "proc/interrupts").read_text())}


# ----------------------------------------------------------------------------- this machine's IRQs


def this_machines_irqs(root: Path) -> None:
    """/proc/interrupts and every IRQ's smp_affinity_list of this machine, copied under ``root``."""
    (root / "proc/irq").mkdir(parents=True)
    shutil.copyfile("/proc/interrupts", root / "proc/interrupts")
    for irq in names_by_irq(root):
        (root / f"proc/irq/{irq}").mkdir()
        live = Path(f"/proc/irq/{irq}/smp_affinity_list")
        (root / f"proc/irq/{irq}/smp_affinity_list").write_text(live.read_text() if live.exists() else "0\n")
    (root / "proc/irq/default_smp_affinity").write_text(Path("/proc/irq/default_smp_affinity").read_text())


def alternating_rules(names: dict[int, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Rules that tell the IRQs apart: by IRQ order, CPU 0 or the last CPU (so a number taken
    from another boot would put many of them on the wrong CPU), through the planner's name_rules."""
    last = str(os.cpu_count() - 1)
    wanted = {str(irq): ("0" if i % 2 == 0 else last) for i, irq in enumerate(sorted(names))}
    return name_rules(wanted, {str(i): n for i, n in names.items()})


def test_this_machines_interrupts_renumbered_each_irq_gets_its_names_cpus(tmp_path):
    if os.cpu_count() < 2:
        pytest.skip("one CPU: every rule would be CPU 0, a wrong number could not be told from a right one")
    root = tmp_path / "root"
    this_machines_irqs(root)
    by_name, unmatched = alternating_rules(names_by_irq(root))
    assert by_name, "no named IRQ in this machine's /proc/interrupts"
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"by_name": {**by_name, "gone-TxRx-0": "0"}, "default_smp_affinity": "1"}))
    moved = next_boot(root)
    assert all(old != new for old, new in moved.items())

    proc = run_program(rules, root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names, got = names_by_irq(root), affinity_by_irq(root)
    for irq, name in names.items():
        assert got[irq] == by_name.get(name, BOOT_DEFAULT), (irq, name)
    # A name planned on two different CPUs (this machine's two ACPI:Ged IRQs alternate) has no rule
    # and its IRQs keep the boot's value; it is listed with its reason.
    for why in unmatched.values():
        assert why.startswith("name ") or why == "no action name", why
    assert "no IRQ named 'gone-TxRx-0' in this boot" in proc.stdout
    assert (root / "proc/irq/default_smp_affinity").read_text() == "1\n"
    assert (
        proc.stdout.splitlines()[-1] == f"{len(got) - sum(v == BOOT_DEFAULT for v in got.values())} IRQ(s) "
        "moved, 0 refused by the kernel, 1 rule(s) without an IRQ"
    )


def test_resolve_prints_this_boots_numbers_and_changes_nothing(tmp_path):
    root = tmp_path / "root"
    this_machines_irqs(root)
    by_name, _ = alternating_rules(names_by_irq(root))
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"by_name": by_name}))
    moved = next_boot(root)
    before = affinity_by_irq(root)
    proc = run_program(rules, root, PROGRAM, "--resolve")
    assert proc.returncode == 0, proc.stderr
    names = names_by_irq(root)
    assert json.loads(proc.stdout) == {
        "assignments": {str(i): by_name[n] for i, n in names.items() if n in by_name},
        "missed": [],
    }
    assert set(json.loads(proc.stdout)["assignments"]) <= {str(n) for n in moved.values()}
    assert affinity_by_irq(root) == before


@pytest.mark.parametrize(
    "args, error",
    [
        ([], "usage: irq_affinity.py"),
        (["--rules-json", "[1]"], "bad rules: rules must be an object with a by_name object"),
        (["--rules-json", "{not json"], "bad rules: "),
        (["/nonexistent/rules.json"], "bad rules: [Errno 2]"),
    ],
)
def test_bad_rules_one_line_exit_2_nothing_written(tmp_path, args, error):
    root = tmp_path / "root"
    this_machines_irqs(root)
    before = affinity_by_irq(root)
    proc = subprocess.run([PYTHON, str(PROGRAM), *args, "--root", str(root)], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and error in proc.stderr, proc.stderr
    assert affinity_by_irq(root) == before


@pytest.mark.live
def test_on_this_machines_live_irqs_and_put_back():
    """The program on the live /proc (root /): every named IRQ to one CPU, the refusals logged, then
    every value put back (in a finally)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to write /proc/irq on this machine")
    if os.cpu_count() < 2:
        pytest.skip("one CPU: a move could not be told from no move")
    names = names_by_irq(Path("/"))
    before = {irq: Path(f"/proc/irq/{irq}/smp_affinity_list").read_text().strip() for irq in names}
    default_before = Path("/proc/irq/default_smp_affinity").read_text().strip()
    target = str(os.cpu_count() - 1)
    by_name = {n: target for n in names.values() if n}
    rules = Path(f"/tmp/hostkit-irq-rules-{os.getpid()}.json")
    rules.write_text(json.dumps({"by_name": by_name}))
    try:
        proc = run_program(rules, Path("/"))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        refused = {int(m) for m in re.findall(r"^IRQ (\d+) \(.*\): the kernel refuses", proc.stdout, re.M)}
        moved = {int(m) for m in re.findall(r"^IRQ (\d+) \(.*\) -> ", proc.stdout, re.M)}
        assert moved | refused == {i for i, n in names.items() if n} and moved, proc.stdout
        for irq in moved:
            assert Path(f"/proc/irq/{irq}/smp_affinity_list").read_text().strip() == target, irq
        assert Path("/proc/irq/default_smp_affinity").read_text().strip() == default_before  # no mask: left
    finally:
        rules.unlink()
        for irq, value in before.items():
            try:
                Path(f"/proc/irq/{irq}/smp_affinity_list").write_text(value + "\n")
            except OSError:
                pass  # refused before as well
    assert {irq: Path(f"/proc/irq/{irq}/smp_affinity_list").read_text().strip() for irq in names} == before


# ----------------------------------------------------------------------------- the plan's rules


def test_plan_rules_by_name_and_says_which_irqs_no_name_finds_again(tmp_path):
    """One rule for which IRQ goes where: by_name holds each named IRQ's cpulist from the same
    decision as assignments; an IRQ without a name, and a name wanted on two different CPU sets
    (here a NIC queue renamed "timer"), get no rule and a reason line each."""
    from hostkit.facts import gather
    from hostkit.lab.fixtures import materialize
    from hostkit.plan import make_plan
    from hostkit.profiles import apply_overrides, load_profile

    facts = gather(str(materialize("epyc-9634-nps1", tmp_path / "bm")))
    nic = facts["nics"][0]
    queue = next(i for i in facts["irqs"] if i["irq"] == nic["irqs"][0])
    queue["name"] = "timer"  # the legacy timer IRQ goes to all IRQ CPUs, the queue to its node's
    facts["irqs"].append({**queue, "irq": 250, "name": "", "total": 0})
    profile, pinned = apply_overrides(load_profile("bare-metal-inference"), None)
    plan = make_plan(facts, profile, pinned, host="bm")
    irq = plan["irq"]
    assert irq["unmatched"] == ["0", str(queue["irq"]), "250"]
    assert "timer" not in irq["by_name"] and "" not in irq["by_name"]
    named = {str(i["irq"]): i["name"] for i in facts["irqs"]}
    assert set(irq["assignments"]) == {
        n
        for n in named
        if n not in irq["unmatched"] and next(i for i in facts["irqs"] if str(i["irq"]) == n)["smp_affinity_list"]
    }
    for number, cpus in irq["assignments"].items():
        assert irq["by_name"][named[number]] == cpus
    assert irq["by_name"][f"{nic['name']}-TxRx-1"] == plan["nic_irq_cpus"][nic["name"]]
    assert (
        f"IRQ(s) 0, {queue['irq']} cannot be found by name after a reboot (name 'timer' shared by IRQs "
        "planned on different CPUs): hostkit leaves them to the kernel's irqaffinity= and "
        "default_smp_affinity"
    ) in plan["reasons"]
    assert (
        "IRQ(s) 250 cannot be found by name after a reboot (no action name): hostkit leaves them to the "
        "kernel's irqaffinity= and default_smp_affinity"
    ) in plan["reasons"]
