"""The kernel_values and pm_qos roles on this machine for real (sysroot /): transparent hugepages,
KSM, the workqueue and writeback cpumasks and 2 MiB hugepages written through apply.yml and read
back from the kernel's own files, the PM QoS unit's command holding /dev/cpu_dma_latency, the audit,
and a rollback that leaves every file byte for byte as it was. A safety net puts back anything the
rollback missed, and fails."""

from __future__ import annotations

import copy
import os
import shlex
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hostkit.agent import rollback as rollback_mod
from hostkit.audit.checks import check_pm_qos, check_sysfs
from hostkit.core.cpulist import parse_mask
from hostkit.facts import gather
from hostkit.plan import make_plan
from hostkit.profiles import apply_overrides, load_profile

pytestmark = pytest.mark.live

THP = "/sys/kernel/mm/transparent_hugepage/"
VALUES = [
    THP + "enabled",
    THP + "defrag",
    "/sys/kernel/mm/ksm/run",
    "/sys/devices/virtual/workqueue/cpumask",
    "/sys/bus/workqueue/devices/writeback/cpumask",
    "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages",
]
UNITS = ["/etc/systemd/system/hostkit-kernel-values.service", "/etc/systemd/system/hostkit-pm-qos.service"]
RUN_ID = "20260101T000000Z-live-kv"
NO_CEILING = 2000000000  # PM_QOS_CPU_LATENCY_DEFAULT_VALUE: what /dev/cpu_dma_latency reads with no request


def snapshot() -> dict[str, bytes]:
    return {p: Path(p).read_bytes() for p in VALUES}


def ceiling() -> int:
    with open("/dev/cpu_dma_latency", "rb") as f:
        return struct.unpack("=i", f.read(4))[0]


@pytest.fixture
def machine():
    if os.geteuid() != 0:
        pytest.skip("needs root to write /sys/kernel/mm and the workqueue cpumasks on this machine")
    missing = [p for p in VALUES + ["/dev/cpu_dma_latency"] if not os.path.exists(p)]
    if missing:
        pytest.skip(f"this kernel has no {', '.join(missing)}")
    if any(Path(u).exists() for u in UNITS):
        pytest.fail(f"hostkit units already present on this machine: {UNITS}")
    if os.cpu_count() < 2 or parse_mask(Path(VALUES[3]).read_text()) != set(range(os.cpu_count())):
        pytest.skip("needs two or more CPUs, all in the workqueue cpumask")
    had_state = Path("/var/lib/hostkit").exists()
    before = snapshot()
    yield before
    after = snapshot()
    leftovers = [u for u in UNITS if Path(u).exists()]
    for p, v in before.items():  # safety net: never leave this machine changed
        if after[p] != v:
            text = v.decode()
            Path(p).write_text((text.split("[", 1)[1].split("]", 1)[0] if "[" in text else text.strip()) + "\n")
    for u in leftovers:
        os.unlink(u)
    journal = Path("/var/lib/hostkit/journal")
    for f in journal.glob(RUN_ID + "*"):
        f.unlink()
    if not had_state:
        shutil.rmtree("/var/lib/hostkit", ignore_errors=True)
    assert after == before, {p: (before[p], after[p]) for p in before if after[p] != before[p]}
    assert not leftovers


def test_thp_ksm_workqueue_masks_hugepages_and_the_latency_ceiling_for_real(machine, tmp_path):
    from hostkit.ansible.run import run_playbook

    before = machine
    facts = copy.deepcopy(gather("/"))
    # This machine's kernel is booted by its host (no boot configuration hostkit can edit): the boot
    # guard would refuse an isolating plan for its kernel arguments, which this test does not apply
    # (tags kernel_values and pm_qos only). Without the guard the plan isolates CPU 1.
    facts["kernel"]["boot_loader"] = None
    prof, pinned = apply_overrides(
        load_profile(),
        {
            "housekeeping": "0",
            "isolated": f"1-{os.cpu_count() - 1}",
            "memory": {"thp_enabled": "never", "thp_defrag": "defer", "ksm_run": 1, "hugepages_2m_per_node": 2},
        },
    )
    plan = make_plan(facts, prof, pinned, force=True, host="localhost")
    assert not plan["refused"], plan["refused"]
    assert {i["key"] for i in plan["sysfs"]} == {
        "thp_enabled",
        "thp_defrag",
        "ksm_run",
        "workqueue_cpumask",
        "writeback_cpumask",
        "hugepages_2m_per_node",
    }

    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        "localhost": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": sys.executable,
                            "hostkit_sysroot": "/",
                        }
                    }
                }
            }
        )
    )
    run = run_playbook(
        "apply.yml",
        str(inventory),
        tags="kernel_values,pm_qos",
        run_id=RUN_ID,
        extravars={"hostkit_plans": {"localhost": plan}, "hostkit_run_id": RUN_ID},
    )
    assert run.status == "successful", run.error or run.hosts["localhost"].msg

    # What the kernel now reports, read from its own files.
    assert Path(THP + "enabled").read_text() == "always madvise [never]\n"
    assert Path(THP + "defrag").read_text() == "always [defer] defer+madvise madvise never\n"
    assert Path("/sys/kernel/mm/ksm/run").read_text() == "1\n"
    assert parse_mask(Path(VALUES[3]).read_text()) == {0}
    assert parse_mask(Path(VALUES[4]).read_text()) == {0}
    assert Path(VALUES[5]).read_text() == "2\n"
    assert all(f["status"] == "pass" for f in check_sysfs(gather("/"), plan)), check_sysfs(gather("/"), plan)

    # The PM QoS unit's own command, as systemd would run it (%% is systemd's escape for %).
    unit = Path(UNITS[1]).read_text()
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    argv = shlex.split(exec_start[len("ExecStart=") :].replace("%%", "%"))
    assert ceiling() == NO_CEILING
    holder = subprocess.Popen(argv)
    try:
        deadline = time.monotonic() + 10
        while ceiling() != 3 and time.monotonic() < deadline and holder.poll() is None:
            time.sleep(0.05)
        assert ceiling() == 3
        held = gather("/")
        assert held["cpuidle"]["latency_ceiling_us"] == 3
        assert [f["status"] for f in check_pm_qos(held, plan)] == ["pass"]
    finally:
        holder.kill()
        holder.wait()
    assert ceiling() == NO_CEILING  # the kernel dropped the request with the holder

    rolled = rollback_mod.rollback("/", run_id=RUN_ID)
    assert rolled["verify"]["ok"], rolled["verify"]
    assert snapshot() == before  # byte for byte, choice files included
    assert not any(Path(u).exists() for u in UNITS)
    assert not rollback_mod.rollback("/", run_id=RUN_ID)["changed"]
