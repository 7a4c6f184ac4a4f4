"""Memory channels and speed from the SMBIOS table the kernel exposes raw
(``/sys/firmware/dmi/tables/DMI``), so a sysroot can carry a real machine's table.

The table is a sequence of structures: a formatted area (byte 0 type, byte 1 its length, bytes 2-3
the handle) followed by its strings, each NUL-terminated, the set ending with a second NUL
(two NULs when there are none); type 127 ends the table. Offsets of the Memory Device structure
(type 17) are those of the DMTF SMBIOS Reference Specification (DSP0134), section "Memory Device
(Type 17)", as laid out by the ``SMBIOS_TABLE_TYPE17`` struct of edk2's
``MdePkg/Include/IndustryStandard/SmBios.h``:

====  ======  =====================================================================
0Ch   WORD    Size: 0 no device installed, FFFFh unknown, 7FFFh see Extended Size;
              bit 15 set: the rest is in KB, else in MB
10h   BYTE    Device Locator (string number)
11h   BYTE    Bank Locator (string number)
15h   WORD    Speed, MT/s (0 unknown)
1Ch   DWORD   Extended Size, MB (SMBIOS 2.7+)
20h   WORD    Configured Memory Speed, MT/s (SMBIOS 2.7+)
====  ======  =====================================================================

Channels come from the vendors' locator names: AMD ``P0 CHANNEL A`` (socket 0, channel A) and
Intel ``CPU0_DIMM_A1`` (socket 0, channel A, slot 1). A device matching neither is counted as
unrecognised, and the channel facts stay unknown rather than guessed. Standard library only.
"""

from __future__ import annotations

import re
import struct

from hostkit.core.sysroot import HostFileError, read_bytes
from hostkit.errors import FactsError
from hostkit.facts.sysroot import Sysroot

TABLE = "sys/firmware/dmi/tables/DMI"
MEMORY_DEVICE = 17
END_OF_TABLE = 127

# (pattern, what it names): socket number and channel letter.
_CHANNEL_NAMES = (
    re.compile(r"\bP(\d+)[ _]CHANNEL[ _]([A-Z])\b", re.IGNORECASE),  # AMD: "P0 CHANNEL A"
    re.compile(r"\bCPU(\d+)_DIMM_([A-Z])\d+\b", re.IGNORECASE),  # Intel: "CPU0_DIMM_A1"
)


def structures(raw: bytes):
    """Each structure as (type, handle, formatted area, strings); stops at type 127 or a malformed one."""
    pos = 0
    while pos + 4 <= len(raw):
        stype, length = raw[pos], raw[pos + 1]
        if length < 4 or pos + length > len(raw):
            return  # a truncated table: what came before still counts
        handle = struct.unpack_from("<H", raw, pos + 2)[0]
        formatted = raw[pos : pos + length]
        end = raw.find(b"\0\0", pos + length)
        if end < 0:
            return
        text = raw[pos + length : end]
        strings = [s.decode("ascii", "replace").strip() for s in text.split(b"\0")] if text else []
        yield stype, handle, formatted, strings
        if stype == END_OF_TABLE:
            return
        pos = end + 2


def _word(f: bytes, off: int) -> int | None:
    return struct.unpack_from("<H", f, off)[0] if len(f) >= off + 2 else None


def _string(f: bytes, off: int, strings: list[str]) -> str | None:
    if len(f) <= off or f[off] == 0 or f[off] > len(strings):
        return None
    return strings[f[off] - 1]


def memory_device(f: bytes, strings: list[str]) -> dict:
    """One type 17 structure: locators, size in MB (0: empty slot; None: unknown), speeds in MT/s."""
    size = _word(f, 0x0C)
    if size in (None, 0xFFFF):
        size_mb = None
    elif size == 0x7FFF and len(f) >= 0x20:
        size_mb = struct.unpack_from("<I", f, 0x1C)[0] & 0x7FFFFFFF
    elif size & 0x8000:
        size_mb = (size & 0x7FFF) // 1024
    else:
        size_mb = size
    speed = _word(f, 0x15)
    configured = _word(f, 0x20)
    return {
        "locator": _string(f, 0x10, strings),
        "bank_locator": _string(f, 0x11, strings),
        "size_mb": size_mb,
        "speed_mts": speed or None,
        "configured_speed_mts": configured or None,
    }


def channel_of(device: dict) -> tuple[int, str] | None:
    """(socket, channel letter) from the device's locator or bank locator, by the vendors' naming."""
    for text in (device["bank_locator"], device["locator"]):
        for pattern in _CHANNEL_NAMES:
            m = pattern.search(text or "")
            if m:
                return int(m.group(1)), m.group(2).upper()
    return None


SYSTEM_INFORMATION = 1


def read_table(sr: Sysroot) -> bytes | None:
    """The raw SMBIOS table the kernel exposes (None without one); see read_bytes for what is refused."""
    try:
        return read_bytes(sr.path(TABLE), 1 << 20)
    except HostFileError as exc:
        raise FactsError(str(exc)) from None


def system_information(sr: Sysroot) -> tuple[str | None, str | None]:
    """(manufacturer, product name) of the SMBIOS System Information structure (type 1), as the
    ``sys_vendor`` and ``product_name`` of ``/sys/class/dmi/id`` give them: for dumps and kernels
    that have the raw table but not those files."""
    raw = read_table(sr)
    for t, _, f, strings in structures(raw or b""):
        if t == SYSTEM_INFORMATION:
            return _string(f, 0x04, strings), _string(f, 0x05, strings)
    return None, None


def read_memory(sr: Sysroot) -> dict:
    """The memory facts: every slot, populated channels per socket, the slowest populated speed."""
    raw = read_table(sr)
    if raw is None:
        return {
            "source": None,
            "slots": 0,
            "populated": 0,
            "total_mb": None,
            "speed_mts": None,
            "channels": None,
            "unrecognised": 0,
        }
    devices = [memory_device(f, s) for t, _, f, s in structures(raw) if t == MEMORY_DEVICE]
    populated = [d for d in devices if d["size_mb"]]
    channels: dict[int, dict[str, bool]] = {}
    unrecognised = 0
    for d in devices:
        where = channel_of(d)
        if where is None:
            unrecognised += 1
            continue
        socket, channel = where
        slots = channels.setdefault(socket, {})
        slots[channel] = slots.get(channel, False) or bool(d["size_mb"])
    speeds = [d["configured_speed_mts"] or d["speed_mts"] for d in populated]
    speeds = [s for s in speeds if s]
    return {
        "source": "/" + TABLE,
        "slots": len(devices),
        "populated": len(populated),
        "total_mb": sum(d["size_mb"] for d in populated) if populated else 0,
        "speed_mts": min(speeds) if speeds else None,
        # socket -> channels seen (a slot in it) and channels populated; None when no locator was recognised
        "channels": (
            {
                str(s): {"total": len(c), "populated": sorted(ch for ch, on in c.items() if on)}
                for s, c in sorted(channels.items())
            }
            if channels
            else None
        ),
        "unrecognised": unrecognised,
    }
