"""``facts["tuned"]``: whether tuned is installed and running, its active profile and what that
profile does to the kernel command line, read from the sysroot.

File names and formats are tuned's own (redhat-performance/tuned at v2.21.0, the RHEL 8.9
package, and at 2bfa442):

* ``tuned/consts.py``: ``ACTIVE_PROFILE_FILE = "/etc/tuned/active_profile"`` (the profile name,
  several names separated by blanks), ``PROFILE_MODE_FILE = "/etc/tuned/profile_mode"``
  (``manual`` or ``auto``), ``POST_LOADED_PROFILE_FILE = "/etc/tuned/post_loaded_profile"``,
  ``BOOT_CMDLINE_FILE = "/etc/tuned/bootcmdline"`` holding ``TUNED_BOOT_CMDLINE="..."`` and
  ``TUNED_BOOT_INITRD_ADD="..."`` (written by ``commands.add_modify_option_in_file``),
  ``SYSTEMD_SYSTEM_CONF_FILE = /etc/systemd/system.conf.d/00-tuned.conf`` (newer tuned).
* profile directories: ``LOAD_DIRECTORIES = ["/usr/lib/tuned", "/etc/tuned"]`` up to 2.24;
  ``/usr/lib/tuned/profiles`` and ``/etc/tuned/profiles`` from 2.25 on. ``profiles/locator.py``
  takes ``<dir>/<name>/tuned.conf`` from the last directory that has it (``/etc`` wins).
* ``profiles/loader.py``: ``[main] include=`` names parents (split at ``,``/``;``), loaded first;
  ``profiles/merger.py``: a child's options replace the parent's of the same name in a section.
* ``profiles/variables.py``: ``[variables]`` options in merged order, ``include=<file>`` reads a
  headerless ``name=value`` file (``/etc/tuned/cpu-partitioning-variables.conf``), ``${name}``
  expands an earlier variable; ``${f:...}`` are functions (left as written here).
* ``plugins/plugin_bootloader.py``: every ``[bootloader]`` option starting with ``cmdline`` adds
  its words to the kernel command line (``+`` prefix: append; ``-``: remove those words).

Running means a process ``tuned`` under ``proc/``; enabled means systemd's
``multi-user.target.wants/tuned.service`` link; active: installed, a profile is set and tuned
runs or starts at boot. Standard library only (ships to hosts).
"""

from __future__ import annotations

import configparser
import os
import re

from hostkit.core.boot_loader import TUNED_BOOTCMDLINE
from hostkit.facts.services import running_commands
from hostkit.facts.sysroot import Sysroot

ACTIVE_PROFILE = "/etc/tuned/active_profile"
PROFILE_MODE = "/etc/tuned/profile_mode"
POST_LOADED_PROFILE = "/etc/tuned/post_loaded_profile"
SYSTEMD_CONF = "/etc/systemd/system.conf.d/00-tuned.conf"
ENABLED_LINK = "/etc/systemd/system/multi-user.target.wants/tuned.service"
PROGRAMS = ("usr/sbin/tuned", "usr/sbin/tuned-adm", "sbin/tuned")
# (system, user) profile directories: tuned >= 2.25, then the older layout.
LAYOUTS = (("/usr/lib/tuned/profiles", "/etc/tuned/profiles"), ("/usr/lib/tuned", "/etc/tuned"))

# What hostkit's own tuned profile includes: cpu-partitioning where the plan isolates CPUs, else
# latency-performance (both shipped by the tuned package; profiles/<name>/tuned.conf).
BASE_PROFILES = ("cpu-partitioning", "latency-performance")

_VAR = re.compile(r"(?<!\\)\$\{(\w+)\}")
_BOOT_VAR = re.compile(r'^\s*(\w+)\s*=\s*"(.*)"\s*$')

# Profiles including one another: deeper than any tuned ships, far from the recursion limit.
MAX_INCLUDE_DEPTH = 32


def _ini(text: str, headerless: bool = False) -> configparser.RawConfigParser:
    """tuned's ConfigParser settings (delimiters '=', inline '#' comments, non-strict, names as written)."""
    cfg = configparser.RawConfigParser(
        delimiters=("=",), inline_comment_prefixes=("#",), allow_no_value=True, strict=False, interpolation=None
    )
    cfg.optionxform = str  # type: ignore[assignment,method-assign]
    cfg.read_string(("[magic]\n" if headerless else "") + text)
    return cfg


def profile_dirs(sr: Sysroot) -> tuple[str, str]:
    """(system, user) profile directories of this host's tuned (the newer layout where it exists)."""
    for system, user in LAYOUTS:
        if sr.is_dir(system.lstrip("/")):
            return system, user
    return LAYOUTS[1]


def find_profile(sr: Sysroot, name: str) -> str | None:
    """The ``tuned.conf`` tuned loads for ``name``: the user directory first (locator.py)."""
    system, user = profile_dirs(sr)
    for d in (user, system):
        path = f"{d}/{name}/tuned.conf"
        if sr.exists(path.lstrip("/")):
            return path
    return None


