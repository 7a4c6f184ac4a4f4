# -*- coding: utf-8 -*-
"""The host's boot loader configuration: which backend holds the kernel command line, what the
next boot will use, and the edit that sets hostkit's kernel arguments in it.

One reader per format, each computing the command line the way the boot loader does:

* ``grub-debian`` (Debian, Ubuntu): ``/etc/default/grub``, then every
  ``/etc/default/grub.d/*.cfg`` in name order, sourced as shell by ``update-grub``
  (``grub-mkconfig``); the default entry boots with
  ``root=... ro ${GRUB_CMDLINE_LINUX} ${GRUB_CMDLINE_LINUX_DEFAULT}`` (``10_linux``). With tuned's
  ``/etc/grub.d/00_tuned`` (Debian's tuned package), ``$tuned_params`` in those values is what GRUB
  expands at boot from the ``set tuned_params="$TUNED_BOOT_CMDLINE"`` that ``00_tuned`` writes from
  ``/etc/tuned/bootcmdline`` (tuned's bootloader plugin patches the same line into ``grub.cfg``);
  another tool's value of a managed argument is taken out of ``TUNED_BOOT_CMDLINE`` there.
* ``bls`` (RHEL, Rocky, Alma, Fedora with GRUB): Boot Loader Specification entries
  ``/boot/loader/entries/*.conf`` read by GRUB's ``blscfg``; their ``options`` lines may name
  GRUB environment variables (EL8: ``$kernelopts`` and tuned's ``$tuned_params``) expanded
  from ``/boot/grub2/grubenv``; ``/etc/kernel/cmdline`` is what ``kernel-install`` gives new
  kernels.
* ``systemd-boot``: entries ``<esp>/loader/entries/*.conf`` (esp at ``/boot/efi``, ``/efi``
  or ``/boot``), the default picked by ``loader.conf``'s ``default`` glob; ``/etc/kernel/cmdline``
  for new kernels.
* ``uki``: the host booted a unified kernel image (systemd-stub sets its ``StubInfo`` EFI
  variable, systemd-stub(7)): the command line is the image's ``.cmdline`` section, which a
  signed image keeps whatever a boot entry passes under Secure Boot. Changing it means rebuilding
  and re-signing the image; hostkit reads it as a host whose kernel arguments it cannot change.
* ``none``: nothing hostkit can edit (what was found is named).

``edit`` returns the new text of every file to change so that each managed argument appears
exactly once in every entry the boot loader may boot, another tool's value replaced, never
duplicated; the caller journals and writes them. Used by the facts engine and by the
``hostkit_bootargs`` Ansible module (as ``module_utils/hostkit_boot_loader.py``, a symlink to
this file). Standard library only; Python 2-compatible syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import os
import re

try:  # in the hostkit package (the agent zipapp, the controller)
    from hostkit.core.kernel_args import (
        arg_name,
        cmdline_words,
        edit_words,
        format_arg,
        remove_grub_args,
        split_cmdline,
    )
    from hostkit.core.sysroot import HostFileError, read_bytes, sysroot_path
except ImportError:  # inside an Ansible module
    from ansible.module_utils.hostkit_kernel_args import (
        arg_name,
        cmdline_words,
        edit_words,
        format_arg,
        remove_grub_args,
        split_cmdline,
    )
    from ansible.module_utils.hostkit_sysroot import HostFileError, read_bytes, sysroot_path

BACKENDS = ("grub-debian", "bls", "systemd-boot")
SUPPORTED = (
    "Debian/Ubuntu GRUB (/etc/default/grub), BLS entries with GRUB (/boot/loader/entries + /boot/grub2), "
    "systemd-boot (<esp>/loader/entries)"
)

GRUB = "/etc/default/grub"
GRUB_D = "/etc/default/grub.d"
DROPIN = "/etc/default/grub.d/hostkit.cfg"
BLS_ENTRIES = "/boot/loader/entries"
GRUB2_DIR = "/boot/grub2"
GRUBENV = "/boot/grub2/grubenv"
KERNEL_CMDLINE = "/etc/kernel/cmdline"
ESPS = ("/boot/efi", "/efi", "/boot")
# systemd-stub's EFI variable (vendor GUID of the Boot Loader Interface): present once a unified
# kernel image booted this kernel.
STUB_INFO = "/sys/firmware/efi/efivars/StubInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
# Boot files of loaders hostkit does not edit: named when nothing supported is found.
OTHER_BOOT_FILES = (
    "/boot/grub/grub.cfg",
    "/boot/grub2/grub.cfg",
    "/boot/extlinux/extlinux.conf",
    "/boot/syslinux/syslinux.cfg",
    "/etc/zipl.conf",
    "/boot/efi/EFI/Linux",
    "/efi/EFI/Linux",
)
GRUB_VARS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")
GRUBENV_HEADER = "# GRUB Environment Block\n"
# tuned on Debian GRUB (tuned/consts.py GRUB2_TUNED_TEMPLATE_PATH, BOOT_CMDLINE_FILE, GRUB2_TUNED_VAR).
TUNED_GRUB_SCRIPT = "/etc/grub.d/00_tuned"
TUNED_BOOTCMDLINE = "/etc/tuned/bootcmdline"
TUNED_VAR = "tuned_params"
_TUNED_LINE = re.compile(r"^(\s*TUNED_BOOT_CMDLINE=)(.*)$", re.MULTILINE)

DROPIN_HEADER = (
    "# Managed by hostkit: kernel arguments for latency-critical inference.\n"
    "# Remove with `hostkit rollback`; edits here are overwritten by `hostkit apply`.\n"
)


class BootConfigError(ValueError):
    """The boot configuration cannot be read or edited as asked (named in the message)."""


# The largest boot configuration file read (a grubenv is 1 KiB, a BLS entry or GRUB default far less).
MAX_BOOT_FILE = 1 << 20


# --------------------------------------------------------------------------------------- files


def _read(sysroot, path):
    """A boot configuration file's text (None: absent or unreadable). A FIFO, device, symlink loop
    or a file over 1 MiB where a boot file belongs is a BootConfigError, never waited on or read whole."""
    try:
        data = read_bytes(sysroot_path(sysroot, path), MAX_BOOT_FILE)
    except HostFileError as exc:
        raise BootConfigError("%s: %s" % (path, exc.why))
    return None if data is None else data.decode("utf-8", "replace")


def _listdir(sysroot, path, suffix):
    try:
        names = os.listdir(sysroot_path(sysroot, path))
    except (IOError, OSError):
        return []
    return sorted(n for n in names if n.endswith(suffix) and not n.startswith("."))


def _isdir(sysroot, path):
    return os.path.isdir(sysroot_path(sysroot, path))


def _exists(sysroot, path):
    return os.path.lexists(sysroot_path(sysroot, path))


def _version_key(name):
    """Natural sort key (``ls -v``): digits compare as numbers."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.findall(r"\d+|\D+", name)]


