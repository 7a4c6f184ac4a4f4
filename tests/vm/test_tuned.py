"""The real tuned (Debian bookworm's package, tuned 2.20) in a real-kernel lab guest:
hostkit drives it, and rolls it back, across real reboots.

The guest image carries tuned installed but disabled (hostkit/lab/vm_image.py), so every other
guest is tuned-free (tests/vm/test_rollout.py checks it on its plain guest).

1. tuned first: the guest is the preset ``small-tuned`` (hostkit/lab/vm_setup.py): tuned's
   ``/etc/tuned/cpu-partitioning-variables.conf`` isolates CPU 1 (``isolated_cores`` and
   ``no_balance_cores``, so tuned's own ``isolcpus=1`` is on the command line), tuned enabled and
   started, ``tuned-adm profile cpu-partitioning``, and a reboot into it (tuned patched
   ``/boot/grub/grub.cfg`` and appended ``$tuned_params`` to ``/etc/default/grub``; Debian's
   ``/etc/grub.d/00_tuned`` writes ``set tuned_params`` from ``/etc/tuned/bootcmdline``). That
   boot is the scenario, not what is proven here: it happened once, when the preset's saved state
   was built beside the image, and the guest resumes booted into it.
2. ``hostkit apply --reboot`` with the default ``tuned: drive`` (tuned is active): one ``isolcpus``
   on the live command line, hostkit's; every planned argument exactly once; tuned runs with
   profile ``hostkit``; the audit finds no drift.
3. ``hostkit rollback``: tuned's ``cpu-partitioning`` is active again, the next boot's command line
   (GRUB's config as the guest's boot will read it) is the one tuned booted with, and /etc and /boot
   are as they were, but for the initrd overlay tuned's cpu-partitioning builds anew (``cpio`` of a
   fresh directory) at every switch. Not booted a second time here: that ``rollback --reboot``
   boots the restored configuration is numa2's proof (tests/vm/test_numa2.py).

One reboot here, the proof of hostkit's boot over tuned's; each TCG boot (and tuned's start after
it) costs minutes.
"""

from __future__ import annotations

import json
import time

import pytest

from hostkit.core.kernel_args import arg_name, cmdline_words, format_arg
from tests.labutil import cli, cli_json
from tests.vmutil import REBOOT_TIMEOUT, etc_boot_hashes, inventory_for, read, ssh, vm_lab_fixture

HOST = "tuned"
# tuned's cpu-partitioning ([bootloader] initrd_add_dir=${tmpdir}) packs a fresh directory into this
# initrd overlay whenever it applies the profile (every start, every switch): new cpio timestamps each time.
TUNED_REBUILT = {"/boot/tuned-initrd.img"}
# On a switch away from a profile with boot arguments tuned's bootloader plugin runs
# `grub-editenv - set tuned_params= tuned_initrd=` (its full rollback), creating GRUB's environment
# block when there is none: tuned's own file, made by `tuned-adm profile hostkit`; these lines exactly.
GRUBENV = "/boot/grub/grubenv"
GRUBENV_VARS = ["tuned_params=", "tuned_initrd="]


def tuned_state(lab) -> dict:
    """tuned's state once its start at boot has finished (bounded: it takes minutes under TCG)."""
    deadline = time.monotonic() + REBOOT_TIMEOUT
    service = ssh(lab, HOST, "systemctl is-active tuned", check=False).strip()
    while service == "activating" and time.monotonic() < deadline:
        time.sleep(5)
        service = ssh(lab, HOST, "systemctl is-active tuned", check=False).strip()
    return {
        "active": ssh(lab, HOST, "tuned-adm active", check=False).strip(),
        "service": service,
        "cmdline": read(lab, HOST, "/proc/cmdline"),
    }


lab = vm_lab_fixture("vm-tuned", [(HOST, "small-tuned")])


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    # A static partition (no kubelet): isolcpus=managed_irq,domain,1, one housekeeping CPU.
    return inventory_for(
        lab,
        tmp_path_factory.mktemp("vm-tuned-inv") / "inventory.yml",
        {
            HOST: {
                "hostkit_overrides": {
                    "reserve_per_node": 1,
                    "allow_virtual": True,
                    "containerd": {"enabled": False},
                    "kubelet": {"enabled": False},
                }
            }
        },
    )


