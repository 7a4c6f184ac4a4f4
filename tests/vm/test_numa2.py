"""The real-kernel lab, `numa2` guest: apply, reboot, prove on the live kernel, roll back, reboot.

One QEMU guest (2 sockets x 2 cores, one NUMA node per socket, a virtio NIC and a 4-queue
virtio disk), booted through its own GRUB, with a real irqbalance, behind the lab's Redfish BMC
(an HPE ProLiant's BIOS, which powers the guest). It starts as the seed's misconfigured host:
``kernel.sched_rt_runtime_us=500000`` persisted in ``/etc/sysctl.d``. Every assertion reads the
live guest over SSH (or its BMC), never a file hostkit wrote.

The inventory also asks two BIOS settings that change no topology (C-states off, which on this
BIOS needs the Custom workload profile that unlocks it): ``apply --reboot`` PATCHes them, writes
the kernel arguments, and then makes ONE power cycle through the BMC, which brings both; its
``rollback --reboot`` puts the BIOS and the boot configuration back with one cycle too.

The steps share one guest (each boot costs minutes under TCG) through module fixtures that
run in a fixed order: ``seeded`` (the host before hostkit) -> ``tuned`` (``apply --reboot``) ->
``rolled_back`` (``rollback --reboot``). Tests are ordered to use them in that order.

Overcommit: this guest has 4 vCPUs on a 2-CPU machine (2:1); latency figures inside it are
compared before/after in the same guest and run conditions, never against absolute numbers.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

import pytest

from hostkit.core.cpulist import parse_cpulist
from hostkit.core.kthreads import PF_KTHREAD, PF_NO_SETAFFINITY
from tests.labutil import cli, cli_json
from tests.vmutil import (
    REBOOT_TIMEOUT,
    SYSCTL_PATHS,
    device_irqs,
    etc_boot_hashes,
    guest_postmortem,
    inventory_for,
    qemu_wait_during,
    read,
    reset_hung_guest,
    ssh,
    vm_lab_fixture,
)

HOST = "numa2"
# Files that change on every boot by themselves, not by hostkit (none expected under /etc and
# /boot with this image; listed here so a new one is a decision, not a silent exclusion).
BOOT_VOLATILE: set[str] = set()
# The seed's setting, persisted as the operator had it: RT throttling parks FIFO for 500 ms/s.
SEED_SYSCTL = "/etc/sysctl.d/50-seed-rt-runtime.conf"
# A busy-polling worker (SCHED_FIFO for each batch), its CPU's sched_switch traced: each RT-throttle
# park is one event. Before hostkit, the seed's worker (SCHED_FIFO for every batch: --fifo always);
# after apply, the default worker (--fifo budget: SCHED_FIFO kept under the plan's budget).
RT_SMOKE = ["--duration", "8", "--infer-ms", "1", "--clients", "1", "--busy-poll", "--trace-sched", "--json"]
SEED_WORKER = ["--fifo", "always"]
# Above this share of the run spent waiting for a host CPU (QEMU's threads, measured by this host),
# the host stops the guest's vCPUs as much as the seed's throttle parks its worker (half of every
# period), and the guest's figures measure this machine's load: a CI run beside the lab suite and a
# second VM lane found p50 8.6 ms descheduled after apply against 0.016 ms before. The guest's RT
# accounting itself bends then (a stopped vCPU's time is charged as run time).
HOST_WAIT_MAX = 0.55


lab = vm_lab_fixture("vm-numa2", [(HOST, "numa2")], bmc=True)
# The BIOS the apply sets beside the OS (the lab BMC's HPE ProLiant DL385 Gen10 Plus v2): the values
# before and after, for the checks of the one power cycle and of the rollback.
BIOS = {"power_profile": "custom", "c_states": "off"}
BIOS_BEFORE = {"WorkloadProfile": "GeneralPowerEfficientCompute", "MinProcIdlePower": "C6"}
BIOS_AFTER = {"WorkloadProfile": "Custom", "MinProcIdlePower": "NoCStates"}


@pytest.fixture(scope="module")
def controller_state(tmp_path_factory):
    """The controller's state directory of the module's apply and rollback: one operator's, so the
    rollback finds the BIOS journal the apply wrote (each test has its own state directory)."""
    path = tmp_path_factory.mktemp("numa2-controller")

    @contextlib.contextmanager
    def held():
        was = os.environ.get("HOSTKIT_STATE_DIR")
        os.environ["HOSTKIT_STATE_DIR"] = str(path)
        try:
            yield path
        finally:
            if was is None:
                os.environ.pop("HOSTKIT_STATE_DIR", None)
            else:
                os.environ["HOSTKIT_STATE_DIR"] = was

    return held


def bios_now(inventory) -> tuple[dict, dict]:
    """The attributes of BIOS_BEFORE's names in effect, and what is pending, as the BMC says."""
    rc, doc, proc = cli_json("bios", "facts", "-i", inventory)
    assert rc == 0, proc.stderr[-2000:]
    b = doc["hosts"][HOST]["bios"]
    return {k: b["attributes"][k] for k in BIOS_BEFORE}, b["pending"]


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    # One housekeeping core per node (the guest has 2 per node), isolation allowed on this
    # (non-deceptive) VM; no containerd/kubelet in the guest image.
    return inventory_for(
        lab,
        tmp_path_factory.mktemp("vm-inv") / "inventory.yml",
        {
            HOST: {
                "hostkit_overrides": {
                    "reserve_per_node": 1,
                    "allow_virtual": True,
                    "containerd": {"enabled": False},
                    "kubelet": {"enabled": False},
                    "bios": BIOS,
                }
            }
        },
    )


