"""Issue 12, the plan completed: the kernel_values role (workqueue and writeback cpumasks, EPP, THP,
KSM, hugepages per node) and the pm_qos role through apply.yml on a sysroot fixture laid out as the
kernel lays out those files; audit and exact rollback; rollback of BLS files reports a reboot."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from hostkit.agent import rollback as rollback_mod
from hostkit.agent.journal_io import Journal, change_file, file_state
from hostkit.audit.checks import check_pm_qos, check_sysfs
from hostkit.core.cpulist import format_mask, parse_cpulist
from hostkit.core.values import normalise, same
from hostkit.facts import gather
from hostkit.plan import make_plan
from hostkit.profiles import apply_overrides, load_profile
from hostkit.tunables import SYSFS_BY_KEY, SYSFS_VALUES

# As the kernel shows them (read on this machine's 6.x kernel and the intel_pstate documentation);
# THP "always" is Debian's kernel default (CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS).
THP_ENABLED = "[always] madvise never\n"
THP_DEFRAG = "always defer defer+madvise [madvise] never\n"
EPP_OFFERED = "default performance balance_performance balance_power power\n"


def lay_out_sysfs(root: Path, facts: dict) -> dict[str, str]:
    """Write the files of every SysfsValue into a fixture the way a real kernel holds them; returns them."""
    online = parse_cpulist(facts["topology"]["online"])
    nodes = [n["id"] for n in facts["topology"]["numa_nodes"] if n["memory_kb"]]
    full = format_mask(online, facts["topology"]["cpus"]) + "\n"
    files = {
        "/sys/kernel/mm/transparent_hugepage/enabled": THP_ENABLED,
        "/sys/kernel/mm/transparent_hugepage/defrag": THP_DEFRAG,
        "/sys/kernel/mm/ksm/run": "1\n",
        SYSFS_BY_KEY["workqueue_cpumask"].path: full,
        SYSFS_BY_KEY["writeback_cpumask"].path: full,
    }
    epp = SYSFS_BY_KEY["energy_performance_preference"]
    for path in epp.paths(online):
        files[path] = "balance_performance\n"
        files[epp.offered_path(path)] = EPP_OFFERED
    for path in SYSFS_BY_KEY["hugepages_2m_per_node"].paths(nodes=nodes):
        files[path] = "0\n"
    for path, text in files.items():
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return files


def apply(root: Path, tmp_path: Path, plan: dict, run_id: str):
    from hostkit.ansible.run import run_playbook

    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        "h": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": sys.executable,
                            "hostkit_sysroot": str(root),
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
        run_id=run_id,
        extravars={"hostkit_plans": {"h": plan}, "hostkit_run_id": run_id},
    )
    assert run.status == "successful", run.error or run.hosts["h"].msg
    return run.hosts["h"]


def would_run(root: Path) -> list[list[str]]:
    log = root / "var/lib/hostkit/would-run.jsonl"
    return [json.loads(line)["argv"] for line in log.read_text().splitlines()] if log.exists() else []


def test_kernel_values_and_pm_qos_through_apply_audit_and_rollback(sysroot_copy, tmp_path):
    root = sysroot_copy("xeon-8480-snc2-ht")
    files = lay_out_sysfs(root, gather(str(root)))
    facts = gather(str(root))
    assert facts["sysfs"]["energy_performance_preference"]["offered"] == sorted(EPP_OFFERED.split())
    prof, pinned = apply_overrides(load_profile(), {"memory": {"hugepages_2m_per_node": 512}})
    plan = make_plan(facts, prof, pinned, host="h")
    assert not plan["refused"]
    assert {i["key"] for i in plan["sysfs"]} == {v.key for v in SYSFS_VALUES}
    assert plan["pm_qos"] == {"cpu_dma_latency_us": 3, "holder": "unit"}

    host = apply(root, tmp_path, plan, "20260101T000000Z-kv")
    assert host.changed >= 2
    for item in plan["sysfs"]:  # every file holds its planned value, compared as the kernel's text would be
        assert same(item["kind"], item["value"], (root / item["path"].lstrip("/")).read_text()), item
    hk = parse_cpulist(plan["housekeeping"])
    assert normalise("mask", (root / "sys/devices/virtual/workqueue/cpumask").read_text()) == hk
    assert (root / "sys/devices/system/node/node3/hugepages/hugepages-2048kB/nr_hugepages").read_text() == "512\n"
    after = gather(str(root))
    findings = check_sysfs(after, plan)
    assert [(f["check"], f["status"]) for f in findings] == [(v.key, "pass") for v in SYSFS_VALUES]
    # a sysroot holds no /dev/cpu_dma_latency: the audit says it cannot tell rather than pass
    assert [f["status"] for f in check_pm_qos(after, plan)] == ["not_applicable"]

    unit = (root / "etc/systemd/system/hostkit-kernel-values.service").read_text()
    assert "ExecStart=/bin/sh -c 'echo madvise > /sys/kernel/mm/transparent_hugepage/enabled'\n" in unit
    assert unit.count("ExecStart=") == len(plan["sysfs"])
    qos = (root / "etc/systemd/system/hostkit-pm-qos.service").read_text()
    assert "ExecStart=/bin/sh -c 'exec 3>/dev/cpu_dma_latency && printf %%08x 3 >&3 && exec sleep infinity'\n" in qos
    assert ["systemctl", "enable", "hostkit-kernel-values.service"] in would_run(root)
    assert ["systemctl", "enable", "hostkit-pm-qos.service"] in would_run(root)
    assert ["systemctl", "restart", "hostkit-pm-qos.service"] in would_run(root)  # holds the ceiling from now

    again = apply(root, tmp_path, plan, "20260101T000001Z-kv2")
    assert again.changed == 0

    rolled = rollback_mod.rollback(str(root), run_id="20260101T000000Z-kv")
    assert rolled["verify"]["ok"], rolled["verify"]
    assert ["systemctl", "stop", "hostkit-pm-qos.service"] in rolled["would_run"]
    assert ["systemctl", "disable", "hostkit-pm-qos.service"] in rolled["would_run"]
    assert not rolled["reboot_required"]
    for path, text in files.items():
        now = (root / path.lstrip("/")).read_text()
        if path.startswith("/sys/kernel/mm/transparent_hugepage/"):
            # rollback writes the bracketed word back, as the kernel takes it; a plain file keeps just it
            assert now == normalise("choice", text) + "\n", path
        else:
            assert now == text, path
    assert not (root / "etc/systemd/system/hostkit-kernel-values.service").exists()
    assert not (root / "etc/systemd/system/hostkit-pm-qos.service").exists()
    assert not rollback_mod.rollback(str(root), run_id="20260101T000000Z-kv")["changed"]


def test_a_plan_without_values_leaves_no_unit(sysroot_copy, tmp_path):
    root = sysroot_copy("epyc-9634-nps1")  # a capture without THP/KSM/workqueue files
    prof, pinned = apply_overrides(load_profile(), {"cpu_power": {"cpu_dma_latency_us": None}})
    plan = make_plan(gather(str(root)), prof, pinned, host="h")
    assert plan["sysfs"] == [] and plan["pm_qos"]["holder"] is None
    host = apply(root, tmp_path, plan, "20260101T000000Z-none")
    assert host.changed == 0
    assert not (root / "etc/systemd/system/hostkit-kernel-values.service").exists()
    assert not (root / "etc/systemd/system/hostkit-pm-qos.service").exists()


@pytest.mark.parametrize("path", ["/boot/loader/entries/{entry}", "/etc/kernel/cmdline", "/boot/grub2/grubenv"])
def test_rollback_reports_a_restored_bls_file_as_needing_a_reboot(sysroot_copy, path):
    root = sysroot_copy("boot-rhel9")
    entry = next(p.name for p in (root / "boot/loader/entries").iterdir())
    path = path.format(entry=entry)
    full = root / path.lstrip("/")
    if not full.exists():
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text("root=/dev/mapper/rhel-root ro\n")
    original = full.read_bytes()
    journal = Journal(str(root), "20260101T000000Z-bls")
    change_file(journal, "isolcpus", path, str(full), file_state(str(full)), original + b"isolcpus=2\n")
    rolled = rollback_mod.rollback(str(root), run_id="20260101T000000Z-bls")
    assert full.read_bytes() == original
    assert rolled["reboot_required"] is True
    assert [] not in rolled["would_run"]
    again = rollback_mod.rollback(str(root), run_id="20260101T000000Z-bls")
    assert not again["changed"] and again["reboot_required"] is False