def detect(sysroot):
    """Which backend holds this host's kernel command line, and the files it reads.

    Returns ``{"backend", "files": [paths in reading order], "texts": {path: text}, "found":
    [boot files of unsupported loaders], "esp": path or None}``."""
    texts, found = {}, []  # type: dict[str, str], list[str]
    if _exists(sysroot, STUB_INFO):
        images = [
            "%s/EFI/Linux/%s" % (esp.rstrip("/"), n)
            for esp in ESPS
            for n in _listdir(sysroot, esp.rstrip("/") + "/EFI/Linux", ".efi")
        ]
        return {"backend": "uki", "files": [], "texts": texts, "found": [STUB_INFO] + images, "esp": None, "real": {}}
    grub = _read(sysroot, GRUB)
    bls = ["%s/%s" % (BLS_ENTRIES, n) for n in _listdir(sysroot, BLS_ENTRIES, ".conf")]
    if bls and _isdir(sysroot, GRUB2_DIR):
        files = list(bls)
        for p in (GRUBENV, KERNEL_CMDLINE):
            if _exists(sysroot, p):
                files.append(p)
        cfg = _loaded(sysroot, "bls", files, None, found)
        # EL8 on UEFI: /boot/grub2/grubenv is a symlink to the ESP's EFI/<vendor>/grubenv, the block
        # GRUB reads. Edits go to the link's target, never over the link.
        target = _link_target(sysroot, GRUBENV)
        if target:
            cfg["real"][GRUBENV] = target
        return cfg
    for esp in ESPS:
        entries_dir = esp.rstrip("/") + "/loader/entries"
        entries = ["%s/%s" % (entries_dir, n) for n in _listdir(sysroot, entries_dir, ".conf")]
        loader_conf = esp.rstrip("/") + "/loader/loader.conf"
        if entries and (_exists(sysroot, loader_conf) or _isdir(sysroot, esp.rstrip("/") + "/EFI/systemd")):
            files = ([loader_conf] if _exists(sysroot, loader_conf) else []) + entries
            if _exists(sysroot, KERNEL_CMDLINE):
                files.append(KERNEL_CMDLINE)
            return _loaded(sysroot, "systemd-boot", files, esp, found)
    if grub is not None:
        files = [GRUB] + ["%s/%s" % (GRUB_D, n) for n in _listdir(sysroot, GRUB_D, ".cfg")]
        if _exists(sysroot, TUNED_GRUB_SCRIPT) and _exists(sysroot, TUNED_BOOTCMDLINE):
            files.append(TUNED_BOOTCMDLINE)
        return _loaded(sysroot, "grub-debian", files, None, found)
    for p in OTHER_BOOT_FILES + tuple(bls):
        if _exists(sysroot, p):
            found.append(p)
    return {"backend": "none", "files": [], "texts": texts, "found": found, "esp": None, "real": {}}


