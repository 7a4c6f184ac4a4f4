"""Facts on odd firmware: packages without ids, guests without DMI. Sysroot fixtures
changed the way such firmware shows itself in sysfs."""

from __future__ import annotations

import json

import pytest

from hostkit.core.cpulist import format_cpulist, format_mask, parse_cpulist
from hostkit.facts import gather


def _cpu_topology(root):
    return sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*/topology"))


def test_package_id_minus_one_groups_cpus_by_the_kernel_s_package_lists(sysroot_copy):
    root = sysroot_copy("xeon-8480-snc2-ht")
    want = gather(str(root))["topology"]
    for topo in _cpu_topology(root):
        (topo / "physical_package_id").write_text("-1\n")
    got = gather(str(root))["topology"]
    assert (got["sockets"], got["sockets_cpus"], got["cores_per_socket"]) == (
        2,
        want["sockets_cpus"],
        want["cores_per_socket"],
    )
    assert [c["socket"] for c in got["per_cpu"]] == [c["socket"] for c in want["per_cpu"]]
    assert got["numa_per_socket"] == want["numa_per_socket"] == 2


def test_package_id_minus_one_without_list_files_reads_the_hex_masks(sysroot_copy):
    root = sysroot_copy("xeon-8480-snc2-ht")
    want = gather(str(root))["topology"]
    for topo in _cpu_topology(root):
        (topo / "physical_package_id").write_text("-1\n")
        (topo / "package_cpus_list").unlink()
        (topo / "core_siblings_list").unlink()
    got = gather(str(root))["topology"]
    assert (got["sockets"], got["sockets_cpus"]) == (2, want["sockets_cpus"])


def test_package_id_minus_one_with_no_package_information_at_all_is_one_package_per_cpu(sysroot_copy):
    """Nothing says which CPUs share a package: each CPU stands alone (what the kernel itself would show)."""
    root = sysroot_copy("kvm-small")
    for topo in _cpu_topology(root):
        (topo / "physical_package_id").write_text("-1\n")
        for leaf in ("package_cpus_list", "core_siblings_list", "package_cpus", "core_siblings"):
            (topo / leaf).unlink(missing_ok=True)
    got = gather(str(root))["topology"]
    assert got["sockets"] == len(got["per_cpu"]) and [c["socket"] for c in got["per_cpu"]] == list(
        range(got["sockets"])
    )


def _pci_device(root, slot: str, vendor: str, device: str, subsystem: str = "0000:0000", irq: int = 0):
    """One PCI device the way the kernel shows it: /sys/devices/pci0000:00/<slot> with its ID files,
    linked from /sys/bus/pci/devices, and its line in /proc/bus/pci/devices (drivers/pci/proc.c:
    bus and devfn, vendor and device, irq, 7 region starts and 7 sizes, the driver)."""
    bus, number = slot.split(":")[1], slot.split(":")[2]
    real = root / f"sys/devices/pci0000:{bus}/{slot}"
    real.mkdir(parents=True)
    sub_vendor, sub_device = subsystem.split(":")
    for leaf, value in (
        ("vendor", vendor),
        ("device", device),
        ("subsystem_vendor", sub_vendor),
        ("subsystem_device", sub_device),
        ("irq", irq),
    ):
        (real / leaf).write_text(f"{value if leaf == 'irq' else '0x' + value}\n")
    link = root / "sys/bus/pci/devices" / slot
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(f"../../../devices/pci0000:{bus}/{slot}")
    dev, fn = number.split(".")
    line = f"{bus}{int(dev, 16) << 3 | int(fn):02x}\t{vendor}{device}\t{irq:x}" + "\t" + "\t".join(["0".rjust(16)] * 14)
    proc = root / "proc/bus/pci/devices"
    proc.parent.mkdir(parents=True, exist_ok=True)
    with proc.open("a") as f:
        f.write(line + "\t\n")


