"""A small generator of SMBIOS tables with Memory Device (type 17) and System Information (type 1)
structures, for sysroot fixtures.

Field offsets: DMTF SMBIOS Reference Specification (DSP0134), "Memory Device (Type 17)" (the layout
of edk2's SMBIOS_TABLE_TYPE17, SMBIOS 2.8 fields: a 28h-byte formatted area); see hostkit/facts/dmi.py.
``dump_bin`` wraps a table the way ``dmidecode --dump-bin`` writes one (a 64-bit SMBIOS 3.0 entry
point at offset 0, the table at 20h), so ``dmidecode --from-dump`` can read it back.
"""

from __future__ import annotations

import struct

DDR5 = 0x22  # Memory Type
DIMM = 0x09  # Form Factor
SYNCHRONOUS = 0x0080  # Type Detail bit 7


def _strings(strings: list[str]) -> bytes:
    if not strings:
        return b"\0\0"
    return b"".join(s.encode("ascii") + b"\0" for s in strings) + b"\0"


def memory_device(
    handle: int,
    locator: str,
    bank: str,
    size_mb: int,
    speed_mts: int,
    manufacturer: str = "Samsung",
    part: str = "M321R4GA3BB6-CQKET",
) -> bytes:
    """One type 17 structure; ``size_mb`` 0 is an empty slot (no speed, no manufacturer)."""
    f = bytearray(0x28)
    f[0], f[1] = 17, len(f)
    struct.pack_into("<H", f, 0x02, handle)
    struct.pack_into("<H", f, 0x04, 0x1000)  # Physical Memory Array handle
    struct.pack_into("<H", f, 0x06, 0xFFFE)  # no error information
    struct.pack_into("<H", f, 0x08, 80 if size_mb else 0xFFFF)  # total width (DDR5 ECC: 80)
    struct.pack_into("<H", f, 0x0A, 64 if size_mb else 0xFFFF)  # data width
    if size_mb >= 0x7FFF:
        struct.pack_into("<H", f, 0x0C, 0x7FFF)
        struct.pack_into("<I", f, 0x1C, size_mb)
    else:
        struct.pack_into("<H", f, 0x0C, size_mb)
    f[0x0E], f[0x0F] = DIMM, 0
    f[0x10], f[0x11] = 1, 2  # Device Locator, Bank Locator: strings 1 and 2
    f[0x12] = DDR5 if size_mb else 0x02  # unknown type in an empty slot
    struct.pack_into("<H", f, 0x13, SYNCHRONOUS if size_mb else 0x0004)  # 0x0004: unknown
    struct.pack_into("<H", f, 0x15, speed_mts if size_mb else 0)
    strings = [locator, bank]
    if size_mb:
        strings += [manufacturer, part]
        f[0x17], f[0x1A] = 3, 4  # Manufacturer, Part Number
        f[0x1B] = 2  # Attributes: rank 2
        struct.pack_into("<H", f, 0x20, speed_mts)  # Configured Memory Speed
        struct.pack_into("<HHH", f, 0x22, 1100, 1100, 1100)  # DDR5 1.1 V
    return bytes(f) + _strings(strings)


def system_information(manufacturer: str, product: str, handle: int = 0x0100) -> bytes:
    """One type 1 structure (System Information, DSP0134 7.2): Manufacturer and Product Name strings
    at 04h and 05h, the 16-byte UUID at 08h, Wake-up Type at 18h (SMBIOS 2.1: 19h bytes)."""
    f = bytearray(0x19)
    f[0], f[1] = 1, len(f)
    struct.pack_into("<H", f, 0x02, handle)
    f[0x04], f[0x05] = 1, 2
    f[0x18] = 0x06  # Wake-up Type: power switch
    return bytes(f) + _strings([manufacturer, product])


def end_of_table(handle: int) -> bytes:
    return bytes([127, 4]) + struct.pack("<H", handle) + b"\0\0"


def table(devices: list[tuple[str, str, int, int]]) -> bytes:
    """(locator, bank locator, size MB, speed MT/s) per slot -> the raw table (as sysfs shows it)."""
    out = b"".join(memory_device(0x1100 + i, *d) for i, d in enumerate(devices))
    return out + end_of_table(0xFEFF)


def dump_bin(raw: bytes) -> bytes:
    """``raw`` behind an SMBIOS 3.0 entry point, as ``dmidecode --dump-bin`` lays a dump out."""
    ep = bytearray(0x18)
    ep[0:5] = b"_SM3_"
    ep[6], ep[7], ep[8], ep[9], ep[10] = 0x18, 3, 0, 0, 1  # length, version 3.0, docrev, revision
    struct.pack_into("<I", ep, 0x0C, len(raw))
    struct.pack_into("<Q", ep, 0x10, 0x20)
    ep[5] = (-sum(ep)) & 0xFF
    return bytes(ep) + b"\0" * (0x20 - len(ep)) + raw


def epyc_4_of_12(populated: str = "ACGI", size_mb: int = 32768, speed: int = 4800) -> list[tuple[str, str, int, int]]:
    """Two EPYC 9004 sockets, 12 channels (A-L) each, one DIMM per channel, AMD's naming
    (bank locator "P<socket> CHANNEL <letter>"); only the channels in ``populated`` hold a DIMM."""
    return [
        ("DIMM 0", f"P{s} CHANNEL {ch}", size_mb if ch in populated else 0, speed)
        for s in range(2)
        for ch in "ABCDEFGHIJKL"
    ]


def xeon_all_8(size_mb: int = 65536, speed: int = 4800) -> list[tuple[str, str, int, int]]:
    """Two Sapphire Rapids sockets, 8 channels (A-H), one DIMM each, Intel's naming (CPU0_DIMM_A1)."""
    return [(f"CPU{s}_DIMM_{ch}1", f"NODE {s}", size_mb, speed) for s in range(2) for ch in "ABCDEFGH"]
