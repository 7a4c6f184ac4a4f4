"""Helpers for the real-kernel (QEMU) lab tests: start guests, talk to them over SSH."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from hostkit.lab.lab import VM_REBOOT_PROBE_TIMEOUT, Lab
from hostkit.lab.vm_image import missing_tools
from hostkit.tunables import SYSCTLS

# Guests listen on their own port, apart from the sshd lab's (2322) and a developer's (2222).
VM_PORT = int(os.environ.get("HOSTKIT_TEST_VM_PORT", "2522"))
# Boots are TCG here (KVM does not run guests on this machine kind): minutes, not seconds, and
# more when make test runs two VM lanes beside the lab suite (a 4-vCPU guest booting beside two
# 2-vCPU guests on 2 cores missed hostkit's 600 s default): the tests wait up to 20 minutes.
REBOOT_TIMEOUT = int(os.environ.get("HOSTKIT_TEST_REBOOT_TIMEOUT", "1200"))
BOOT_TIMEOUT = float(os.environ.get("HOSTKIT_TEST_BOOT_TIMEOUT", "1200"))


def require_vm_tools() -> None:
    missing = missing_tools()
    if missing:
        pytest.skip("the real-kernel lab needs " + ", ".join(missing) + " (make setup installs them)")
    if os.geteuid() != 0:
        pytest.skip("building the guest image (mmdebstrap, chroot) needs root")


# Guests started and kernels booted in this test session (printed at its end by conftest.py, and
# appended to $HOSTKIT_TEST_BOOT_LOG, one JSON line per lab, for make test's total over its lanes).
GUEST_LOG: list[dict] = []


def start_vm_lab(
    directory: Path,
    vms: list[tuple[str, str]],
    port: int = VM_PORT,
    hosts: list[tuple[str, str]] | None = None,
    resume: bool = True,
    bmc: bool = False,
) -> Lab:
    require_vm_tools()
    lab = Lab(directory)
    lab.up(
        host_specs=hosts or [],
        vm_specs=vms,
        port=port,
        say=lambda m: print("vm lab:", m, flush=True),
        boot_timeout=BOOT_TIMEOUT,
        resume=resume,
        bmc=bmc,
    )
    return lab


def stop_vm_lab(lab: Lab, user: str) -> None:
    """``lab.down()``, after counting its guests' starts and kernel boots for the session's summary."""
    try:
        boots = lab.guest_boots()
        started = {h.name: h.started for h in lab.hosts() if h.kind == "vm"}
        record = {"user": user, "guests": {g: {"started": started.get(g), "boots": n} for g, n in boots.items()}}
        GUEST_LOG.append(record)
        for h in lab.hosts():
            close_shared_ssh(lab, h.name)
        log = os.environ.get("HOSTKIT_TEST_BOOT_LOG")
        if log:
            with open(log, "a") as f:
                f.write(json.dumps(record) + "\n")
    finally:
        lab.down()


def guest_summary(records: list[dict]) -> str:
    """One line: guests started (resumed / booted) and real kernel boots, over ``records``."""
    guests = [g for r in records for g in r["guests"].values()]
    resumed = sum(1 for g in guests if g["started"] == "resumed")
    return (
        f"real-kernel guests: {len(guests)} started ({resumed} resumed from a saved state, "
        f"{len(guests) - resumed} booted); {sum(g['boots'] for g in guests)} kernel boots in all"
    )


def vm_lab_fixture(
    name: str, vms: list[tuple[str, str]], hosts: list[tuple[str, str]] | None = None, bmc: bool = False
):
    """A module-scoped ``lab`` fixture: the module's guests (and sysroot hosts), started once and
    stopped after its last test. In a test module: ``lab = vm_lab_fixture("vm-gaps", [(VM, "small")])``."""

    @pytest.fixture(scope="module")
    def lab(tmp_path_factory):
        started = start_vm_lab(tmp_path_factory.mktemp(name) / "lab", vms, hosts=hosts, bmc=bmc)
        try:
            yield started
        finally:
            stop_vm_lab(started, name)

    return lab


# The tests' own commands on a guest share one SSH connection per guest (as Ansible's do): a new
# connection costs a TCG guest about 1.3 s of CPU for its key exchange and session, a multiplexed
# command about 0.2 s. A call with its own options does not share it, and is never run twice: the
# reboot probe, which must connect afresh, and a command that takes the guest down (OWN_CONNECTION:
# a retry after its connection dropped would run it again, maybe in the next boot). stop_vm_lab
# closes the masters.
OWN_CONNECTION = ("-oControlPath=none",)


def _control_path(lab: Lab) -> str:
    return str(Path(tempfile.gettempdir()) / f"hk-test-{lab.dir.stat().st_ino}-%C")  # short: 108 bytes


def ssh(lab: Lab, host: str, command: str, check: bool = True, timeout: int = 300, options: tuple = ()) -> str:
    shared = ("-o", "ControlMaster=auto", "-o", f"ControlPath={_control_path(lab)}", "-o", "ControlPersist=300")
    argv = ["ssh", "-F", str(lab.ssh_config), *(options or shared), host, command]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if proc.returncode == 255 and not options:  # a master whose guest went away (a reboot): connect afresh
        close_shared_ssh(lab, host)
        proc = subprocess.run(
            ["ssh", "-F", str(lab.ssh_config), host, command], capture_output=True, text=True, timeout=timeout
        )
    if check and proc.returncode != 0:
        raise AssertionError(f"ssh {host} {command!r}: rc={proc.returncode} {proc.stderr.strip()[-500:]}")
    return proc.stdout


def close_shared_ssh(lab: Lab, host: str) -> None:
    """Stop the tests' shared connection to ``host`` (none running: nothing to do)."""
    subprocess.run(
        ["ssh", "-F", str(lab.ssh_config), "-o", f"ControlPath={_control_path(lab)}", "-O", "exit", host],
        capture_output=True,
        timeout=30,
    )