def _bare_metal_without_dmi(sysroot_copy):
    root = sysroot_copy("epyc-9634-nps1")  # bare metal: no hypervisor flag, no kvm-clock
    for leaf in ("sys_vendor", "product_name"):
        (root / "sys/class/dmi/id" / leaf).unlink()
    assert gather(str(root))["virtualization"]["virtual"] is False
    _pci_device(root, "0000:00:00.0", "1022", "14d8")  # the EPYC host bridge the fixture stands for
    assert gather(str(root))["virtualization"]["virtual"] is False
    return root


# pci.ids: 15ad VMware, 80ee InnoTek (VirtualBox), 5853 XenSource, 1414 Microsoft (Hyper-V), 1af4 and 1b36
# Red Hat (virtio; QEMU's own devices). Devices: VMware SVGA II, VirtualBox Guest Service, Xen Platform
# Device, Hyper-V virtual VGA, virtio 1.0 network device, QEMU PCIe Host bridge.
@pytest.mark.parametrize(
    "vendor,device,hypervisor",
    [
        ("15ad", "0405", "vmware"),
        ("80ee", "cafe", "oracle"),
        ("5853", "0001", "xen"),
        ("1414", "5353", "microsoft"),
        ("1af4", "1041", "kvm"),
        ("1b36", "0008", "kvm"),
    ],
)
def test_hypervisor_from_pci_vendor_when_dmi_is_missing(sysroot_copy, vendor, device, hypervisor):
    root = _bare_metal_without_dmi(sysroot_copy)
    _pci_device(root, "0000:00:07.0", vendor, device)
    v = gather(str(root))["virtualization"]
    assert (v["hypervisor"], v["virtual"]) == (hypervisor, True)
    assert v["evidence"] == [f"no DMI; PCI device 0000:00:07.0 vendor 0x{vendor}"]
    # no hypervisor flag either: the guest hides, and its topology cannot be trusted
    assert v["deceptive_topology"] and "hides itself" in v["reasons"][0] and "0x" + vendor in v["reasons"][0]


def test_a_qemu_chipset_is_known_by_its_subsystem_vendor(sysroot_copy):
    """QEMU's i440FX host bridge is Intel's 8086:1237 with subsystem 1af4:1100 ("Qemu virtual machine")."""
    root = _bare_metal_without_dmi(sysroot_copy)
    _pci_device(root, "0000:00:01.0", "8086", "1237", subsystem="1af4:1100")
    v = gather(str(root))["virtualization"]
    assert v["hypervisor"] == "kvm"
    assert v["evidence"] == ["no DMI; PCI device 0000:00:01.0 subsystem_vendor 0x1af4"]


# lscpu (sys-utils/lscpu-virt.c, has_pci_device()) names a guest from /proc/bus/pci/devices by these
# vendor:device pairs where CPUID and DMI are silent; its vendor names (lscpu.c hv_vendors[]).
LSCPU_PCI = [("5853", "0001", "Xen", "xen"), ("15ad", "0710", "VMware", "vmware"), ("80ee", "beef", "Oracle", "oracle")]


@pytest.mark.parametrize("vendor,device,lscpu_vendor,hypervisor", LSCPU_PCI, ids=[c[3] for c in LSCPU_PCI])
def test_pci_hypervisors_agree_with_lscpu(sysroot_copy, vendor, device, lscpu_vendor, hypervisor):
    root = _bare_metal_without_dmi(sysroot_copy)
    assert _lscpu_vendor(root) is None
    _pci_device(root, "0000:00:02.0", vendor, device, irq=11)
    assert gather(str(root))["virtualization"]["hypervisor"] == hypervisor
    assert _lscpu_vendor(root) == lscpu_vendor


def test_a_virtualbox_guest_that_hides_is_named_by_its_pci_devices(sysroots):
    """The fixture virtualbox-hidden: no hypervisor flag, no DMI, VirtualBox's PCI devices. lscpu
    --sysroot names it from /proc/bus/pci/devices; hostkit from /sys/bus/pci/devices."""
    root = sysroots["virtualbox-hidden"]
    assert not (root / "sys/class/dmi/id").exists()
    assert " hypervisor" not in (root / "proc/cpuinfo").read_text()
    service = root / "sys/bus/pci/devices/0000:00:04.0"
    assert service.is_symlink() and service.resolve() == (root / "sys/devices/pci0000:00/0000:00:04.0").resolve()
    assert [(service / f).read_text() for f in ("vendor", "device")] == ["0x80ee\n", "0xcafe\n"]
    v = gather(str(root))["virtualization"]
    assert (v["hypervisor"], v["virtual"], v["deceptive_topology"]) == ("oracle", True, True)
    assert v["evidence"] == ["no DMI; PCI device 0000:00:02.0 vendor 0x80ee"]
    assert "hides itself" in v["reasons"][0]
    assert _lscpu_vendor(root) == "Oracle"