def live_state(lab) -> dict:
    irqs = device_irqs(lab, HOST)
    return {
        "cmdline": read(lab, HOST, "/proc/cmdline"),
        "sysctl": {k: read(lab, HOST, p) for k, p in SYSCTL_PATHS.items()},
        "irq_affinity": {n: i["affinity"] for n, i in irqs.items()},
        "isolated": read(lab, HOST, "/sys/devices/system/cpu/isolated"),
    }


@pytest.fixture(scope="module")
def seeded(lab):
    """The host before hostkit: the seed's RT budget persisted, then a measurement under it."""
    ssh(lab, HOST, f"echo 'kernel.sched_rt_runtime_us = 500000' > {SEED_SYSCTL} && sysctl -q -p {SEED_SYSCTL}")
    assert read(lab, HOST, "/proc/sys/kernel/sched_rt_runtime_us") == "500000"
    return {"hashes": etc_boot_hashes(lab, HOST), "live": live_state(lab)}


def rt_smoke(lab, inventory, *extra: str) -> tuple[dict, object, float]:
    """The RT smoke run on the guest: its report, the process, and the share of the run QEMU's threads
    waited for a host CPU (this host's schedstat)."""

    def run():
        return qemu_wait_during(lab, HOST, lambda: cli_json("smoke", "-i", inventory, *RT_SMOKE, *extra))

    (rc, doc, proc), waited = run()
    if doc and doc["hosts"][HOST].get("status") == "unreachable":
        # The guest hung under TCG (tests/vmutil.py: reset_hung_guest): said, reset, and the smoke runs again.
        print(
            f"\n{HOST} stopped answering during the RT smoke ({doc['hosts'][HOST].get('error')}): "
            f"{guest_postmortem(lab, HOST)}\n{reset_hung_guest(lab, HOST)}; the smoke runs again"
        )
        (rc, doc, proc), waited = run()
    assert rc in (0, 1), proc.stderr[-2000:]  # 1: MISSED or INCONCLUSIVE
    host = doc["hosts"][HOST]
    assert "deschedule_ms" in host, (
        f"no smoke report from {HOST} (QEMU waited for a host CPU {waited:.0%}): {host}\n" + guest_postmortem(lab, HOST)
    )
    return host, proc, waited


def throttled_share(report: dict) -> float:
    """Share of the run RT throttling parked the worker, from the guest kernel's sched_switch trace."""
    trace = report["sched_trace"]
    assert "error" not in trace, trace  # Debian's systemd mounts tracefs in the guest
    return trace["rt_throttled_ms"] / (report["duration_s"] * 1000)


@pytest.fixture(scope="module")
def rt_before(lab, inventory, seeded):
    """The seed's worker under the seed's budget. A run during which this host kept QEMU waiting
    for a CPU more than HOST_WAIT_MAX measured the host's load, not the guest's throttle (a CI run
    beside the lab suite: 36 inferences in 8 s, a 465 ms gap and no throttle park traced, QEMU
    waiting 79%): it is said and run once more (about a minute)."""
    doc, proc, waited = rt_smoke(lab, inventory, *SEED_WORKER)
    if waited > HOST_WAIT_MAX:
        print(
            f"\nthe seed's RT smoke ran while this host kept QEMU waiting {waited:.0%} "
            f"(load {os.getloadavg()[0]:.1f}, {doc['samples']} samples): it runs once more"
        )
        doc, proc, waited = rt_smoke(lab, inventory, *SEED_WORKER)
    return doc, proc, waited