@pytest.fixture(scope="module")
def tuned_first(lab):
    """tuned's cpu-partitioning active and booted with, before hostkit touches the guest."""
    return {
        **tuned_state(lab),
        "hashes": etc_boot_hashes(lab, HOST),
        "bootcmdline": read(lab, HOST, "/etc/tuned/bootcmdline"),
    }


@pytest.fixture(scope="module")
def applied(lab, inventory, tuned_first):
    rc, plan_doc, proc = cli_json("plan", "-i", inventory)
    assert rc == 0, proc.stderr
    t0 = time.monotonic()
    proc = cli(
        "apply", "-i", inventory, "--reboot", "--reboot-timeout", REBOOT_TIMEOUT, "--json", timeout=REBOOT_TIMEOUT + 900
    )
    assert proc.returncode == 0, f"apply --reboot failed: {proc.stdout[-3000:]} {proc.stderr[-3000:]}"
    print(f"\napply --reboot took {time.monotonic() - t0:.0f} s")
    return {"plan": plan_doc["hosts"][HOST], "apply": json.loads(proc.stdout), **tuned_state(lab)}


def test_tuned_boots_with_its_own_isolcpus_first(tuned_first):
    assert tuned_first["service"] == "active"
    assert tuned_first["active"] == "Current active profile: cpu-partitioning"
    words = cmdline_words(tuned_first["cmdline"])
    assert [w for w in words if arg_name(w) in ("isolcpus", "nohz_full")] == ["isolcpus=1", "nohz_full=1"]


def test_drive_plans_hostkit_s_tuned_profile(applied):
    plan = applied["plan"]
    assert (plan["housekeeping"], plan["isolated"]) == ("0", "1")
    assert plan["tuned"]["mode"] == "drive" and plan["tuned"]["previous_profile"] == "cpu-partitioning"
    assert plan["cmdline_set"]["isolcpus"] == "managed_irq,domain,1"


def test_after_apply_the_live_command_line_has_each_planned_argument_once(applied):
    words = cmdline_words(applied["cmdline"])
    for key, value in applied["plan"]["cmdline_set"].items():
        assert [w for w in words if arg_name(w) == key] == [format_arg(key, value)], (key, words)
    assert [w for w in words if arg_name(w) == "isolcpus"] == ["isolcpus=managed_irq,domain,1"]
    assert [w for w in words if arg_name(w) == "nohz_full"] == [
        format_arg("nohz_full", applied["plan"]["cmdline_set"]["nohz_full"])
    ]


def test_tuned_runs_with_hostkit_s_profile(lab, applied):
    state = {k: applied[k] for k in ("service", "active", "cmdline")}
    assert applied["service"] == "active", state
    assert applied["active"] == "Current active profile: hostkit", state
    # tuned's own view of the boot: its bootloader plugin wrote hostkit's profile's arguments.
    bootcmdline = read(lab, HOST, "/etc/tuned/bootcmdline")
    line = next(x for x in bootcmdline.splitlines() if x.startswith("TUNED_BOOT_CMDLINE="))
    words = cmdline_words(line.split("=", 1)[1].strip('"'))
    # tuned's own arguments stay (nohz=on tuned.non_isolcpus=... on this guest); hostkit's are not among them.
    assert words and not [w for w in words if arg_name(w) in applied["plan"]["cmdline_set"]], bootcmdline


def test_the_audit_finds_no_drift(inventory, applied):
    rc, audit, proc = cli_json("audit", "-i", inventory)
    findings = audit["hosts"][HOST]["findings"]
    assert [f for f in findings if f["status"] == "drift"] == [], proc.stdout[-3000:]


