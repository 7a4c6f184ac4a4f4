"""The SMBIOS memory-device parser (hostkit.facts.dmi) against dmidecode reading the same table, on a
generated EPYC table (4 of 12 channels per socket) and on this machine's own table where it has one."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from hostkit.facts.dmi import MEMORY_DEVICE, channel_of, memory_device, structures
from tests import smbios_gen

DMIDECODE = shutil.which("dmidecode")
LIVE_TABLE = Path("/sys/firmware/dmi/tables/DMI")


def ours(raw: bytes) -> list[dict]:
    return [memory_device(f, s) for t, _, f, s in structures(raw) if t == MEMORY_DEVICE]


def dmidecode_devices(dump: Path) -> list[dict]:
    """dmidecode's reading of every type 17 structure: size in MB (0: empty), locators, speeds."""
    out = subprocess.run(
        [DMIDECODE, "--from-dump", str(dump), "-t", "17"], capture_output=True, text=True, check=True
    ).stdout
    devices = []
    for block in out.split("\nHandle ")[1:]:
        fields = dict(re.findall(r"(?m)^\t([^:\t]+): (.*)$", block))
        size = fields["Size"]
        if size.startswith("No Module"):
            mb = 0
        else:
            n, unit = size.split()
            mb = int(n) * {"kB": 1 / 1024, "MB": 1, "GB": 1024, "TB": 1024 * 1024}[unit]

        def speed(k, fields=fields):
            return int(fields[k].split()[0]) if fields.get(k, "Unknown").split()[0].isdigit() else None

        devices.append(
            {
                "locator": fields["Locator"],
                "bank_locator": fields["Bank Locator"],
                "size_mb": int(mb),
                "speed_mts": speed("Speed"),
                "configured_speed_mts": speed("Configured Memory Speed"),
            }
        )
    return devices


@pytest.mark.skipif(DMIDECODE is None, reason="dmidecode is not installed (make setup installs it)")
def test_the_generated_epyc_table_reads_the_same_in_dmidecode(tmp_path):
    raw = smbios_gen.table(smbios_gen.epyc_4_of_12())
    dump = tmp_path / "epyc.bin"
    dump.write_bytes(smbios_gen.dump_bin(raw))
    theirs = dmidecode_devices(dump)
    assert len(theirs) == 24 and sum(1 for d in theirs if d["size_mb"]) == 8
    assert ours(raw) == theirs


@pytest.mark.skipif(DMIDECODE is None, reason="dmidecode is not installed (make setup installs it)")
def test_extended_size_and_kb_units_read_the_same_in_dmidecode(tmp_path):
    raw = smbios_gen.memory_device(0x10, "CPU0_DIMM_A1", "NODE 0", 131072, 5600)  # 128 GB: Extended Size
    kb = bytearray(smbios_gen.memory_device(0x11, "CPU0_DIMM_B1", "NODE 0", 512, 5600))
    struct.pack_into("<H", kb, 0x0C, 0x8000 | 512)  # bit 15: the size is in KB; 512 KB is under 1 MB
    table = raw + bytes(kb) + smbios_gen.end_of_table(0xFEFF)
    dump = tmp_path / "t.bin"
    dump.write_bytes(smbios_gen.dump_bin(table))
    theirs, mine = dmidecode_devices(dump), ours(table)
    assert [d["size_mb"] for d in mine] == [131072, 0] and theirs == mine
    assert channel_of(mine[0]) == (0, "A")


@pytest.mark.skipif(not LIVE_TABLE.exists(), reason="this machine exposes no /sys/firmware/dmi/tables/DMI")
@pytest.mark.skipif(DMIDECODE is None, reason="dmidecode is not installed (make setup installs it)")
def test_this_machine_s_table_reads_the_same_in_dmidecode(tmp_path):
    raw = LIVE_TABLE.read_bytes()
    dump = tmp_path / "live.bin"
    subprocess.run([DMIDECODE, "--dump-bin", str(dump)], check=True, capture_output=True)
    assert ours(raw) == dmidecode_devices(dump)


def test_a_truncated_table_keeps_the_structures_before_the_cut():
    raw = smbios_gen.table(smbios_gen.epyc_4_of_12())
    one = len(smbios_gen.memory_device(0x1100, "DIMM 0", "P0 CHANNEL A", 32768, 4800))
    assert len(ours(raw[: one + 10])) == 1


@pytest.mark.parametrize(
    "locator,bank,want",
    [
        ("DIMM 0", "P1 CHANNEL L", (1, "L")),
        ("CPU1_DIMM_H2", "NODE 1", (1, "H")),
        ("DIMM 0", "BANK 0", None),  # QEMU's naming: no channel, so no guess
    ],
)
def test_channel_names(locator, bank, want):
    assert channel_of({"locator": locator, "bank_locator": bank}) == want