@pytest.fixture(scope="module")
def tuned(lab, inventory, seeded, rt_before, controller_state):
    rc, plan_doc, proc = cli_json("plan", "-i", inventory)
    assert rc == 0, proc.stderr
    plan = plan_doc["hosts"][HOST]
    assert bios_now(inventory) == (BIOS_BEFORE, {})
    boots = lab.guest_boots()[HOST]
    t0 = time.monotonic()
    with controller_state():
        proc = cli(
            "apply",
            "-i",
            inventory,
            "--reboot",
            "--reboot-timeout",
            REBOOT_TIMEOUT,
            "--json",
            timeout=REBOOT_TIMEOUT + 900,
        )
    assert proc.returncode == 0, f"apply --reboot failed: {proc.stdout[-3000:]} {proc.stderr[-3000:]}"
    doc = json.loads(proc.stdout)
    print(f"\napply --reboot took {time.monotonic() - t0:.0f} s")
    return {"plan": plan, "apply": doc, "seconds": time.monotonic() - t0, "boots": boots}


def test_facts_match_the_qemu_topology(lab, inventory):
    rc, doc, proc = cli_json("facts", "-i", inventory)
    assert rc == 0, proc.stderr
    facts = doc["hosts"][HOST]["facts"]
    topo = facts["topology"]
    assert (topo["sockets"], topo["cores_per_socket"], topo["threads_per_core"], topo["cpus"]) == (2, 2, 1, 4)
    assert [(n["id"], n["cpus"]) for n in topo["numa_nodes"]] == [(0, "0-1"), (1, "2-3")]
    assert facts["virtualization"]["hypervisor"] == "kvm"  # SMBIOS "QEMU", the hypervisor CPUID flag
    live_irqs = device_irqs(lab, HOST)
    nic = next(n for n in facts["nics"] if n["name"].startswith("ens") or n["name"].startswith("eth"))
    virtio = ssh(lab, HOST, f"basename $(readlink /sys/class/net/{nic['name']}/device)").strip()  # e.g. virtio1
    nic_irqs = sorted(n for n, i in live_irqs.items() if i["name"].startswith(virtio + "-"))
    assert sorted(nic["irqs"]) == nic_irqs and len(nic_irqs) == 3  # config, input.0, output.0


def test_rt_throttling_named_on_the_seeds_budget(rt_before):
    doc, proc, waited = rt_before
    print(
        f"\nRT budget 500000, busy FIFO worker: deschedule_ms {doc['deschedule_ms']} over {doc['samples']} samples; "
        f"traced {doc['sched_trace']['rt_throttled']} throttle parks, {throttled_share(doc):.0%} of the run; "
        f"QEMU waited for a host CPU {waited:.0%} of it"
    )
    assert doc["sched_fifo"], f"the worker did not get SCHED_FIFO: {proc.stderr[-1000:]}"
    if waited > HOST_WAIT_MAX:
        pytest.skip(
            f"this host kept QEMU's runnable threads waiting {waited:.0%} of both runs (load "
            f"{os.getloadavg()[0]:.1f}): the guest's RT accounting measured this machine's load "
            f"({doc['samples']} samples, deschedule max {doc['deschedule_ms']['max']} ms, "
            f"{doc['sched_trace']['rt_throttled']} throttle parks traced); SCHED_FIFO is checked above"
        )
    # A busy FIFO worker at 500000/1000000 is parked for up to 500 ms of every second.
    assert doc["deschedule_ms"]["max"] >= 200, doc["deschedule_ms"]
    assert max((e["ms"] for e in doc["sched_trace"]["events"] if e["rt_throttled"]), default=0) >= 200, doc[
        "sched_trace"
    ]
    causes = [d["cause"] for d in doc["diagnosis"]]
    assert "rt_throttling" in causes, doc["diagnosis"]