def test_a_guest_that_shows_its_hypervisor_flag_does_not_hide(sysroot_copy):
    root = sysroot_copy("virtualbox-hidden")
    cpuinfo = root / "proc/cpuinfo"
    cpuinfo.write_text(cpuinfo.read_text().replace("bmi1 bmi2", "bmi1 bmi2 hypervisor"))
    v = gather(str(root))["virtualization"]
    assert v["hypervisor"] == "oracle"
    assert not any("hides itself" in r for r in v["reasons"])


def test_the_bare_metal_plan_on_the_hidden_guest_is_refused(sysroots, capsys):
    """Refused as on every guest: exit 3, the reason named."""
    from hostkit.cli import main

    rc = main(["plan", "--sysroot", str(sysroots["virtualbox-hidden"]), "--profile", "bare-metal-inference", "--json"])
    refused = json.loads(capsys.readouterr().out)["refused"]
    assert rc == 3
    assert any("hides itself" in r for r in refused), refused


def test_pci_vendor_is_not_read_when_dmi_names_the_machine(sysroot_copy):
    """A virtio NIC in a bare-metal server (DMI present, naming real hardware) does not make it a guest."""
    root = sysroot_copy("epyc-9634-nps1")
    (root / "sys/bus/pci/devices/0000:41:00.0").mkdir(parents=True)
    (root / "sys/bus/pci/devices/0000:41:00.0/vendor").write_text("0x1af4\n")
    assert gather(str(root))["virtualization"]["virtual"] is False


# ----------------------------------------------------------------------------- topology as real dumps show it
# Each case changes a fixture the way a real machine's dump shows it; util-linux's lscpu --sysroot,
# reading the same tree, is the oracle (tests/unit/test_fixtures_lscpu.py's comparison).


def _agrees_with_lscpu(root):
    from tests.unit.test_fixtures_lscpu import assert_agrees, lscpu

    facts = gather(str(root))
    assert_agrees(facts, lscpu(root))
    return facts["topology"]


def test_siblings_from_the_masks_when_a_kernel_gives_no_list_files(sysroot_copy):
    """Kernels before 2.6.28 (and dumps of them) have thread_siblings and core_siblings masks only."""
    root = sysroot_copy("epyc-9654-nps4-smt")
    want = gather(str(root))["topology"]
    for topo in _cpu_topology(root):
        for leaf in (
            "core_cpus_list",
            "thread_siblings_list",
            "package_cpus_list",
            "core_siblings_list",
            "core_cpus",
            "package_cpus",
        ):
            (topo / leaf).unlink(missing_ok=True)
    got = _agrees_with_lscpu(root)
    assert (got["threads_per_core"], got["cores"], got["sockets_cpus"]) == (2, want["cores"], want["sockets_cpus"])


def test_per_cpu_online_files_when_there_is_no_online_list(sysroot_copy):
    root = sysroot_copy("epyc-9634-nps1")
    cpu = root / "sys/devices/system/cpu"
    (cpu / "online").unlink()
    for n in (6, 7):
        (cpu / f"cpu{n}/online").write_text("0\n")
    # as a kernel shows offline CPUs: out of their node's list and mask too
    node = root / "sys/devices/system/node/node0"
    cpus = parse_cpulist((node / "cpulist").read_text()) - {6, 7}
    (node / "cpulist").write_text(format_cpulist(cpus) + "\n")
    (node / "cpumap").write_text(format_mask(cpus, len(list(cpu.glob("cpu[0-9]*")))) + "\n")
    got = _agrees_with_lscpu(root)
    assert got["offline"] == "6-7" and not parse_cpulist(got["online"]) & {6, 7}