def _loaded(sysroot, backend, files, esp, found):
    texts = {}
    for p in files:
        text = _read(sysroot, p)
        if text is not None:
            texts[p] = text
    return {
        "backend": backend,
        "files": [p for p in files if p in texts],
        "texts": texts,
        "found": found,
        "esp": esp,
        "real": {},
    }


def _link_target(sysroot, path):
    """Where the symlink ``path`` points, as a path under the sysroot (None: not a link, or a
    link that leaves the sysroot)."""
    full = sysroot_path(sysroot, path)
    if not os.path.islink(full):
        return None
    real = os.path.realpath(full)
    root = os.path.realpath(sysroot_path(sysroot, "/")).rstrip("/")
    if root and not real.startswith(root + "/"):
        return None
    return real[len(root) :] if root else real


def real_path(cfg, path):
    """The file to journal and write for ``path`` (a symlinked grubenv: its target)."""
    return (cfg.get("real") or {}).get(path, path)


def describe_uki(cfg):
    """The one line a refusal of kernel arguments gives on a host booted from a unified kernel image."""
    images = [p for p in cfg.get("found") or [] if p.endswith(".efi")]
    return (
        "booted from a unified kernel image (systemd-stub's StubInfo EFI variable%s): its command line "
        "is the image's embedded .cmdline, kept under Secure Boot whatever a boot entry says; changing "
        "kernel arguments means rebuilding and re-signing the image (ukify, kernel-install), which "
        "hostkit does not do" % ("; images: " + ", ".join(images) if images else "")
    )


def describe_none(cfg):
    """The one line a refusal gives for a host without a supported boot configuration."""
    found = (
        ", ".join(cfg.get("found") or [])
        or "none of /etc/default/grub, /boot/loader/entries/*.conf, <esp>/loader/entries/*.conf"
    )
    return "no supported boot configuration (found: %s; supported: %s)" % (found, SUPPORTED)


# --------------------------------------------------------------------------------------- GRUB (Debian)

_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
# ${NAME:+word} / ${NAME:-word} (tuned's GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:+...}")
_ALT = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:?)([-+])([^{}]*)\}")


def _alt(m, env):
    value = env.get(m.group(1))
    is_set = value is not None and (value != "" or not m.group(2))
    if m.group(3) == "+":
        return _expand(m.group(4), env) if is_set else ""
    return value if is_set else _expand(m.group(4), env)