def reboot(lab, host: str) -> None:
    """Reboot the guest and wait (bounded) until it answers with a new boot id; each probe gives up
    after the lab's reboot-probe timeout, as hostkit's reboot tasks do (hostkit/lab/lab.py)."""
    boot_id = read(lab, host, "/proc/sys/kernel/random/boot_id")
    ssh(lab, host, "systemctl reboot", check=False, timeout=60, options=OWN_CONNECTION)
    close_shared_ssh(lab, host)
    wait_for_new_boot(lab, host, boot_id)


def wait_for_new_boot(lab, host: str, boot_id: str) -> None:
    """Until the guest answers SSH with a boot id other than ``boot_id`` (bounded by REBOOT_TIMEOUT)."""
    deadline = time.monotonic() + REBOOT_TIMEOUT
    probe = (f"-oConnectTimeout={VM_REBOOT_PROBE_TIMEOUT}",)
    while time.monotonic() < deadline:
        try:
            now = ssh(lab, host, "cat /proc/sys/kernel/random/boot_id", timeout=60, options=probe).strip()
        except (AssertionError, subprocess.TimeoutExpired):  # not answering yet
            now = boot_id
        if now != boot_id:
            return
        time.sleep(5)
    raise AssertionError(f"{host} did not come back within {REBOOT_TIMEOUT} s")


def qemu_waits(lab: Lab, host: str) -> dict[int, tuple[int, int]]:
    """Per thread of the guest's QEMU, from this host's kernel (/proc/<pid>/task/<tid>/schedstat):
    time run and time runnable but waiting for a host CPU, in ns."""
    pid = lab.qemu_pid(host)
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            run, wait, _ = (int(x) for x in (task / "schedstat").read_text().split())
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
        out[int(task.name)] = (run, wait)
    return out


def waited_share(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]) -> float:
    """Of the time QEMU's threads wanted a host CPU between two ``qemu_waits``, the share they waited
    for one: ground truth, from the hypervisor's side, of how much it stopped the guest."""
    run = sum(after[t][0] - before[t][0] for t in after if t in before)
    wait = sum(after[t][1] - before[t][1] for t in after if t in before)
    return wait / (run + wait) if run + wait else 0.0


def qemu_wait_during(lab: Lab, host: str, run):
    """``run()``'s result, and the share of the time meanwhile that the guest's QEMU threads waited
    for a host CPU (:func:`waited_share`)."""
    before = qemu_waits(lab, host)
    out = run()
    return out, waited_share(before, qemu_waits(lab, host))


def read(lab: Lab, host: str, path: str) -> str:
    return ssh(lab, host, "cat " + shlex.quote(path)).strip()


def inventory_for(lab: Lab, path: Path, host_vars: dict[str, dict]) -> Path:
    inv = yaml.safe_load(lab.inventory.read_text())
    for name, extra in host_vars.items():
        inv["all"]["children"]["lab"]["hosts"][name].update(extra)
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return path


def cmdline_tokens(text: str) -> list[str]:
    return text.split()


def device_irqs(lab: Lab, host: str) -> dict[int, dict]:
    """Numbered IRQs of devices (not timer/IPI lines): name, per-CPU counts, effective affinity."""
    script = r"""
import json, os
lines = open('/proc/interrupts').read().splitlines()
ncpu = len(lines[0].split())
out = {}
for line in lines[1:]:
    head, _, rest = line.partition(':')
    if not head.strip().isdigit():
        continue
    parts = rest.split()
    counts = [int(x) for x in parts[:ncpu]]
    irq = int(head)
    def rd(p):
        try:
            return open(p).read().strip()
        except OSError:
            return None
    out[irq] = {'name': parts[-1] if len(parts) > ncpu else '', 'counts': counts,
                'effective': rd(f'/proc/irq/{irq}/effective_affinity_list'),
                'affinity': rd(f'/proc/irq/{irq}/smp_affinity_list')}
print(json.dumps(out))
"""
    out = ssh(lab, host, "python3 -c " + shlex.quote(script))
    return {int(k): v for k, v in json.loads(out).items()}