def test_one_power_cycle_brings_the_bios_and_the_kernel_arguments(lab, inventory, tuned):
    """The BIOS PATCHed before the roles, the kernel arguments written by them, then one power cycle
    through the BMC: one kernel boot, every BIOS setting in effect, no reboot after it."""
    host = tuned["apply"]["hosts"][HOST]
    assert host["bios"]["cycles"] == 1 and host["bios"]["pending"] == BIOS_AFTER, host["bios"]
    assert host["after_bios"]["prediction"] == {"held": True, "misses": []}, host["after_bios"]
    assert not host["reboot_required"], host
    assert lab.guest_boots()[HOST] == tuned["boots"] + 1
    assert bios_now(inventory) == (BIOS_AFTER, {})
    print("BMC steps:", [(s["step"], s["seconds"]) for s in host["bios"]["steps"]])


def test_apply_reboot_boots_the_planned_arguments_once_each(lab, tuned):
    plan = tuned["plan"]
    tokens = read(lab, HOST, "/proc/cmdline").split()
    for key, value in plan["cmdline_set"].items():
        want = key if value is None else f"{key}={value}"
        assert tokens.count(want) == 1, (want, tokens)
        assert sum(1 for t in tokens if t.split("=", 1)[0] == key) == 1, (key, tokens)
    isolated = parse_cpulist(plan["isolated"])
    assert isolated, plan
    assert parse_cpulist(read(lab, HOST, "/sys/devices/system/cpu/isolated")) == isolated
    assert parse_cpulist(read(lab, HOST, "/sys/devices/system/cpu/nohz_full")) == isolated


# Every task's pid, comm, flags and Cpus_allowed_list, read in the guest from its live /proc.
TASKS_PY = (
    'import json, os\nout = []\nfor p in os.listdir("/proc"):\n    if not p.isdigit(): continue\n'
    '    try:\n        s = open("/proc/" + p + "/stat").read(); st = open("/proc/" + p + "/status").read()\n'
    '    except OSError: continue\n    f = s[s.rindex(")") + 2:].split()\n'
    '    cpus = [x.split(":", 1)[1].strip() for x in st.splitlines() if x.startswith("Cpus_allowed_list:")]\n'
    '    out.append([int(p), s[s.index("(") + 1:s.rindex(")")], int(f[6]), cpus[0]])\nprint(json.dumps(out))'
)


def test_no_movable_kernel_thread_on_an_isolated_cpu(lab, tuned):
    """After the reboot into nohz_full= (which places what kthreadd creates), the kthreads role, which runs
    after isolcpus' reboot, moved the rest (kswapd<N>, kcompactd<N> take their node's CPUs themselves on
    this kernel); its unit is enabled for the next boots."""
    assert ssh(lab, HOST, "systemctl is-enabled hostkit-kthreads.service").strip() == "enabled"
    tasks = json.loads(ssh(lab, HOST, f"python3 -c '{TASKS_PY}'"))
    isolated = parse_cpulist(tuned["plan"]["isolated"])
    kernel = [
        (pid, comm, cpus)
        for pid, comm, flags, cpus in tasks
        if flags & PF_KTHREAD and not flags & PF_NO_SETAFFINITY and not comm.startswith("irq/")
    ]
    assert any(comm.startswith("kswapd") for _, comm, _ in kernel), kernel
    assert [k for k in kernel if parse_cpulist(k[2]) & isolated] == [], tuned["plan"]["isolated"]
    # The unit itself, under the guest's systemd with the installed program: put kswapd back on
    # every CPU (as a boot leaves it on this kernel), start the unit, and it is moved off again.
    (kswapd,) = [pid for pid, comm, _ in kernel if comm == "kswapd0"]
    ssh(lab, HOST, f"taskset -pc 0-3 {kswapd} >/dev/null")
    assert parse_cpulist(read(lab, HOST, f"/proc/{kswapd}/status").split("Cpus_allowed_list:")[1].split()[0]) & isolated
    ssh(lab, HOST, "systemctl restart hostkit-kthreads.service")
    status = ssh(lab, HOST, "systemctl show -p ActiveState -p Result -p ExecMainStatus hostkit-kthreads.service")
    assert sorted(status.split()) == ["ActiveState=active", "ExecMainStatus=0", "Result=success"], status
    allowed = parse_cpulist(read(lab, HOST, f"/proc/{kswapd}/status").split("Cpus_allowed_list:")[1].split()[0])
    assert allowed and not allowed & isolated, (allowed, isolated)


def test_live_sysctls_match_the_plan(lab, tuned):
    for key, value in tuned["plan"]["sysctl"].items():
        assert read(lab, HOST, SYSCTL_PATHS[key]) == str(value), key


