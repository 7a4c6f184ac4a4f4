"""inventories/local on this machine for real (sysroot /): apply, idempotence, exact rollback.

Writes real kernel values (sysctls, IRQ affinities) and /etc/sysctl.d files, then
restores them; a safety net puts back any value the rollback missed and fails.
"""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

import pytest

from hostkit.tunables import tuned_sysctls
from tests.labutil import cli_json

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "inventories/local/hosts.yml"
VALUES = (
    [s.proc_path for s in tuned_sysctls()]
    + ["/proc/irq/default_smp_affinity"]
    + sorted(glob.glob("/proc/irq/[0-9]*/smp_affinity_list"))
)
FILES = [
    "/etc/sysctl.d/60-hostkit-rt.conf",
    "/etc/sysctl.d/61-hostkit-numa.conf",
    "/etc/systemd/system/hostkit-irq-affinity.service",
    "/usr/local/lib/hostkit/irq_affinity.py",
    "/etc/hostkit/irq-affinity.json",
]


def snapshot() -> dict[str, str]:
    out = {}
    for p in VALUES:
        try:
            out[p] = Path(p).read_text().strip()
        except OSError:
            pass
    return out


@pytest.fixture
def restored_machine():
    if os.geteuid() != 0:
        pytest.skip("needs root to write /proc/sys and /proc/irq on this machine")
    if any(Path(f).exists() for f in FILES):
        pytest.fail(f"hostkit files already present on this machine: {FILES}")
    had_state = Path("/var/lib/hostkit").exists()
    before = snapshot()
    yield before
    cli_json("rollback", "-i", INVENTORY, "--all")
    after = snapshot()
    leftovers = [f for f in FILES if Path(f).exists()]
    for p, v in before.items():  # safety net: never leave this machine changed
        if after.get(p) != v:
            try:
                Path(p).write_text(v + "\n")
            except OSError:
                pass
    for f in leftovers:
        os.unlink(f)
    if not had_state:
        shutil.rmtree("/var/lib/hostkit", ignore_errors=True)
    assert after == before, {p: (before[p], after.get(p)) for p in before if after.get(p) != before[p]}
    assert not leftovers


def test_local_inventory_apply_idempotent_and_rolled_back(restored_machine):
    before = restored_machine
    rc, doc, proc = cli_json("apply", "-i", INVENTORY)
    assert rc == 0, proc.stderr[-3000:]
    host = doc["hosts"]["localhost"]
    assert host["status"] == "changed"
    assert Path("/proc/sys/kernel/timer_migration").read_text().strip() == "0"
    assert Path("/proc/sys/vm/stat_interval").read_text().strip() == "10"
    assert Path("/proc/sys/kernel/sched_rt_runtime_us").read_text().strip() == "950000"
    assert Path("/etc/sysctl.d/61-hostkit-numa.conf").exists()
    refused = {r["path"] for r in host["irq_refused"]}
    moved = [p for p in VALUES if p.endswith("smp_affinity_list") and p not in refused]
    assert moved, "no IRQ could be moved on this machine"
    for p in moved:
        assert Path(p).read_text().strip() == "0", p  # steered to the housekeeping CPU
    # governor: no cpufreq in this guest -> not applicable, not failed
    assert host["roles"]["cpu_governor"]["failed"] is False

    rc, again, _ = cli_json("apply", "-i", INVENTORY)
    assert rc == 0 and again["hosts"]["localhost"]["changed"] == 0

    rc, rb, _ = cli_json("rollback", "-i", INVENTORY)
    assert rc == 0 and rb["hosts"]["localhost"]["verify"]["ok"]
    assert snapshot() == before
    assert not any(Path(f).exists() for f in FILES)