def _expand(text, env):
    text = _ALT.sub(lambda m: _alt(m, env), text)
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), text)


def shell_word(raw, env):
    """The value a POSIX shell assigns for ``VAR=raw``: one word of single-quoted, double-quoted
    (with ``$VAR``/``${VAR}`` expanded from ``env`` and ``\\`` escapes) and bare parts; the word
    ends at an unquoted blank or ``;``. Raises ValueError on an unbalanced quote."""
    out, i, n = [], 0, len(raw)
    while i < n:
        c = raw[i]
        if c in " \t;&|":
            break
        if c == "'":
            j = raw.find("'", i + 1)
            if j < 0:
                raise ValueError("unbalanced single quote")
            out.append(raw[i + 1 : j])
            i = j + 1
        elif c == '"':
            i += 1
            buf = []
            while i < n and raw[i] != '"':
                if raw[i] == "\\" and i + 1 < n and raw[i + 1] in '$`"\\':
                    buf.append(raw[i + 1].replace("$", "\0"))
                    i += 2
                else:
                    buf.append(raw[i])
                    i += 1
            if i >= n:
                raise ValueError("unbalanced double quote")
            out.append(_expand("".join(buf), env).replace("\0", "$"))
            i += 1
        elif c == "\\":
            out.append(raw[i + 1 : i + 2])
            i += 2
        else:
            j = i
            while j < n and raw[j] not in " \t;&|'\"\\":
                j += 1
            out.append(_expand(raw[i:j], env))
            i = j
    return "".join(out)


def grub_effective(texts):
    """``GRUB_CMDLINE_LINUX`` and ``GRUB_CMDLINE_LINUX_DEFAULT`` after sourcing ``texts`` (a list
    of file texts, in the order ``update-grub`` sources them), as the shell would assign them."""
    env = dict.fromkeys(GRUB_VARS, "")
    for text in texts:
        for line in text.splitlines():
            m = _ASSIGN.match(line)
            if not m:
                continue
            try:
                env[m.group(1)] = shell_word(m.group(2), env)
            except ValueError:  # the shell would refuse the file; take the value as written
                env[m.group(1)] = m.group(2).strip().strip("\"'")
    return {v: env[v] for v in GRUB_VARS}


def grub_order(paths):
    """``/etc/default/grub`` first, then ``grub.d/*.cfg`` in glob order (what update-grub sources)."""
    rest = sorted(p for p in paths if p != GRUB and p.startswith(GRUB_D + "/") and p.endswith(".cfg"))
    return ([GRUB] if GRUB in paths else []) + rest


def tuned_boot_cmdline(text):
    """``TUNED_BOOT_CMDLINE`` of ``/etc/tuned/bootcmdline`` (sourced as shell by ``00_tuned``)."""
    found = _TUNED_LINE.findall(text or "")
    try:
        return shell_word(found[-1][1].strip(), {}) if found else ""
    except ValueError:
        return found[-1][1].strip().strip("\"'")


def _grub_next_boot(texts, booted):
    eff = grub_effective([texts[p] for p in grub_order(list(texts))])
    # root= and BOOT_IMAGE= come from grub-mkconfig's probe of the disks: taken from the booted line.
    prefix = [w for w in cmdline_words(booted or "") if arg_name(w) in ("BOOT_IMAGE", "root")]
    words = cmdline_words(eff["GRUB_CMDLINE_LINUX"]) + cmdline_words(eff["GRUB_CMDLINE_LINUX_DEFAULT"])
    # GRUB expands $tuned_params at boot (set by 00_tuned's line in grub.cfg; unset without 00_tuned).
    tuned = cmdline_words(tuned_boot_cmdline(texts.get(TUNED_BOOTCMDLINE)))
    words = [t for w in words for t in (tuned if w in ("$" + TUNED_VAR, "${%s}" % TUNED_VAR) else [w])]
    return " ".join(prefix + ["ro"] + words)


def dropin_text(want):
    return DROPIN_HEADER + 'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} %s"\n' % " ".join(
        format_arg(k, v) for k, v in sorted(want.items())
    )