def etc_boot_hashes(lab: Lab, host: str) -> dict[str, str]:
    """sha256 and mode of every regular file under /etc and /boot on the guest (``find -xdev -type
    f``: not across mounts, symlinks not followed), in one process (a fork per file cost a TCG
    guest 18 s of CPU)."""
    script = r"""
import hashlib, json, os, stat
out = {}
for top in ('/etc', '/boot'):
    dev = os.lstat(top).st_dev
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if os.lstat(os.path.join(d, x)).st_dev == dev]
        for f in files:
            p = os.path.join(d, f)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                with open(p, 'rb') as fh:
                    out[p] = '%o %s' % (stat.S_IMODE(st.st_mode), hashlib.sha256(fh.read()).hexdigest())
print(json.dumps(out))
"""
    return json.loads(ssh(lab, host, "python3 -c " + shlex.quote(script)))


# Every sysctl hostkit tunes, key -> /proc/sys path (one table: hostkit.tunables).
SYSCTL_PATHS = {s.key: s.proc_path for s in SYSCTLS}


# What the guest itself shows when SSH does not answer, read through its guest agent (a virtio-serial
# channel, no network): load, the busiest threads with their class, RT priority, nice and CPU, sshd's
# state and the kernel's last words.
POSTMORTEM_SH = (
    "cat /proc/loadavg; ps -eLo pid,tid,cls,rtprio,ni,psr,pcpu,stat,comm --sort=-pcpu | head -12; "
    "systemctl is-active ssh; cat /proc/sys/kernel/sched_rt_runtime_us; dmesg | tail -8"
)


def guest_postmortem(lab: Lab, host: str, timeout: float = 90.0) -> str:
    """The guest's serial console tail and its own view (:data:`POSTMORTEM_SH`, through the guest agent),
    for a failure message when the guest stopped answering SSH; says what could not be read."""
    h = next(h for h in lab.hosts() if h.name == host)
    guest = lab._guest(h)
    out = [f"console: {guest.console_tail(8)}"]
    try:
        agent = guest.agent(timeout=30)
        agent.sync(30)
        rc, stdout, stderr = agent.exec(["/bin/sh", "-c", POSTMORTEM_SH], timeout)
        out.append(f"guest agent (rc {rc}):\n{stdout}{stderr}")
    except Exception as e:
        out.append(f"guest agent: {e}")
    return "\n".join(out)


def vcpu_places(lab: Lab, host: str) -> list[str]:
    """Where each vCPU of the guest is, from QEMU's monitor: halted (idle), or its instruction pointer,
    privilege level (0: the kernel) and RFLAGS (0x200: interrupts enabled)."""
    h = next(h for h in lab.hosts() if h.name == host)
    out = []
    with lab._guest(h).qmp(timeout=30) as qmp:
        for cpu in qmp.call("query-cpus-fast", 30):
            i = cpu["cpu-index"]
            qmp.call("human-monitor-command", 30, **{"command-line": f"cpu {i}"})
            regs = str(qmp.call("human-monitor-command", 30, **{"command-line": "info registers"}))
            m = re.search(r"RIP=([0-9a-f]+) RFL=([0-9a-f]+).*?CPL=(\d).*?HLT=(\d)", regs)
            out.append(
                f"cpu{i} " + ("?" if not m else "halted" if m[4] == "1" else f"rip {m[1]} cpl {m[3]} rflags {m[2]}")
            )
    return out


def reset_hung_guest(lab: Lab, host: str) -> str:
    """Reset a guest that answers neither SSH nor its guest agent, and wait for it to answer again (a
    boot through its GRUB, into the kernel arguments it had). What its vCPUs were doing is returned
    for the test's output.

    Seen in three runs of make test, always during numa2's RT smoke after apply (busy-polling worker,
    sched_switch traced) with this host saturated (QEMU waiting for a host CPU 51-81% of the time): all
    four vCPUs spinning in the guest kernel's smp_call_function_many_cond (the wait for other CPUs to run
    a cross-CPU call) with interrupts enabled, for minutes. A QEMU pause and resume did not revive it; a
    reset does. Whether TCG (QEMU 7.2 here) or the guest kernel is at fault is not settled: the hang
    has not been seen outside TCG on a saturated host (docs/dev/testing.md)."""
    seen = vcpu_places(lab, host)
    h = next(h for h in lab.hosts() if h.name == host)
    with lab._guest(h).qmp(timeout=30) as qmp:
        qmp.call("system_reset", 30)
    close_shared_ssh(lab, host)
    wait_for_new_boot(lab, host, "")  # any boot id: the guest answers again
    return f"its vCPUs: {'; '.join(seen)}; reset, it booted again"