def test_sysfs_values_ending_in_a_nul_read_as_the_kernel_tools_read_them(sysroot_copy):
    """Some kernels end sysfs values with "\\n\\0": read as lscpu and hwloc read them, not refused."""
    root = sysroot_copy("epyc-9634-nps1")
    want = gather(str(root))["topology"]
    cpu = root / "sys/devices/system/cpu"
    for leaf in ("online", "possible", "present"):
        (cpu / leaf).write_bytes((cpu / leaf).read_bytes().rstrip(b"\n") + b"\n\x00")
    for topo in _cpu_topology(root):
        for f in topo.iterdir():
            f.write_bytes(f.read_bytes().rstrip(b"\n") + b"\n\x00")
    got = _agrees_with_lscpu(root)
    assert (got["online"], got["cores"], got["sockets_cpus"]) == (want["online"], want["cores"], want["sockets_cpus"])


def test_two_packages_the_firmware_gave_one_id_stay_two(sysroot_copy):
    """Single-core CPUs whose firmware sets physical_package_id 0 on both while the kernel's package
    masks (and /proc/cpuinfo's physical id) say they are separate packages: two sockets, not one."""
    root = sysroot_copy("kvm-small")
    topos = _cpu_topology(root)
    assert len(topos) >= 2
    for n, topo in enumerate(topos):
        (topo / "physical_package_id").write_text("0\n")
        for leaf in ("package_cpus_list", "core_siblings_list", "core_cpus_list", "thread_siblings_list"):
            (topo / leaf).write_text(f"{n}\n")
        for leaf in ("package_cpus", "core_siblings", "core_cpus", "thread_siblings"):
            (topo / leaf).write_text(f"{1 << n:x}\n")
    got = gather(str(root))["topology"]
    assert got["sockets"] == len(topos) and got["cores_per_socket"] == 1
    assert [c["socket"] for c in got["per_cpu"]] == list(range(len(topos)))


# ----------------------------------------------------------------------------- hypervisors without DMI strings


def _no_dmi_strings(sysroot_copy):
    root = sysroot_copy("kvm-small")
    for f in (root / "sys/class/dmi/id").glob("*"):
        f.unlink()
    for dev in (root / "sys/bus/pci/devices").glob("*"):
        (dev / "vendor").unlink(missing_ok=True)
    cpuinfo = root / "proc/cpuinfo"  # no CPUID hypervisor flag and no kvm-clock either: only the platform tells
    cpuinfo.write_text(cpuinfo.read_text().replace(" hypervisor", ""))
    (root / "sys/devices/system/clocksource/clocksource0/available_clocksource").unlink(missing_ok=True)
    assert gather(str(root))["virtualization"]["hypervisor"] is None
    return root


def _lscpu_vendor(root) -> str | None:
    from tests.unit.test_fixtures_lscpu import lscpu

    return lscpu(root).get("Hypervisor vendor")


def test_a_virtualbox_guest_known_by_its_raw_smbios_table(sysroot_copy, tmp_path):
    """No /sys/class/dmi/id strings, but the kernel's raw SMBIOS table. dmidecode reading the same
    table is the oracle (lscpu --sysroot does not read the table of a tree that is not running)."""
    import shutil
    import subprocess

    from tests.smbios_gen import dump_bin, end_of_table, system_information

    root = _no_dmi_strings(sysroot_copy)
    raw = system_information("innotek GmbH", "VirtualBox") + end_of_table(0xFEFF)
    table = root / "sys/firmware/dmi/tables/DMI"
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_bytes(raw)
    v = gather(str(root))["virtualization"]
    assert (v["hypervisor"], v["virtual"]) == ("oracle", True)
    assert v["evidence"][0] == "DMI from the raw SMBIOS table (no /sys/class/dmi/id)"
    if shutil.which("dmidecode") is None:
        pytest.skip("dmidecode is not installed (make setup installs it): the table is not cross-checked")
    (tmp_path / "dump.bin").write_bytes(dump_bin(raw))
    out = subprocess.run(
        ["dmidecode", "--from-dump", str(tmp_path / "dump.bin"), "-t", "1"], capture_output=True, text=True, check=True
    ).stdout
    assert "Manufacturer: innotek GmbH" in out and "Product Name: VirtualBox" in out, out