def _grub_edit(texts, want, managed):
    new = {}
    for p in grub_order(list(texts)):
        if p == DROPIN:
            continue
        edited = remove_grub_args(texts[p], managed)
        if edited != texts[p]:
            new[p] = edited
    if TUNED_BOOTCMDLINE in texts:
        # tuned's $tuned_params: hostkit's arguments win, the same names are taken out of it (the
        # line rewritten as tuned's add_modify_option_in_file writes it).
        text = texts[TUNED_BOOTCMDLINE]
        words = cmdline_words(tuned_boot_cmdline(text))
        kept = edit_words(words, {}, set(managed))
        if kept != words:
            value = " ".join(kept).replace("\\", "\\\\")
            new[TUNED_BOOTCMDLINE] = _TUNED_LINE.sub(lambda m: m.group(1) + '"%s"' % value, text)
    if want:
        if texts.get(DROPIN) != dropin_text(want):
            new[DROPIN] = dropin_text(want)
    elif DROPIN in texts:
        new[DROPIN] = None
    return new


# --------------------------------------------------------------------------------------- BLS and grubenv


def parse_grubenv(text):
    """GRUB environment block (``grub-editenv``'s format: a header line, ``name=value`` lines, then
    ``#`` padding to the block size) -> ordered list of (name, value); ``\\`` escapes undone."""
    out = []
    for line in (text or "").split("\n"):
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        out.append((name, re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)))
    return out


def format_grubenv(pairs, size):
    """The block ``grub-editenv`` writes: header, ``name=value`` lines, ``#`` padding to ``size``
    bytes (the block keeps its size; GRUB refuses a block whose padding is gone)."""
    body = GRUBENV_HEADER + "".join("%s=%s\n" % (k, v.replace("\\", "\\\\").replace("\n", "\\n")) for k, v in pairs)
    if len(body.encode("utf-8")) > size:
        raise BootConfigError(
            "%s: the variables need %d bytes, more than the block's %d" % (GRUBENV, len(body.encode("utf-8")), size)
        )
    return body + "#" * (size - len(body.encode("utf-8")))


def parse_entry(text):
    """A BLS / systemd-boot entry: key -> value (``options`` lines joined by a blank, as the spec says)."""
    out = {}  # type: dict[str, str]
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _sep, value = line.partition(" ")
        if "\t" in key:
            key, _tab, rest = key.partition("\t")
            value = rest + " " + value
        value = value.strip()
        if key == "options" and "options" in out:
            out["options"] += " " + value
        else:
            out[key] = value
    return out


def expand_options(options, env):
    """An ``options`` value with GRUB variables (``$kernelopts``, ``${tuned_params}``) expanded
    from the GRUB environment ``env``, as GRUB's blscfg does before booting."""
    return " ".join(_expand(options, env).split())


def _entries(texts, entries_dir):
    """Entry paths, newest kernel first (GRUB's blscfg and systemd-boot sort by version, descending)."""
    paths = [p for p in texts if p.startswith(entries_dir + "/") and p.endswith(".conf")]
    return sorted(
        paths, key=lambda p: _version_key(parse_entry(texts[p]).get("version") or os.path.basename(p)), reverse=True
    )


def _default_entry(texts, entries, saved=None, pattern=None):
    """The entry the next boot takes: GRUB's ``saved_entry`` (an entry id: its file name without
    ``.conf``, or its title), systemd-boot's ``default`` glob, else the newest."""
    for p in entries:
        entry_id = os.path.basename(p)[: -len(".conf")]
        if saved and saved in (entry_id, parse_entry(texts[p]).get("title")):
            return p
        if pattern and (fnmatch.fnmatch(entry_id, pattern) or fnmatch.fnmatch(entry_id + ".conf", pattern)):
            return p
    return entries[0] if entries else None


def _bls_next_boot(texts):
    env = dict(parse_grubenv(texts.get(GRUBENV)))
    entries = _entries(texts, BLS_ENTRIES)
    default = _default_entry(texts, entries, saved=env.get("saved_entry"))
    if default is None:
        return None, {}
    return expand_options(parse_entry(texts[default]).get("options", ""), env), default