def load_chain(sr: Sysroot, names: list[str]) -> tuple[list[dict], list[str]]:
    """The profiles tuned merges for ``names``, parents first (loader.py): each ``{"name", "path",
    "sections": {section: {option: value}}}``; and the names no file was found for."""
    chain: list[dict] = []
    missing: list[str] = []
    seen: set[str] = set()

    def load(name: str, depth: int = 0) -> None:
        optional = name.startswith("-")
        name = name.lstrip("-")
        if depth > MAX_INCLUDE_DEPTH:
            missing.append(f"{name} (included more than {MAX_INCLUDE_DEPTH} profiles deep: not read)")
            return
        path = find_profile(sr, name)
        if path is None:
            if not optional:
                missing.append(name)
            return
        if path in seen:
            return
        seen.add(path)
        try:
            cfg = _ini(sr.read(path.lstrip("/")) or "")
        except configparser.Error as exc:
            missing.append(f"{name} ({path}: {str(exc).splitlines()[0]})")
            return
        sections = {s: dict(cfg.items(s)) for s in cfg.sections()}
        include = sections.get("main", {}).get("include")
        if include:
            for parent in re.split(r"\s*[,;]\s*", include.strip()):
                if parent:
                    load(parent, depth + 1)
        chain.append({"name": name, "path": path, "sections": sections})

    for n in names:
        load(n)
    return chain, missing


def merged(chain: list[dict], section: str) -> dict[str, str | None]:
    """A section's options after merger.py: a child's value replaces the parent's, in the parent's place."""
    out: dict[str, str | None] = {}
    for prof in chain:
        out.update(prof["sections"].get(section, {}))
    return out


def expand_static(value: str, variables: dict[str, str]) -> str:
    """``${name}`` replaced by an earlier variable (variables.py expand_static); functions stay."""
    return _VAR.sub(lambda m: variables.get(m.group(1), m.group(0)), value)


def read_variables(sr: Sysroot, chain: list[dict]) -> dict[str, str]:
    """The profile's variables as tuned defines them (add_from_cfg), ``${f:...}`` left as written."""
    out: dict[str, str] = {}
    for key, value in merged(chain, "variables").items():
        if value is None:
            continue
        if key == "include":
            text = sr.read(value.strip().lstrip("/"))
            if text is None:
                continue
            try:
                cfg = _ini(text, headerless=True)
            except configparser.Error:
                continue
            for k, v in cfg.items("magic"):
                if v is not None and re.match(r"\w+$", k):
                    out[k] = expand_static(v, out)
        elif re.match(r"\w+$", key):
            out[key] = expand_static(value, out)
    return out


def parse_bootcmdline(text: str | None) -> dict[str, str] | None:
    """``/etc/tuned/bootcmdline``: ``NAME="value"`` lines -> {NAME: value}; None when absent."""
    if text is None:
        return None
    out = {}
    for line in text.splitlines():
        m = _BOOT_VAR.match(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def read_tuned(sr: Sysroot, comms: set[str] | None = None) -> dict:
    comms = running_commands(sr) if comms is None else comms
    installed = any(sr.exists(p) for p in PROGRAMS)
    running = "tuned" in comms
    enabled = os.path.lexists(sr.path(ENABLED_LINK.lstrip("/")))  # a link whose absolute target is the host's
    active_text = (sr.read(ACTIVE_PROFILE.lstrip("/")) or "").strip()
    names = active_text.split()
    system, user = profile_dirs(sr)
    chain, missing = load_chain(sr, names) if installed and names else ([], [])
    variables = read_variables(sr, chain)
    bootloader = {k: v for k, v in merged(chain, "bootloader").items() if k.startswith("cmdline") and v}
    bootcmdline = parse_bootcmdline(sr.read(TUNED_BOOTCMDLINE.lstrip("/")))
    return {
        "installed": installed,
        "running": running,
        "enabled": enabled,
        # tuned will (re)apply a profile: it runs now or starts at boot, and one is set.
        "active": installed and bool(names) and (running or enabled),
        "active_profile": active_text or None,
        "profile_mode": (sr.read(PROFILE_MODE.lstrip("/")) or "").strip() or None,
        "post_loaded_profile": (sr.read(POST_LOADED_PROFILE.lstrip("/")) or "").strip() or None,
        "profile_dirs": {"system": system, "user": user},
        "profiles": [{"name": p["name"], "path": p["path"]} for p in chain],
        "missing_profiles": missing,
        "variables": variables,
        "isolated_cores": variables.get("isolated_cores"),
        "bootloader_cmdline": bootloader,
        "bootcmdline": bootcmdline,
        "boot_cmdline": (bootcmdline or {}).get("TUNED_BOOT_CMDLINE"),
        "systemd_conf": sr.exists(SYSTEMD_CONF.lstrip("/")),
        # The profiles hostkit's own profile may include (drive mode), as this host's tuned has them.
        "base_profiles": {name: base_profile(sr, name) for name in BASE_PROFILES} if installed else {},
    }


def base_profile(sr: Sysroot, name: str) -> dict:
    """What the planner needs of a profile hostkit's profile includes: its merged ``[bootloader]``
    cmdline options and ``[variables]`` definitions as written (``${...}`` unexpanded)."""
    chain, missing = load_chain(sr, [name])
    return {
        "found": bool(chain) and not missing,
        "bootloader_cmdline": {k: v for k, v in merged(chain, "bootloader").items() if k.startswith("cmdline") and v},
        "initrd": any(k.startswith("initrd_add") and v for k, v in merged(chain, "bootloader").items()),
        "variable_defs": {k: v for k, v in merged(chain, "variables").items() if v is not None},
    }
