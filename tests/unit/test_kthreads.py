"""Kernel-thread placement on THIS machine's live kernel (root, 2+ CPUs): the hostkit_kthreads module
moves the real movable kernel threads off CPU 1, the agent's rollback puts each one back, the audit
check sees both states, and the boot-time program does the same move when run as the unit runs it.

Every assertion reads the live kernel (``/proc/<pid>/status`` Cpus_allowed_list), never what hostkit
wrote. Each test puts every kernel thread back to its original CPUs in a ``finally``. The journal of
these runs lives under a temporary directory (what is moved is the live kernel's threads either way),
so this machine's own ``/var/lib/hostkit`` is untouched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hostkit.agent.journal_io import Journal
from hostkit.agent.rollback import rollback
from hostkit.ansible.apply import run_apply
from hostkit.audit.checks import check_kthreads
from hostkit.core import kthreads
from hostkit.core.cpulist import parse_cpulist
from hostkit.facts import gather
from hostkit.lab import fixtures
from hostkit.plan.planner import make_plan
from hostkit.profiles import load_profile
from tests.labutil import cli_json
from tests.modules.runner import REPO

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        os.geteuid() != 0 or len(os.sched_getaffinity(0)) < 2 or not os.path.isdir("/proc/2"),
        reason="needs root, 2 CPUs and a kernel whose threads /proc shows",
    ),
]
HOUSEKEEPING, ISOLATED = frozenset({0}), frozenset({1})
PLAN = {"kthreads": {"move": True, "housekeeping": "0", "isolated": "1"}}
INVENTORY = REPO / "inventories/local/hosts.yml"


def live_cpus(pid: int) -> str | None:
    """Cpus_allowed_list of a task, from the live kernel."""
    t = kthreads.read_thread(pid)
    return t and t["cpus"]


@pytest.fixture
def originals():
    """Every kernel thread's (start, cpus) now; afterwards each one still running is put back."""
    before = {t["pid"]: (t["start"], t["cpus"]) for t in kthreads.kernel_threads()}
    yield before
    for pid, (start, cpus) in before.items():
        t = kthreads.read_thread(pid)
        if t and t["start"] == start and t["cpus"] != cpus and kthreads.movable(t):
            try:
                os.sched_setaffinity(pid, parse_cpulist(cpus))
            except OSError:
                pass


def change_kthreads():
    """The kthreads kind of change (module_utils), which hostkit_kthreads and hostkit_changes run."""
    import ansible.module_utils.hostkit_change_kthreads as kind

    from tests.modules.runner import MODULE_UTILS  # noqa: F401 (puts module_utils on ansible.module_utils)

    return kind


def strays_now() -> list[dict]:
    return [t for t in kthreads.kernel_threads() if kthreads.movable(t) and parse_cpulist(t["cpus"]) & ISOLATED]