def guest_metrics(lab, path: str) -> dict[str, float]:
    """The drift timer's textfile on the guest, checked here with promtool (Debian's prometheus)."""
    import subprocess

    text = ssh(lab, HOST, f"cat {path}")
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    return {
        line.split("{")[0].split()[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_the_drift_timer_judges_the_tuned_host_under_systemd_and_node_exporter_reads_it(lab, inventory, applied):
    """`hostkit drift --timer`: a real systemd timer on the tuned guest, its service run now (as the
    timer would): the metrics pass `promtool check metrics` and say "same"; the planned RT budget
    undone live, the next run says the state drifted (exit 1 is a verdict, the unit succeeds);
    `--timer off` removes the units, the agent's copy and the metrics file. The state only: a
    first version with 2,000 smoke requests in each run cost 345 s under TCG; the agent's drift
    with a real smoke run is tests/unit/test_drift_on_host.py's, on this machine."""
    prom = "/var/lib/prometheus/node-exporter/hostkit_drift.prom"
    rt = "kernel.sched_rt_runtime_us"
    assert str(applied["plan"]["sysctl"][rt]) == read(lab, HOST, "/proc/sys/kernel/sched_rt_runtime_us")
    t0 = time.monotonic()
    rc, doc, proc = cli_json("baseline", "-i", inventory, "--name", "accepted", "--no-smoke")
    assert rc == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    took = {"baseline": time.monotonic() - t0}
    rc, doc, proc = cli_json("drift", "-i", inventory, "--timer", "hourly", "--no-smoke")
    took["--timer hourly"] = time.monotonic() - t0 - sum(took.values())
    assert rc == 0 and doc["hosts"][HOST]["timer"] == "hourly", proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ssh(
        lab, HOST, "systemctl is-enabled hostkit-drift.timer; systemctl is-active hostkit-drift.timer"
    ).split() == [
        "enabled",
        "active",
    ]
    t1 = time.monotonic()
    ssh(lab, HOST, "systemctl start hostkit-drift.service")  # a oneshot: returns when the run has ended
    took["the timer's run"] = time.monotonic() - t1
    got = guest_metrics(lab, prom)
    assert got["hostkit_drift_failed"] == 0 and got["hostkit_drift_state_drifted"] == 0, got
    assert got["hostkit_drift_latency_inconclusive"] == 1, got  # not measured
    try:
        ssh(lab, HOST, f"sysctl -qw {rt}=500000")  # the seed's budget, as an upgrade's sysctl file would put back
        ssh(lab, HOST, "systemctl start hostkit-drift.service")
        got = guest_metrics(lab, prom)
        assert got["hostkit_drift_state_drifted"] == 1 and got["hostkit_drift_differences"] == 1, got
        assert ssh(lab, HOST, "systemctl show -p Result --value hostkit-drift.service").strip() == "success"
        said = ssh(lab, HOST, "journalctl -q -o cat -u hostkit-drift.service")
        assert '"undoing a planned value"' in said and rt in said, said
    finally:
        ssh(lab, HOST, f"sysctl -qw {rt}={applied['plan']['sysctl'][rt]}")
    t1 = time.monotonic()
    rc, doc, proc = cli_json("drift", "-i", inventory, "--timer", "off")
    assert rc == 0 and doc["hosts"][HOST]["timer"] == "off", proc.stdout[-2000:]
    took["--timer off"] = time.monotonic() - t1
    print("\n" + ", ".join(f"{k} {v:.0f} s" for k, v in took.items()) + f"; in all {time.monotonic() - t0:.0f} s")
    left = ssh(
        lab,
        HOST,
        f"ls /etc/systemd/system/hostkit-drift.* /var/lib/hostkit/drift {prom} 2>/dev/null; systemctl is-active hostkit-drift.timer",
        check=False,
    )
    assert left.split() == ["inactive"], left


@pytest.fixture(scope="module")
def rolled_back(lab, inventory, applied):
    t0 = time.monotonic()
    rc, doc, proc = cli_json("rollback", "-i", inventory)
    assert rc == 0, f"rollback failed: {proc.stdout[-3000:]} {proc.stderr[-3000:]}"
    print(f"\nrollback took {time.monotonic() - t0:.0f} s")
    rc, facts, proc = cli_json("facts", "-i", inventory)
    assert rc == 0, proc.stderr[-2000:]
    return {"rollback": doc, "kernel": facts["hosts"][HOST]["facts"]["kernel"], **tuned_state(lab)}


def test_rollback_gives_tuned_its_profile_and_next_boot_back(lab, tuned_first, rolled_back):
    assert rolled_back["service"] == "active"
    assert rolled_back["active"] == "Current active profile: cpu-partitioning"
    assert rolled_back["kernel"]["next_boot_cmdline"] == tuned_first["cmdline"]  # the boot tuned had
    assert read(lab, HOST, "/etc/tuned/bootcmdline") == tuned_first["bootcmdline"]
    now = etc_boot_hashes(lab, HOST)
    changed = {p for p in set(tuned_first["hashes"]) | set(now) if tuned_first["hashes"].get(p) != now.get(p)}
    assert changed - TUNED_REBUILT - {GRUBENV} == set(), sorted(changed)
    if GRUBENV in changed:
        assert GRUBENV not in tuned_first["hashes"]
        assert [v for v in read(lab, HOST, GRUBENV).splitlines() if not v.startswith("#")] == GRUBENV_VARS