def test_movable_irqs_on_plan_cpus_with_irqbalance_running(lab, tuned):
    """60 s after boot with the real irqbalance running, the IRQs' one owner (hostkit banned it from
    every CPU but the IRQ CPUs and pinned none itself): no movable device IRQ effective on an
    isolated CPU, and device IRQ counts on isolated CPUs do not grow (managed per-queue IRQs of
    the virtio disk stay on their own CPU by kernel design: named and checked apart)."""
    irq = tuned["plan"]["irq"]
    assert (irq["owner"], irq["assignments"], irq["by_name"]) == ("irqbalance", {}, {}), irq
    assert parse_cpulist(irq["banned_cpulist"]) == parse_cpulist(tuned["plan"]["isolated"])
    assert read(lab, HOST, "/etc/default/irqbalance").count(f"IRQBALANCE_BANNED_CPULIST={irq['banned_cpulist']}") == 1
    assert ssh(lab, HOST, "systemctl is-active irqbalance").strip() == "active"
    uptime = float(read(lab, HOST, "/proc/uptime").split()[0])
    if uptime < 60:
        time.sleep(60 - uptime)
    isolated = parse_cpulist(tuned["plan"]["isolated"])
    irq_cpus = parse_cpulist(tuned["plan"]["irq_cpus"])
    first = device_irqs(lab, HOST)
    time.sleep(20)
    second = device_irqs(lab, HOST)
    managed = {n for n, i in first.items() if "-req." in i["name"]}  # virtio-blk per-queue: kernel-managed
    for n, info in second.items():
        if n in managed or info["effective"] is None:
            continue
        eff = parse_cpulist(info["effective"])
        assert not eff & isolated, f"IRQ {n} ({info['name']}) effective on {info['effective']}"
        if info["name"].endswith(("-input.0", "-output.0")):  # the NIC's queues: placed by irqbalance
            assert eff <= irq_cpus, f"NIC IRQ {n} ({info['name']}) effective on {info['effective']}"
        for cpu in isolated:
            assert second[n]["counts"][cpu] == first[n]["counts"][cpu], (
                f"IRQ {n} ({info['name']}) still fires on isolated CPU {cpu}"
            )


def test_audit_passes_with_nothing_pending(lab, inventory, tuned):
    rc, doc, proc = cli_json("audit", "-i", inventory, "--strict")
    assert rc == 0, json.dumps(doc)[-3000:]
    assert doc["hosts"][HOST]["status"] == "pass", doc["hosts"][HOST]


def test_smoke_worker_pinned_to_an_isolated_cpu(lab, inventory, tuned):
    rc, doc, proc = cli_json("smoke", "-i", inventory, "--duration", "4", "--infer-ms", "1")
    host = doc["hosts"][HOST]
    assert host["cpu"] in parse_cpulist(tuned["plan"]["isolated"]), host["cpu"]


@pytest.fixture(scope="module")
def rt_after(lab, inventory, tuned):
    return rt_smoke(lab, inventory)


def rt_budget_ms(plan: dict) -> float:
    """The longest park per period the plan's sched_rt_runtime_us allows."""
    runtime = int(plan["sysctl"]["kernel.sched_rt_runtime_us"])
    return (1_000_000 - runtime) / 1000 if runtime >= 0 else 0.0


def test_rt_budget_after_apply_is_the_plans_in_the_report(tuned, rt_after):
    after = rt_after[0]
    runtime = int(tuned["plan"]["sysctl"]["kernel.sched_rt_runtime_us"])
    assert after["probes"]["sched_rt_runtime_us"] == runtime, after["probes"]  # the live budget the run saw
    # Where the report names RT throttling from the run's figures, it states the plan's park budget:
    # "the budget parks it X ms per period" (a worker over its budget), or "the throttle's park of up
    # to X ms" (a worker kept under it by --fifo budget yet descheduled that long, seen under load).
    budget_ms = rt_budget_ms(tuned["plan"])
    rt = [d for d in after["diagnosis"] if d["cause"] == "rt_throttling" and not d["evidence"].startswith("traced:")]
    assert all(
        f"the budget parks it {budget_ms:g} ms per period" in d["evidence"]
        or f"the throttle's park of up to {budget_ms:g} ms" in d["evidence"]
        for d in rt
    ), rt