@pytest.mark.parametrize(
    "sysinfo, name, lscpu_vendor",
    [
        (
            "Manufacturer:         IBM\nType:                 2964\nLPAR Name:            LP01\n"
            "VM00 Name:            LINUX1\nVM00 Control Program: z/VM    6.3.0\n",
            "zvm",
            "IBM",
        ),
        (
            "Manufacturer:         IBM\nType:                 8561\nLPAR Name:            LP02\n"
            "VM00 Name:            guest1\nVM00 Control Program: KVM/Linux\n",
            "kvm",
            "KVM",
        ),
        (
            "Manufacturer:         IBM\nType:                 3906\nLPAR Number:          3\nLPAR Name:            LP03\n",
            "prsm",
            "IBM",
        ),
    ],
    ids=["zvm", "s390-kvm", "lpar"],
)
def test_ibm_z_guests_and_lpars_from_proc_sysinfo(sysroot_copy, sysinfo, name, lscpu_vendor):
    root = _no_dmi_strings(sysroot_copy)
    (root / "proc/sysinfo").write_text(sysinfo)
    assert gather(str(root))["virtualization"]["hypervisor"] == name
    assert _lscpu_vendor(root) == lscpu_vendor


def test_a_powervm_lpar_from_the_device_tree(sysroot_copy):
    root = _no_dmi_strings(sysroot_copy)
    dt = root / "proc/device-tree"
    dt.mkdir(parents=True)
    (dt / "ibm,partition-name").write_bytes(b"lpar1\0")
    (dt / "hmc-managed?").write_bytes(b"\0\0\0\1")
    assert gather(str(root))["virtualization"]["hypervisor"] == "powervm"
    assert _lscpu_vendor(root) == "pHyp"


def _zero_steal(root):
    """/proc/stat with the steal column (the 8th value) zero on every line: no steal clock."""
    stat = root / "proc/stat"
    lines = []
    for line in stat.read_text().splitlines():
        if line.startswith("cpu"):
            name, *vals = line.split()
            vals[7] = "0"
            line = " ".join([name, *vals])
        lines.append(line)
    stat.write_text("\n".join(lines) + "\n")


def test_a_vmware_guest_without_a_steal_clock_is_named_in_facts_plan_and_diagnosis(sysroot_copy):
    """VMware keeps a steal clock for a guest only with stealclock.enable in its .vmx (the kernel's
    vmware_is_stealclock_available()); without one steal reads 0 on every CPU whatever happens."""
    from hostkit.plan import build_plan
    from hostkit.plan.planner import NO_STEAL_CLOCK
    from hostkit.profiles import load_profile
    from hostkit.smoke.diagnose import diagnose

    root = sysroot_copy("vmware-88vcpu")
    seen = gather(str(root))
    assert seen["virtualization"]["steal_reported"] is True  # the seed guest: 4% steal since boot
    assert NO_STEAL_CLOCK not in build_plan(seen, load_profile("vmware-guest")).warnings
    _zero_steal(root)
    blind = gather(str(root))
    assert blind["virtualization"]["steal_reported"] is False and blind["steal"]["cpus_with_steal"] == ""
    assert NO_STEAL_CLOCK in build_plan(blind, load_profile("vmware-guest")).warnings
    result = {
        "deschedule_ms": {"p999": 5.0, "max": 9.0, "n": 100000},
        "target_p999_ms": 1.0,
        "duration_s": 10.0,
        "sched_fifo": {"used": False},
        "cpu": 9,
    }
    causes = [c for c in diagnose(result, {}, blind) if c["evidence"].startswith("no steal clock")]
    assert [(c["cause"], c["confidence"]) for c in causes] == [("hypervisor_stall", "possible")]
    assert not [c for c in diagnose(result, {}, seen) if c["evidence"].startswith("no steal clock")]
    # bare metal has no steal clock to miss
    assert gather(str(sysroot_copy("epyc-9634-nps1")))["virtualization"]["steal_reported"] is None
