"""Is this a virtual machine, which hypervisor, and can its topology be trusted?"""

from __future__ import annotations

from hostkit.facts.dmi import system_information
from hostkit.facts.sysroot import Sysroot

# DMI vendor / product substrings -> hypervisor name (as systemd-detect-virt names them).
_DMI_VENDORS = [
    ("vmware", "vmware"),
    ("qemu", "kvm"),
    ("kvm", "kvm"),
    ("amazon ec2", "amazon"),
    ("google", "google"),
    ("microsoft corporation", "microsoft"),
    ("innotek", "oracle"),
    ("virtualbox", "oracle"),
    ("xen", "xen"),
    ("parallels", "parallels"),
    ("openstack", "kvm"),
    ("bochs", "bochs"),
]

# PCI vendor IDs of devices only a hypervisor emulates -> hypervisor (named as above), for guests whose
# firmware shows no DMI: VMware 0x15ad, VirtualBox 0x80ee (InnoTek Systemberatung GmbH), Xen 0x5853
# (XenSource), Hyper-V 0x1414 (Microsoft), QEMU 0x1af4 (virtio, Red Hat / Qumranet) and 0x1b36 (QEMU's own
# devices, Red Hat), as pci.ids names them. Each device's vendor and subsystem vendor are read: QEMU gives
# the Intel chipset it emulates the subsystem 1af4:1100 ("Qemu virtual machine"). util-linux's lscpu does
# the same where CPUID and DMI are silent (has_pci_device() in sys-utils/lscpu-virt.c, from
# /proc/bus/pci/devices: Xen 5853:0001, VMware 15ad:0710, VirtualBox 80ee:beef). Real hardware of these
# vendors (Microsoft's long-gone MN-120 NICs) has DMI, so the table is never read there.
_PCI_VENDORS = {
    "0x15ad": "vmware",
    "0x80ee": "oracle",
    "0x5853": "xen",
    "0x1414": "microsoft",
    "0x1af4": "kvm",
    "0x1b36": "kvm",
}
_PCI_VENDOR_FILES = ("vendor", "subsystem_vendor")
_PCI_EVIDENCE = "no DMI; PCI device"

# A guest this large spans physical NUMA nodes on any host sold today; if it
# still shows a single NUMA node, the hypervisor has flattened NUMA away.
LARGE_GUEST_CPUS = 32


def detect_hypervisor(sr: Sysroot, cpuinfo: dict) -> tuple[str | None, list[str]]:
    """The hypervisor's name (or ``None`` on bare metal) and the evidence for it."""
    evidence: list[str] = []
    name: str | None = None
    vendor = (sr.read("sys/class/dmi/id/sys_vendor", "") or "").strip()
    product = (sr.read("sys/class/dmi/id/product_name", "") or "").strip()
    if not vendor and not product:  # a dump or kernel with the raw SMBIOS table but not its sysfs files
        vendor, product = (x or "" for x in system_information(sr))
        if vendor or product:
            evidence.append("DMI from the raw SMBIOS table (no /sys/class/dmi/id)")
    dmi = f"{vendor} {product}".lower()
    for needle, hv in _DMI_VENDORS:
        if needle in dmi:
            # "Microsoft Corporation" makes real hardware too; only its "Virtual Machine" is Hyper-V.
            if hv == "microsoft" and "virtual" not in dmi:
                continue
            name = hv
            evidence.append(f"DMI sys_vendor={vendor!r} product_name={product!r}")
            break
    if not vendor and not product:
        pci = _pci_hypervisor(sr)
        if pci:
            name, device, field, vid = pci
            evidence.append(f"{_PCI_EVIDENCE} {device} {field} {vid}")
    if name is None:
        platform = _platform_hypervisor(sr)
        if platform:
            name = platform[0]
            evidence.append(platform[1])
    hv_type = (sr.read("sys/hypervisor/type", "") or "").strip()
    if hv_type:
        name = name or hv_type
        evidence.append(f"/sys/hypervisor/type={hv_type!r}")
    clocksources = (sr.read("sys/devices/system/clocksource/clocksource0/available_clocksource", "") or "").split()
    if "kvm-clock" in clocksources:
        name = name or "kvm"
        evidence.append("kvm-clock clocksource")
    if "hypervisor" in cpuinfo["flags"]:
        name = name or "unknown"
        evidence.append("'hypervisor' flag in /proc/cpuinfo")
    return name, evidence


