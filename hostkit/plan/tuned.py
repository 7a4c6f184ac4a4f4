"""The plan's ``tuned`` decision: drive tuned with a hostkit profile, neutralize it, or ignore it.

``drive``: hostkit writes ``<user profile dir>/hostkit/tuned.conf`` (``include=cpu-partitioning``
where the plan isolates CPUs, else ``latency-performance``) with the plan's ``isolated_cores``,
sysctls and governor, and with every ``[bootloader]`` ``cmdline*`` option of the included profiles
re-defined without the kernel arguments hostkit manages (tuned's merger.py: a child's option
replaces the parent's of the same name). tuned then writes only arguments hostkit does not manage
into grubenv ``tuned_params``, so after every boot each managed argument is hostkit's, once.

``neutralize``: the profile ``hostkit-neutral`` has no plugin sections: tuned keeps running and
changes nothing (its bootloader plugin, unloaded, leaves ``TUNED_BOOT_CMDLINE`` empty).

``boot_cmdline`` is what tuned's bootloader plugin computes for the new profile (plugin_bootloader.py
``_get_effective_options``: the ``cmdline*`` options in merged order, ``+``/no prefix appended,
``-`` removing words; then variables expanded). Variables hostkit can compute from the plan are
expanded (``isolated_cores``, ``not_isolated_cpumask``, ``isolated_cpumask``: tuned's
``cpulist2hex`` and ``cpulist_invert`` over the online CPUs, utils/commands.py); a word needing
anything else is left out of hostkit's profile too, so tuned and the files hostkit writes agree.
"""

from __future__ import annotations

import re

from hostkit.core.cpulist import format_cpulist
from hostkit.plan.model import Notes

PROFILE = "hostkit"
NEUTRAL = "hostkit-neutral"
HEADER = "# Managed by hostkit: written by `hostkit apply`, removed by `hostkit rollback`.\n"
_VAR = re.compile(r"(?<!\\)\$\{([^{}]+)\}")