def test_rt_tail_after_apply_with_the_default_worker(tuned, rt_before, rt_after):
    """After apply, the default worker (--fifo budget) keeps its SCHED_FIFO time in every RT period
    under the plan's budget less 5%: what this guest's report shows, and the time the throttle
    parked it (the guest kernel's sched_switch trace) is a smaller share of the run than the seed's
    worker's at the seed's budget. Not zero: TCG charges a stopped vCPU's time to the running task
    (no steal time), so a host stall inside one SCHED_FIFO inference overruns a limit the worker can
    only check between inferences (2 parks in the first run of this test, QEMU waiting 52% of it;
    before --fifo budget the seed's worker was parked 243 ms and ~500 ms on average at 950000 too).
    On this machine's real kernel, where no stall is charged, tests/unit/test_smoke.py finds the default
    worker never parked. The p99 is held to the plan's park budget only where this host let QEMU run."""
    (before, _, waited_before), (after, _, waited) = rt_before, rt_after
    trace = after["sched_trace"]
    parks = [(e["at_s"], e["ms"]) for e in trace["events"] if e["rt_throttled"]]
    print(
        f"\nafter apply, default worker: deschedule_ms {after['deschedule_ms']} over {after['samples']} samples; "
        f"SCHED_FIFO {after['sched_fifo']}, duty {after['fifo_duty']}; traced throttle parks (at s, ms) {parks}, "
        f"{throttled_share(after):.1%} of the run (before, the seed's worker: {before['sched_trace']['rt_throttled']}, "
        f"{throttled_share(before):.1%}); QEMU waited for a host CPU {waited_before:.0%} / {waited:.0%}"
    )
    runtime = int(tuned["plan"]["sysctl"]["kernel.sched_rt_runtime_us"])
    limit_ms = (runtime - max(10_000, runtime // 20)) / 1000
    assert after["sched_fifo"]["policy"] == "budget" and after["sched_fifo"]["used"], after["sched_fifo"]
    assert after["sched_fifo"]["limit_ms_per_period"] == limit_ms, after["sched_fifo"]
    if waited > HOST_WAIT_MAX:
        pytest.skip(
            f"this host kept QEMU's runnable threads waiting {waited:.0%} of the run (load "
            f"{os.getloadavg()[0]:.1f}): the guest's tail measured this machine's load (deschedule p99 "
            f"{after['deschedule_ms']['p99']} ms, p999 {after['deschedule_ms']['p999']} ms; throttle parks "
            f"{parks}); the plan's budget and the worker's limit are checked above"
        )
    assert after["deschedule_ms"]["p99"] <= rt_budget_ms(tuned["plan"]), (after["deschedule_ms"], trace)
    if waited_before > HOST_WAIT_MAX:
        pytest.skip(
            f"the seed's run, to compare with, had QEMU waiting {waited_before:.0%} (its own test says so); "
            f"the p99 after apply is within the plan's budget"
        )
    assert throttled_share(after) < throttled_share(before), (before["sched_trace"], trace)


@pytest.fixture(scope="module")
def rolled_back(lab, inventory, tuned, controller_state):
    with controller_state():
        proc = cli(
            "rollback",
            "-i",
            inventory,
            "--reboot",
            "--reboot-timeout",
            REBOOT_TIMEOUT,
            "--json",
            timeout=REBOOT_TIMEOUT + 600,
        )
    assert proc.returncode == 0, (
        f"rollback --reboot failed: {proc.stdout[-3000:]} {proc.stderr[-3000:]}\n" + guest_postmortem(lab, HOST)
    )
    return json.loads(proc.stdout)


def test_rollback_reboot_restores_the_bios_in_the_same_one_cycle(lab, inventory, tuned, rolled_back):
    assert rolled_back["bios"][HOST]["cycles"] == 1, rolled_back["bios"]
    assert rolled_back["bios"][HOST]["restore"] == BIOS_BEFORE
    assert lab.guest_boots()[HOST] == tuned["boots"] + 2  # the apply's cycle, the rollback's
    assert bios_now(inventory) == (BIOS_BEFORE, {})


def test_rollback_reboot_restores_cmdline_files_and_live_values(lab, seeded, rolled_back):
    before = seeded["live"]
    after = live_state(lab)
    assert after["cmdline"] == before["cmdline"]
    assert after["isolated"] == before["isolated"] == ""
    assert after["sysctl"] == before["sysctl"]
    now = etc_boot_hashes(lab, HOST)
    changed = {p for p in set(seeded["hashes"]) | set(now) if seeded["hashes"].get(p) != now.get(p)} - BOOT_VOLATILE
    assert not changed, sorted(changed)