def test_move_journal_audit_and_rollback_on_the_real_threads(tmp_path, originals):
    mod = change_kthreads()
    params = {"sysroot": "/", "run_id": "kt1", "role": "kthreads", "housekeeping": "0", "isolated": "1"}
    stray = strays_now()
    bound = [t for t in kthreads.kernel_threads() if not kthreads.movable(t) and t["cpus"] == "1"]
    assert any(t["comm"] == "kthreadd" for t in stray), [t["comm"] for t in stray]  # allowed on both CPUs at boot
    assert bound, "no per-CPU kernel thread bound to CPU 1 (ksoftirqd/1, migration/1, ...)"
    assert check_kthreads(gather("/"), PLAN)[0]["status"] == "drift"

    todo, result = mod.decide(params, kthreads.kernel_threads(), kthreads.boot_id())
    assert {t["pid"] for t in todo} == {t["pid"] for t in stray} and result["changed"] is True
    shown = mod.diff(todo)
    assert f"kthreadd (2) = {originals[2][1]}\n" in shown["before"] and "kthreadd (2) = 0\n" in shown["after"]
    journal = Journal(str(tmp_path), "kt1")
    mod.do(params, journal, todo, result)

    # the live kernel: every stray thread now allowed on CPU 0 only; bound ones untouched
    assert {t["pid"]: live_cpus(t["pid"]) for t in result["moved"]} == {t["pid"]: "0" for t in result["moved"]}
    assert len(result["moved"]) + len(result["gone"]) == len(todo) and result["kernel_refused"] == []
    assert {t["pid"]: live_cpus(t["pid"]) for t in bound} == {t["pid"]: "1" for t in bound}
    assert strays_now() == []
    (finding,) = check_kthreads(gather("/"), PLAN)
    assert finding["status"] == "pass", finding
    # the journal: one entry, each moved thread keyed by boot, pid and start time with its previous CPUs
    (entry,) = json.loads((tmp_path / "var/lib/hostkit/journal/kt1.json").read_text())["entries"]
    assert entry["kind"] == "kthreads"
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert {(i["boot"], i["pid"], i["start"], i["before"]) for i in entry["items"]} == {
        (boot, t["pid"], originals[t["pid"]][0], originals[t["pid"]][1]) for t in result["moved"]
    }

    # a second run changes nothing
    again, second = mod.decide(params, kthreads.kernel_threads())
    assert again == [] and second["changed"] is False

    rb = rollback(str(tmp_path))
    assert rb["errors"] == [] and rb["verify"]["ok"] is True, rb
    assert {a["path"] for a in rb["actions"]} == {f"/proc/{t['pid']}" for t in result["moved"]}
    assert {t["pid"]: live_cpus(t["pid"]) for t in result["moved"]} == {
        t["pid"]: originals[t["pid"]][1] for t in result["moved"]
    }
    assert rollback(str(tmp_path))["changed"] is False  # a second rollback changes nothing


def test_an_unwritable_journal_moves_no_thread(tmp_path, originals):
    mod = change_kthreads()
    params = {"sysroot": "/", "run_id": "kt2", "role": "kthreads", "housekeeping": "0", "isolated": "1"}
    (tmp_path / "var/lib/hostkit").mkdir(parents=True)
    (tmp_path / "var/lib/hostkit/journal").write_text("not a directory\n")
    todo, result = mod.decide(params, kthreads.kernel_threads())
    assert todo
    with pytest.raises(mod.ModuleFailure, match=r"cannot write the journal .*\(no thread moved\)"):
        mod.do(params, Journal(str(tmp_path), "kt2"), todo, result)
    assert {t["pid"]: live_cpus(t["pid"]) for t in todo} == {t["pid"]: t["before"] for t in todo}


def test_rollback_leaves_a_thread_that_is_not_the_journaled_one(tmp_path, originals):
    """A pid whose start time differs is another thread (the journaled one exited, the pid was reused);
    the same pid and start tick in another boot (kthreadd, in every boot) is another thread too."""
    t = next(t for t in strays_now() if t["comm"] == "kthreadd")
    boot = kthreads.boot_id()
    Journal(str(tmp_path), "kt3").record(
        {
            "kind": "kthreads",
            "role": "kthreads",
            "items": [
                {
                    "pid": t["pid"],
                    "start": start,
                    "boot": b,
                    "comm": t["comm"],
                    "path": f"/proc/{t['pid']}",
                    "before": "1",
                    "after": "0",
                }
                for start, b in ((t["start"] + 1, boot), (t["start"], "another-boot"))
            ],
        }
    )
    rb = rollback(str(tmp_path))
    assert (rb["changed"], rb["unchanged"], rb["verify"]["ok"]) == (False, 2, True)
    assert live_cpus(t["pid"]) == t["cpus"]