def _platform_hypervisor(sr: Sysroot) -> tuple[str, str] | None:
    """(hypervisor, evidence) on platforms with no DMI at all, where lscpu finds them too: IBM Z
    (``/proc/sysinfo``: a z/VM or KVM guest's control program, else an LPAR under PR/SM) and POWER
    (a partition name and an HMC in the device tree: a PowerVM LPAR, pHyp); ``/proc/xen``."""
    sysinfo = sr.read("proc/sysinfo", "") or ""
    if sysinfo:
        control = next(
            (
                line.split(":", 1)[1].strip()
                for line in sysinfo.splitlines()
                if line.startswith("VM00 Control Program:")
            ),
            "",
        )
        if "z/VM" in control:
            return "zvm", f"/proc/sysinfo: VM00 Control Program: {control}"
        if "KVM" in control:
            return "kvm", f"/proc/sysinfo: VM00 Control Program: {control}"
        if any(line.startswith("LPAR ") for line in sysinfo.splitlines()):
            return "prsm", "/proc/sysinfo: an LPAR (IBM PR/SM)"
    if sr.exists("proc/device-tree/ibm,partition-name") and sr.exists("proc/device-tree/hmc-managed?"):
        return "powervm", "/proc/device-tree: ibm,partition-name and hmc-managed? (a PowerVM LPAR, pHyp)"
    if sr.is_dir("proc/xen"):
        return "xen", "/proc/xen"
    return None


def _pci_hypervisor(sr: Sysroot) -> tuple[str, str, str, str] | None:
    """(hypervisor, PCI device, vendor file, vendor id) of the first device that only a hypervisor
    emulates (:data:`_PCI_VENDORS`), by its vendor or subsystem vendor."""
    for dev in sr.listdir("sys/bus/pci/devices"):
        for field in _PCI_VENDOR_FILES:
            vid = (sr.read(f"sys/bus/pci/devices/{dev}/{field}", "") or "").strip().lower()
            if vid in _PCI_VENDORS:
                return _PCI_VENDORS[vid], dev, field, vid
    return None


def hides_itself(hypervisor: str | None, evidence: list[str], cpuinfo: dict) -> str | None:
    """Why the topology of a guest that hides its hypervisor cannot be trusted (None: it does not
    hide): no 'hypervisor' CPU flag and no DMI, found only by the devices it emulates. Its kernel
    runs as on bare metal (no paravirtual clock, no steal time), so the vCPUs, sockets and NUMA
    nodes it shows are whatever the hypervisor chose, and nothing in the guest says what it took."""
    if hypervisor is None or "hypervisor" in cpuinfo["flags"]:
        return None
    pci = [e for e in evidence if e.startswith(_PCI_EVIDENCE)]
    if not pci or len(pci) != len(evidence):
        return None
    return (
        f"the hypervisor ({hypervisor}) hides itself: no 'hypervisor' CPU flag, no DMI, found only by "
        f"an emulated PCI device ({pci[0].removeprefix(_PCI_EVIDENCE).strip()}); the guest kernel runs "
        "as on bare metal, so its topology and steal time cannot be trusted"
    )


def read_virtualization(sr: Sysroot, cpuinfo: dict, topo: dict, steal: dict) -> dict:
    """The hypervisor, whether the topology it shows can be trusted, and whether the guest sees steal
    time at all (``steal_reported``: some CPU has steal ticks since boot; None on bare metal). A
    guest whose hypervisor keeps no steal clock for it (VMware without ``stealclock.enable = "TRUE"``
    in the .vmx: the kernel's vmware_is_stealclock_available() finds none) reads 0 whatever the
    hypervisor takes."""
    hypervisor, evidence = detect_hypervisor(sr, cpuinfo)
    reasons: list[str] = []
    hidden = hides_itself(hypervisor, evidence, cpuinfo)
    if hidden:
        reasons.append(hidden)
    if hypervisor:
        cpus = len(topo["per_cpu"])
        nodes = len([n for n in topo["numa_nodes"] if n["cpus"]])
        if cpus > 1 and topo["sockets"] == cpus and topo["cores_per_socket"] == 1 and topo["threads_per_core"] == 1:
            reasons.append(
                f"every vCPU is shown as its own socket ({topo['sockets']} sockets x 1 core x 1 thread): "
                "the guest cannot see which vCPUs share a physical core, cache or socket"
            )
        if nodes == 1 and cpus >= LARGE_GUEST_CPUS:
            reasons.append(
                f"{cpus} vCPUs in one NUMA node: a guest this large spans physical NUMA nodes, "
                "so the hypervisor hides where memory lives and first-touch placement is blind"
            )
        if topo["numa_per_socket"] == 0 and nodes > 1:
            reasons.append(f"{nodes} NUMA nodes span {topo['sockets']} sockets: virtual sockets do not match NUMA")
    return {
        "hypervisor": hypervisor,
        "virtual": hypervisor is not None,
        "evidence": evidence,
        "deceptive_topology": bool(reasons),
        "reasons": reasons,
        "steal_reported": bool(steal["cpus_with_steal"]) if hypervisor else None,
    }
