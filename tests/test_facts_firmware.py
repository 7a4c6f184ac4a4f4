"""Facts on odd firmware (issue 12): packages without ids, guests without DMI. Sysroot fixtures
changed the way such firmware shows itself in sysfs."""

from __future__ import annotations

import pytest

from hostkit.facts import gather


def _cpu_topology(root):
    return sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*/topology"))


def test_package_id_minus_one_groups_cpus_by_the_kernel_s_package_lists(sysroot_copy):
    root = sysroot_copy("xeon-8480-snc2-ht")
    want = gather(str(root))["topology"]
    for topo in _cpu_topology(root):
        (topo / "physical_package_id").write_text("-1\n")
    got = gather(str(root))["topology"]
    assert (got["sockets"], got["sockets_cpus"], got["cores_per_socket"]) == \
        (2, want["sockets_cpus"], want["cores_per_socket"])
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
    assert got["sockets"] == len(got["per_cpu"]) and [c["socket"] for c in got["per_cpu"]] == list(range(got["sockets"]))


@pytest.mark.parametrize("vendor,hypervisor", [("0x15ad", "vmware"), ("0x80ee", "oracle"),
                                               ("0x1414", "microsoft"), ("0x1af4", "kvm")])
def test_hypervisor_from_pci_vendor_when_dmi_is_missing(sysroot_copy, vendor, hypervisor):
    root = sysroot_copy("epyc-9634-nps1")  # bare metal: no hypervisor flag, no kvm-clock
    for leaf in ("sys_vendor", "product_name"):
        (root / "sys/class/dmi/id" / leaf).unlink()
    assert gather(str(root))["virtualization"]["virtual"] is False
    for dev, vid in (("0000:00:00.0", "0x1022"), ("0000:00:07.0", vendor)):
        (root / "sys/bus/pci/devices" / dev).mkdir(parents=True)
        (root / "sys/bus/pci/devices" / dev / "vendor").write_text(vid + "\n")
    v = gather(str(root))["virtualization"]
    assert (v["hypervisor"], v["virtual"]) == (hypervisor, True)
    assert v["evidence"] == [f"no DMI; PCI device 0000:00:07.0 vendor {vendor}"]


def test_pci_vendor_is_not_read_when_dmi_names_the_machine(sysroot_copy):
    """A virtio NIC in a bare-metal server (DMI present, naming real hardware) does not make it a guest."""
    root = sysroot_copy("epyc-9634-nps1")
    (root / "sys/bus/pci/devices/0000:41:00.0").mkdir(parents=True)
    (root / "sys/bus/pci/devices/0000:41:00.0/vendor").write_text("0x1af4\n")
    assert gather(str(root))["virtualization"]["virtual"] is False