def cpulist2hex(cpus) -> str:
    """tuned's commands.cpulist2hex: hex mask zero-filled to 32-bit groups joined by commas."""
    m = 0
    for c in cpus:
        m |= 1 << c
    s = f"{m:x}"
    s = s.zfill(-(-len(s) // 8) * 8)
    return ",".join(s[i : i + 8] for i in range(0, len(s), 8))


def _managed_in(text: str, managed: set[str]) -> bool:
    return any(re.search(r"(?:^|[\s:])" + re.escape(name) + r"(?:=|\s|$)", text) for name in managed)


def filter_cmdline(value: str, managed: set[str], defs: dict[str, str]) -> str:
    """A ``cmdline*`` option's value without the words naming a managed argument; ``${var}`` whose
    definition sets one (cpu-partitioning's ``${cmd_isolcpus}`` = `` isolcpus=...``) taken out."""
    op = ""
    if value[:1] in "+-":
        op, value = value[0], value[1:]
    words = []
    for word in value.split():
        word = _VAR.sub(lambda m: "" if _managed_in(defs.get(m.group(1), ""), managed) else m.group(0), word)
        if word and word.split("=", 1)[0] not in managed:
            words.append(word)
    return op + " ".join(words)


def effective_cmdline(options: dict[str, str]) -> str:
    """plugin_bootloader._get_effective_options over the merged ``cmdline*`` options."""
    cmdline = ""
    for val in options.values():
        if not val:
            continue
        op, op1, vals = val[0], val[1:2], val[1:].strip()
        if op == "+" or (op == "\\" and op1 in ("\\", "+", "-")):
            if vals:
                cmdline += " " + vals
        elif op == "-":
            for p in vals.split():
                cmdline = re.sub(r"(\A|\s)" + re.escape(p) + r"(?=\Z|\s)", "", cmdline)
        else:
            cmdline += " " + val
    return cmdline.strip()


def bootcmdline_text(values: dict[str, str]) -> str:
    """The ``NAME="value"`` lines of ``/etc/tuned/bootcmdline`` as commands.add_modify_option_in_file
    writes them. The tuned role replaces the file's lines of these names with them and keeps the
    rest (the package's comment header): tuned's own in-place edit, its lines being the last."""
    return "".join('{}="{}"\n'.format(name, value.replace("\\", "\\\\")) for name, value in values.items())


def _mode(asked: str | None, tuned: dict) -> tuple[str, str]:
    if not tuned.get("installed"):
        return "ignore", (
            "tuned: not installed, nothing to coordinate"
            if asked in (None, "ignore")
            else f"tuned: the profile asks {asked} but tuned is not installed: nothing to {asked}"
        )
    if asked is None:
        if tuned.get("active"):
            return "drive", (
                f"tuned: drive (default where tuned is active; profile {tuned.get('active_profile')}): "
                "left alone it would put back its own isolcpus/nohz_full and sysctls at its next start"
            )
        return "ignore", "tuned: ignore (installed but no active profile and not running)"
    if asked == "drive":
        return "drive", "tuned: drive (asked by the profile): tuned keeps running with hostkit's values"
    if asked == "neutralize":
        return "neutralize", (
            f"tuned: neutralize (asked by the profile): profile {NEUTRAL} has no plugin sections, "
            "tuned keeps running and touches none of hostkit's tunables"
        )
    return "ignore", "tuned: ignore (asked by the profile): tuned's profile is left as it is"


def _drive_profile(
    tuned: dict,
    notes: Notes,
    boot_values: dict,
    *,
    online: frozenset[int],
    isolated: frozenset[int],
    managed: set[str],
    sysctl: dict,
    governor: str | None,
    force_latency: int | None,
    thp: str | None,
) -> str:
    """tuned.conf of hostkit's profile (mode drive): tuned's base profile with hostkit's partition and
    values, the kernel arguments hostkit sets taken out of tuned's; ``boot_values`` filled in."""
    reasons, warnings = notes.reasons, notes.warnings
    include = "cpu-partitioning" if isolated else "latency-performance"
    base = (tuned.get("base_profiles") or {}).get(include) or {}
    if not base.get("found"):
        warnings.append(
            f"tuned: profile {include} not found on this host; hostkit's profile includes it "
            f"optionally (-{include}) and tuned applies only hostkit's values"
        )
    iso_text = format_cpulist(isolated)
    known = {
        "isolated_cores": iso_text,
        "not_isolated_cpumask": cpulist2hex(online - isolated),
        "isolated_cpumask": cpulist2hex(isolated),
    }
    defs = dict(base.get("variable_defs") or {})
    overrides, dropped = {}, []
    for key, value in (base.get("bootloader_cmdline") or {}).items():
        kept = filter_cmdline(value, managed, defs)
        words = []
        for w in kept.lstrip("+-").split():
            rest = _VAR.sub(lambda m: known.get(m.group(1), m.group(0)), w)
            if _VAR.search(rest):
                dropped.append(w)
            else:
                words.append(w)
        overrides[key] = (kept[:1] if kept[:1] in "+-" else "") + " ".join(words)
    expanded = {k: _VAR.sub(lambda m: known.get(m.group(1), m.group(0)), v) for k, v in overrides.items()}
    boot_values["TUNED_BOOT_CMDLINE"] = effective_cmdline(expanded)
    if base.get("initrd"):  # cpu-partitioning's initrd overlay: tuned keeps writing it
        boot_values["TUNED_BOOT_INITRD_ADD"] = (tuned.get("bootcmdline") or {}).get("TUNED_BOOT_INITRD_ADD") or ""
    lines = [
        HEADER + f"# tuned's {include} with hostkit's CPU partition and values; the kernel arguments "
        "hostkit sets are taken out of tuned's [bootloader] options so each appears once at boot.",
        "[main]",
        f"summary=hostkit: {include} with hostkit's plan",
        f"include={include if base.get('found') else '-' + include}",
        "",
    ]
    if isolated:
        lines += ["[variables]", f"isolated_cores={iso_text}", ""]
    if overrides:
        lines += ["[bootloader]"] + [f"{k}={v}" for k, v in overrides.items()] + [""]
    if sysctl:
        lines += ["[sysctl]"] + [f"{k}={v}" for k, v in sysctl.items()] + [""]
    if governor or force_latency is not None:  # force_latency: the plan's PM QoS ceiling (us)
        lines += (
            ["[cpu]"]
            + ([f"governor={governor}"] if governor else [])
            + ([f"force_latency={force_latency}"] if force_latency is not None else [])
            + [""]
        )
    if thp:  # network-latency's [vm] transparent_hugepages=never would undo the plan's THP value
        lines += ["[vm]", f"transparent_hugepages={thp}", ""]
    conf = "\n".join(lines).rstrip("\n") + "\n"
    reasons.append(
        f"tuned profile {PROFILE}: include={include}"
        + (f", isolated_cores={iso_text}" if isolated else "")
        + f"; tuned's boot arguments without hostkit's: {boot_values['TUNED_BOOT_CMDLINE'] or '(none)'}"
    )
    if dropped:
        warnings.append(
            f"tuned: left out of hostkit's tuned profile (variables hostkit cannot compute): {' '.join(dropped)}"
        )
    return conf


def plan_tuned(
    asked: str | None,
    facts: dict,
    notes: Notes,
    *,
    online: frozenset[int],
    isolated: frozenset[int],
    managed: set[str],
    sysctl: dict,
    governor: str | None,
    force_latency: int | None = None,
    thp: str | None = None,
) -> dict:
    """The plan's ``tuned`` document; its reasons and warnings into ``notes``."""
    tuned = facts.get("tuned") or {}
    mode, why = _mode(asked, tuned)
    reasons, warnings = notes.reasons, notes.warnings
    reasons.append(why)
    out = {"mode": mode, "previous_profile": tuned.get("active_profile"), "previous_mode": tuned.get("profile_mode")}
    if mode == "ignore":
        return out
    if tuned.get("post_loaded_profile"):
        warnings.append(
            f"tuned: post-loaded profile {tuned['post_loaded_profile']} (/etc/tuned/post_loaded_profile) "
            "is applied after hostkit's and its values win where both set one"
        )
    user_dir = (tuned.get("profile_dirs") or {}).get("user") or "/etc/tuned"
    boot_values = {"TUNED_BOOT_CMDLINE": "", "TUNED_BOOT_INITRD_ADD": ""}
    if mode == "neutralize":
        name = NEUTRAL
        conf = (
            HEADER + "[main]\nsummary=hostkit-neutral: tuned runs and tunes nothing "
            "(hostkit owns CPU isolation, IRQs, sysctls and kernel arguments)\n"
        )
    else:
        name = PROFILE
        conf = _drive_profile(
            tuned,
            notes,
            boot_values,
            online=online,
            isolated=isolated,
            managed=managed,
            sysctl=sysctl,
            governor=governor,
            force_latency=force_latency,
            thp=thp,
        )
    # grubenv's tuned_params keeps tuned's previous words (hostkit's arguments taken out by the boot
    # loader backend) until tuned applies the new profile: say so when they differ.
    left = [w for w in (tuned.get("boot_cmdline") or "").split() if w.split("=", 1)[0] not in managed]
    if tuned.get("boot_cmdline") is not None and left != boot_values["TUNED_BOOT_CMDLINE"].split():
        warnings.append(
            f"tuned: grubenv tuned_params keeps {' '.join(left) or '(nothing)'} until "
            f"`tuned-adm profile {name}` runs (at once on a live host) and writes "
            f"{boot_values['TUNED_BOOT_CMDLINE'] or '(nothing)'}; none of hostkit's arguments either way"
        )
    out.update(
        {
            "profile": name,
            "profile_dir": f"{user_dir.rstrip('/')}/{name}",
            "conf": conf,
            "boot_cmdline": boot_values["TUNED_BOOT_CMDLINE"],
            "bootcmdline": bootcmdline_text(boot_values),
        }
    )
    return out