def _replace_options(text, new_options):
    """``text`` with its ``options`` line(s) replaced by one line holding ``new_options``."""
    out, done = [], False
    for line in text.splitlines(True):
        if re.match(r"^\s*options(\s|$)", line):
            if not done:
                out.append("options %s%s" % (new_options, "\n" if line.endswith("\n") else ""))
                done = True
            continue
        out.append(line)
    if not done:
        out.append(("" if not text or text.endswith("\n") else "\n") + "options %s\n" % new_options)
    return "".join(out)


def _var_names(words):
    names = []
    for w in words:
        for m in _VAR.finditer(w):
            names.append(m.group(1) or m.group(2))
    return names


def _entries_edit(texts, entries, want, managed, env):
    """Every entry's options: managed arguments written inline, except in an entry whose options
    take ``$kernelopts`` from grubenv (EL8, what grubby --update-kernel=ALL edits there). Returns
    (new texts, names of the grubenv variables the entries reference, whether kernelopts holds
    hostkit's arguments)."""
    new, referenced, in_kernelopts = {}, set(), False
    remove = set(managed) - set(want)
    for p in entries:
        words = cmdline_words(parse_entry(texts[p]).get("options", ""))
        names = _var_names(words)
        referenced.update(names)
        uses_kernelopts = "kernelopts" in names and "kernelopts" in env
        in_kernelopts = in_kernelopts or uses_kernelopts
        edited = edit_words(words, {} if uses_kernelopts else want, set(managed) if uses_kernelopts else remove)
        if edited != words:
            new[p] = _replace_options(texts[p], " ".join(edited))
    return new, referenced, in_kernelopts


def _bls_edit(texts, want, managed):
    env_pairs = parse_grubenv(texts.get(GRUBENV))
    env = dict(env_pairs)
    new, referenced, in_kernelopts = _entries_edit(texts, _entries(texts, BLS_ENTRIES), want, managed, env)
    if GRUBENV in texts and referenced:
        remove = set(managed) - set(want)
        pairs = []
        for k, v in env_pairs:
            if k == "kernelopts" and in_kernelopts:
                v = " ".join(edit_words(cmdline_words(v), want, remove))
            elif k in referenced:
                # Another variable an entry expands (tuned's tuned_params): hostkit's arguments win,
                # the same names are taken out of it so none appears twice at boot.
                v = " ".join(edit_words(cmdline_words(v), {}, set(managed)))
            pairs.append((k, v))
        if pairs != env_pairs:
            new[GRUBENV] = format_grubenv(pairs, len(texts[GRUBENV].encode("utf-8")))
    _kernel_cmdline_edit(texts, want, managed, new)
    return new


def _kernel_cmdline_edit(texts, want, managed, new):
    if KERNEL_CMDLINE in texts:
        text = texts[KERNEL_CMDLINE]
        words = cmdline_words(text)
        edited = edit_words(words, want, set(managed) - set(want))
        if edited != words:
            new[KERNEL_CMDLINE] = " ".join(edited) + "\n"


# --------------------------------------------------------------------------------------- systemd-boot


def _sdboot_next_boot(texts, esp):
    entries = _entries(texts, esp.rstrip("/") + "/loader/entries")
    conf = parse_loader_conf(texts.get(esp.rstrip("/") + "/loader/loader.conf"))
    default = _default_entry(texts, entries, pattern=conf.get("default"))
    if default is None:
        return None, {}
    return " ".join(parse_entry(texts[default]).get("options", "").split()), default


def parse_loader_conf(text):
    out = {}
    for line in (text or "").splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) == 2 and not parts[0].startswith("#"):
            out[parts[0]] = parts[1].strip()
    return out


def _sdboot_edit(texts, want, managed, esp):
    new = _entries_edit(texts, _entries(texts, esp.rstrip("/") + "/loader/entries"), want, managed, {})[0]
    _kernel_cmdline_edit(texts, want, managed, new)
    return new