def test_the_boot_unit_program_moves_them_as_installed(tmp_path, originals):
    """The role installs hostkit/core/kthreads.py and cpulist.py side by side; the unit runs it with python3
    (no -I: the program imports cpulist.py from its own directory, as on a host without hostkit)."""
    for name in ("hostkit_kthreads.py", "hostkit_cpulist.py"):
        shutil.copy(REPO / "roles/kthreads/files" / name, tmp_path / name)
    stray = strays_now()
    program = ["/usr/bin/python3", "-s", "-E", str(tmp_path / "hostkit_kthreads.py")]
    proc = subprocess.run(
        program + ["--housekeeping", "0", "--isolated", "1"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert strays_now() == []
    assert f"moved 2 (kthreadd): {next(t['cpus'] for t in stray if t['pid'] == 2)} -> 0" in proc.stdout
    bad = subprocess.run(
        program + ["--housekeeping", "0-x", "--isolated", "1"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert bad.returncode == 2 and "invalid cpulist" in bad.stderr


def test_a_sysroot_has_no_threads_and_its_plan_says_so(tmp_path):
    root = fixtures.materialize("epyc-9634-nps1", tmp_path / "host")
    facts = gather(str(root))
    assert facts["kthreads"] == {"available": False, "reason": kthreads.NOT_LIVE, "movable": [], "bound": None}
    plan = make_plan(facts, load_profile("bare-metal-inference"))
    assert plan["kthreads"] == {"move": True, "housekeeping": plan["housekeeping"], "isolated": plan["isolated"]}
    assert any(r.startswith("kernel threads:") and r.endswith(kthreads.NOT_LIVE) for r in plan["reasons"])
    (finding,) = check_kthreads(facts, plan)
    assert (finding["status"], finding["note"]) == ("not_applicable", kthreads.NOT_LIVE)


def test_the_role_through_ansible_on_this_machine_then_rollback(originals):
    """apply.yml's kthreads role on this machine (inventories/local, sysroot /) through ansible-runner,
    then `hostkit rollback --run-id`. The planner refuses isolation here (a VM with no boot loader
    configuration), so the plan handed to the role is the kthreads part alone: housekeeping 0, isolated 1."""
    unit, program = Path("/etc/systemd/system/hostkit-kthreads.service"), Path("/usr/local/lib/hostkit")
    if unit.exists() or program.exists():
        pytest.fail(f"hostkit files already present on this machine: {unit}, {program}")
    stray = strays_now()
    run_id = "20260101T000000Z-kthreads-test"
    try:
        hosts, run = run_apply(["localhost"], str(INVENTORY), plans={"localhost": PLAN}, tags="kthreads", run_id=run_id)
        h = hosts["localhost"]
        assert h.status == "changed", (h.msg, run.error)
        assert strays_now() == []
        assert {t["pid"]: live_cpus(t["pid"]) for t in stray if t["pid"] in originals} == {
            t["pid"]: "0" for t in stray if t["pid"] in originals
        }
        assert "--housekeeping 0 --isolated 1\n" in unit.read_text()
        if not os.path.isdir("/run/systemd/system"):  # enabling the unit could not happen here: said, not ok
            assert h.roles["kthreads"]["skipped"] == ["systemd is not running on this host"]  # its enable
        rc, rb, proc = cli_json("rollback", "-i", str(INVENTORY), "--run-id", run_id)
        assert rc == 0 and rb["hosts"]["localhost"]["verify"]["ok"], proc.stderr[-2000:]
        assert {t["pid"]: live_cpus(t["pid"]) for t in stray if kthreads.same_thread(t)} == {
            t["pid"]: t["cpus"] for t in stray if kthreads.same_thread(t)
        }
        assert not unit.exists() and not program.exists()
    finally:
        for leftover in (unit, program / "hostkit_kthreads.py", program / "hostkit_cpulist.py"):
            if leftover.exists():
                leftover.unlink()
        if program.is_dir() and not any(program.iterdir()):
            program.rmdir()
        journal = Path("/var/lib/hostkit/journal") / f"{run_id}.json"
        for f in (journal, journal.with_suffix(".rollback.json")):
            if f.exists():
                f.unlink()