# --------------------------------------------------------------------------------------- the interface


def next_boot(cfg, booted=None):
    """The kernel command line the next boot will use (None for ``none`` and ``uki``), and the file
    it comes from (the default entry for BLS and systemd-boot)."""
    texts, backend = cfg["texts"], cfg["backend"]
    if backend == "grub-debian":
        return _grub_next_boot(texts, booted), GRUB
    if backend == "bls":
        return _bls_next_boot(texts)
    if backend == "systemd-boot":
        return _sdboot_next_boot(texts, cfg["esp"])
    return None, None


def every_boot_cmdline(cfg, booted=None):
    """The command line of every entry the boot loader offers (path -> text): what must hold
    hostkit's arguments, whichever entry boots next."""
    texts = cfg["texts"]
    if cfg["backend"] == "grub-debian":
        return {GRUB: _grub_next_boot(texts, booted)}
    if cfg["backend"] == "bls":
        env = dict(parse_grubenv(texts.get(GRUBENV)))
        return {p: expand_options(parse_entry(texts[p]).get("options", ""), env) for p in _entries(texts, BLS_ENTRIES)}
    if cfg["backend"] == "systemd-boot":
        return {
            p: " ".join(parse_entry(texts[p]).get("options", "").split())
            for p in _entries(texts, cfg["esp"].rstrip("/") + "/loader/entries")
        }
    return {}


def edit(cfg, want, remove=()):
    """path -> new text (None: remove the file) for every file to change so that each argument
    in ``want`` appears exactly once, with hostkit's value, in every boot entry (and in
    ``/etc/kernel/cmdline`` for new kernels) and none named in ``remove`` or set by another
    tool under a managed name survives. Checked on the result before it is returned."""
    managed = set(want) | set(remove)
    backend = cfg["backend"]
    if backend == "grub-debian":
        new = _grub_edit(cfg["texts"], want, managed)
    elif backend == "bls":
        new = _bls_edit(cfg["texts"], want, managed)
    elif backend == "systemd-boot":
        new = _sdboot_edit(cfg["texts"], want, managed, cfg["esp"])
    else:
        raise BootConfigError(describe_uki(cfg) if backend == "uki" else describe_none(cfg))
    after = dict(cfg, texts=dict(cfg["texts"]))
    for p, text in new.items():
        if text is None:
            after["texts"].pop(p, None)
        else:
            after["texts"][p] = text
    problems = check(after, want, remove)
    if problems:
        raise BootConfigError(
            "the edited boot configuration would still be wrong, nothing changed: " + "; ".join(problems)
        )
    return new


def check(cfg, want, remove=(), booted=None):
    """What is wrong in ``cfg`` for ``want``/``remove``: one line per entry and argument."""
    problems = []
    for path, line in sorted(every_boot_cmdline(cfg, booted).items()):
        words = cmdline_words(line or "")
        for name, value in sorted(want.items()):
            found = [w for w in words if arg_name(w) == name]
            if found != [format_arg(name, value)]:
                problems.append("%s: %s appears as %s" % (path, name, found or "nothing"))
        for name in sorted(remove):
            if any(arg_name(w) == name for w in words):
                problems.append("%s: %s is still there" % (path, name))
    return problems


def boot_loader_facts(sysroot, booted=None):
    """``kernel.boot_loader`` and ``kernel.next_boot_cmdline`` of the facts document."""
    cfg = detect(sysroot)
    line, source = next_boot(cfg, booted)
    facts = {"backend": cfg["backend"], "files": cfg["files"], "next_boot_source": source}
    if cfg["backend"] in ("none", "uki"):
        facts["found"] = cfg["found"]
        facts["reason"] = describe_uki(cfg) if cfg["backend"] == "uki" else describe_none(cfg)
    return facts, line


__all__ = [
    "BACKENDS",
    "BootConfigError",
    "detect",
    "edit",
    "check",
    "next_boot",
    "every_boot_cmdline",
    "boot_loader_facts",
    "grub_effective",
    "parse_grubenv",
    "format_grubenv",
    "parse_entry",
    "split_cmdline",
]
