"""The real-kernel lab's guest image: a Debian bookworm disk built once from Debian packages.

``ensure_image()`` returns a cached, verified base image, building it when it is missing,
partial or corrupt. It lives in the lab's QEMU cache outside the checkout
(:func:`hostkit.lab.qemu.cache_dir`), keyed by the package list and the build recipe, so a fresh
clone on the same machine (CI) reuses it. Each guest boots a copy-on-write overlay of it.

How it is built, with no loop mounts and no network but the machine's apt sources:

1. ``mmdebstrap`` installs the packages into a directory (the machine's own apt sources);
2. hostkit writes the guest's configuration (fstab, networkd, sshd, the seed unit that takes
   each guest's SSH host key, authorized key, hostname and machine-id from QEMU ``fw_cfg`` at
   boot, and the reseed a guest resumed from a saved state runs: :mod:`hostkit.lab.vm_state`);
3. ``mke2fs -d`` turns the directory into an ext4 disk (whole disk, no partition table);
4. a first boot runs the guest's own ``update-initramfs`` (``MODULES=dep``: the modules this
   machine needs) and ``update-grub``, so ``/boot/grub/grub.cfg`` is the one Debian's
   ``grub-mkconfig`` writes, then powers off; ``debugfs`` checks it from outside;
5. ``qemu-img convert`` makes the qcow2 base; a manifest with its sha256 marks it complete.

Guests boot through a GRUB rescue ISO (``grub-mkrescue``) whose only job is to load the
disk's own ``/boot/grub/grub.cfg``: what hostkit writes to ``/etc/default/grub.d/`` and the
``update-grub`` it runs are exactly what the next boot uses.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from hostkit.errors import LabError
from hostkit.lab.qemu import QEMU, accel_args, cache_dir

RECIPE_VERSION = "2"
SUITE = "bookworm"
PACKAGES = (
    "systemd-sysv",
    "udev",
    "kmod",
    "openssh-server",
    "python3",
    "linux-image-amd64",
    "grub-pc-bin",
    "grub2-common",
    "irqbalance",
    "iproute2",
    "procps",
    "rt-tests",
    "numactl",
    "util-linux",
    "e2fsprogs",
    "dbus",
    "tuned",
    "qemu-guest-agent",
)
# Installed for the tuned coexistence test (tests/vm/test_tuned.py) but disabled: a guest runs tuned
# only when a test enables it (`systemctl enable --now tuned`), so every other guest is tuned-free.
DISABLED_UNITS = ("tuned.service",)
DISK_SIZE = "3G"
# Periodic jobs that would wake up in a lab guest (and reach for a network it does not have):
# masked, so what runs in the guest is the kernel, sshd, irqbalance and what hostkit starts.
MASKED_UNITS = (
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "man-db.timer",
    "e2scrub_all.timer",
    "e2scrub_reap.service",
    "fstrim.timer",
    "dpkg-db-backup.timer",
    "systemd-timesyncd.service",
)
FIRSTBOOT_TIMEOUT = 600  # seconds; TCG on a busy 2-core machine
TOOLS = {
    "mmdebstrap": "mmdebstrap",
    "mke2fs": "e2fsprogs",
    "debugfs": "e2fsprogs",
    "qemu-img": "qemu-utils",
    "qemu-system-x86_64": "qemu-system-x86",
    "grub-mkrescue": "grub-common (+ grub-pc-bin, xorriso, mtools)",
    "xorriso": "xorriso",
}

SEED_SCRIPT = """#!/bin/sh
# hostkit lab: seed this guest from the QEMU fw_cfg entries `hostkit lab up --vm` passes
# (its SSH host key, the lab's client key, its name, its machine-id). Files are rewritten only
# when they differ. Run at every boot, and by hostkit-reseed after a resume from a saved state.
set -e
modprobe qemu_fw_cfg 2>/dev/null || true
d=/sys/firmware/qemu_fw_cfg/by_name/opt/hostkit
[ -d "$d" ] || { echo "hostkit-seed: no fw_cfg entries: not a hostkit lab guest" >&2; exit 0; }
put() {  # put SRC DEST MODE
    [ -r "$d/$1/raw" ] || return 0
    tmp="$2.hostkit-seed"
    cat "$d/$1/raw" > "$tmp"
    chmod "$3" "$tmp"
    if cmp -s "$tmp" "$2"; then rm -f "$tmp"; else mv "$tmp" "$2"; fi
}
install -d -m 0700 /root/.ssh
put host_key /etc/ssh/ssh_host_ed25519_key 0600
put host_key_pub /etc/ssh/ssh_host_ed25519_key.pub 0644
put authorized_keys /root/.ssh/authorized_keys 0600
put hostname /etc/hostname 0644
put machine_id /etc/machine-id 0444
hostname -F /etc/hostname
"""

# Run through the guest agent (guest-exec) once a guest resumed from a saved state, before anything
# talks to it: the state was saved with sshd stopped and the template's identity; the fw_cfg driver
# is reloaded so it lists this QEMU's entries (their sizes differ from the template's), then the
# same seed as at boot gives the guest its own host key, client key, hostname and machine-id, and
# sshd starts with them. The wall clock is set by the lab through the agent (guest-set-time).
RESEED_SCRIPT = """#!/bin/sh
# hostkit lab: this guest was resumed from a saved state: take this QEMU's identity, then start sshd.
set -e
rmmod qemu_fw_cfg 2>/dev/null || true
/usr/local/sbin/hostkit-seed
systemctl start ssh.service
"""

SEED_UNIT = """[Unit]
Description=hostkit lab: SSH host key, authorized key and hostname from QEMU fw_cfg
DefaultDependencies=no
After=local-fs.target systemd-modules-load.service
Before=ssh.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/hostkit-seed

[Install]
WantedBy=multi-user.target
"""

FIRSTBOOT_UNIT = """[Unit]
Description=hostkit lab image build: the initrd for this machine and grub.cfg, by the guest's own tools, power off
ConditionPathExists=/etc/hostkit-image-firstboot
After=local-fs.target

[Service]
Type=oneshot
ExecStart=/bin/sh -c '{ update-initramfs -u -k all && update-grub; } > /var/log/hostkit-firstboot.log 2>&1 && rm -f /etc/hostkit-image-firstboot && sync && systemctl poweroff --no-block || { echo FAILED >> /var/log/hostkit-firstboot.log; sync; systemctl poweroff --no-block; }'

[Install]
WantedBy=multi-user.target
"""

SSHD_DROPIN = """# hostkit lab guest: key-only root login, one host key (seeded per guest from fw_cfg)
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
MaxStartups 64:30:128
MaxSessions 64
"""

NETWORK = """# hostkit lab guest: DHCP from QEMU user networking on the virtio NIC
[Match]
Name=en* eth*

[Network]
DHCP=ipv4
"""

INITRAMFS_CONF = """# hostkit lab guest: only the modules this machine needs (see initramfs.conf(5))
MODULES=dep
"""

RESCUE_CFG = """# hostkit lab: GRUB rescue image. Its only job: load the guest disk's own grub.cfg,
# the one update-grub writes, so what hostkit changes is exactly what the next boot uses.
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=0
set root=(hd0)
configfile /boot/grub/grub.cfg
"""


def image_key() -> str:
    recipe = json.dumps(
        {
            "suite": SUITE,
            "packages": sorted(PACKAGES),
            "recipe": RECIPE_VERSION,
            "files": [
                SEED_SCRIPT,
                RESEED_SCRIPT,
                SEED_UNIT,
                INITRAMFS_CONF,
                FIRSTBOOT_UNIT,
                SSHD_DROPIN,
                NETWORK,
                RESCUE_CFG,
            ],
            "size": DISK_SIZE,
            "masked": MASKED_UNITS,
            "disabled": DISABLED_UNITS,
        },
        sort_keys=True,
    )
    return hashlib.sha256(recipe.encode()).hexdigest()[:16]


def missing_tools() -> list[str]:
    """Tools the VM lab needs that this machine lacks, as 'tool (package)'."""
    return [f"{tool} ({pkg})" for tool, pkg in TOOLS.items() if shutil.which(tool) is None]


def file_sha256(path: Path) -> str:
    """A file's SHA-256, read in 1 MiB blocks (images and saved states are large)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _run(cmd: list[str], what: str, timeout: float | None = None, **kw) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        raise LabError(f"{what}: timed out after {timeout:.0f} s ({' '.join(cmd[:3])} ...)") from None
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-4:])
        raise LabError(f"{what} failed (exit {proc.returncode}): {tail}")
    return proc


class Image:
    """A cache entry: ``<cache>/<key>/`` holding ``base.qcow2``, ``boot.iso``, ``manifest.json``."""

    def __init__(self, root: Path | None = None, key: str | None = None) -> None:
        self.key = key or image_key()
        self.dir = (root or cache_dir()) / self.key
        self.base = self.dir / "base.qcow2"
        self.iso = self.dir / "boot.iso"
        self.kernel = self.dir / "vmlinuz"  # extracted for the KVM probe; never used to boot a lab guest
        self.manifest = self.dir / "manifest.json"

    def problem(self) -> str | None:
        """Why this entry is not usable (None when it is complete and intact)."""
        if not self.manifest.exists():
            return "no manifest (never built, or a build was cut off)"
        try:
            m = json.loads(self.manifest.read_text())
        except (OSError, ValueError):
            return "unreadable manifest"
        for name in ("base.qcow2", "boot.iso", "vmlinuz"):
            p = self.dir / name
            if not p.exists():
                return f"{name} missing"
            if p.stat().st_size != m.get("sizes", {}).get(name):
                return f"{name} has the wrong size"
        if file_sha256(self.base) != m.get("sha256"):
            return "base.qcow2 does not match its recorded sha256"
        return None

    def ensure(self, progress=None) -> Image:
        """The verified image, built first when missing, partial or corrupt. One build at a time
        per cache (a lock file); a second caller waits and then finds it ready."""
        if self.problem() is None:
            return self
        self.dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.dir.parent / ".build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            problem = self.problem()
            if problem is None:
                return self
            if self.dir.exists() and progress:
                progress(f"guest image cache {self.dir}: {problem}; rebuilding")
            self.build(progress)
            self._prune_others()
        return self

    def _prune_others(self) -> None:
        """Entries of older recipes and partial builds left by a killed build (we hold the lock)."""
        for entry in self.dir.parent.iterdir():
            if entry == self.dir or not entry.is_dir():
                continue
            name = entry.name.split(".partial-")[0]
            if len(name) == 16 and all(c in "0123456789abcdef" for c in name):
                shutil.rmtree(entry, ignore_errors=True)

    def build(self, progress=None) -> None:
        say = progress or (lambda msg: None)
        missing = missing_tools()
        if missing:
            raise LabError("the VM lab needs " + ", ".join(missing) + ": `make setup` installs them")
        self.dir.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"{self.key}.partial-", dir=self.dir.parent))
        try:
            rootfs = work / "rootfs"
            t0 = time.monotonic()
            say(f"building the guest root file system with mmdebstrap ({SUITE}, {len(PACKAGES)} packages)")
            _run(
                ["mmdebstrap", "--variant=minbase", "--include=" + ",".join(PACKAGES), SUITE, str(rootfs)],
                "mmdebstrap",
                timeout=1800,
            )
            self._configure(rootfs)
            kernels = sorted((rootfs / "boot").glob("vmlinuz-*"))
            if not kernels:
                raise LabError("the guest root file system has no kernel in /boot")
            shutil.copy2(kernels[-1], work / "vmlinuz")
            raw = work / "disk.raw"
            say(f"making the ext4 disk ({DISK_SIZE}) with mke2fs -d")
            _run(["mke2fs", "-q", "-t", "ext4", "-L", "hostkit-root", "-d", str(rootfs), str(raw), DISK_SIZE], "mke2fs")
            shutil.rmtree(rootfs)
            self._rescue_iso(work / "boot.iso")
            say("first boot: the guest's own update-grub writes /boot/grub/grub.cfg (TCG: a minute or two)")
            self._firstboot(raw, work / "boot.iso", work / "firstboot.log", work / "vmlinuz")
            say("converting to the qcow2 base image")
            _run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(work / "base.qcow2")], "qemu-img convert")
            raw.unlink()
            sizes = {n: (work / n).stat().st_size for n in ("base.qcow2", "boot.iso", "vmlinuz")}
            manifest = {
                "key": self.key,
                "suite": SUITE,
                "packages": list(PACKAGES),
                "sizes": sizes,
                "sha256": file_sha256(work / "base.qcow2"),
                "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_seconds": round(time.monotonic() - t0, 1),
            }
            (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
            if self.dir.exists():
                shutil.rmtree(self.dir)
            os.rename(work, self.dir)  # atomic: a cut-off build never looks complete
            say(f"guest image ready in {manifest['build_seconds']} s: {self.dir}")
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)

    @staticmethod
    def _configure(root: Path) -> None:
        def write(rel: str, text: str, mode: int = 0o644) -> None:
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
            os.chmod(p, mode)

        write("etc/fstab", "# hostkit lab guest\n/dev/vda / ext4 errors=remount-ro 0 1\n")
        write("etc/hostname", "hostkit-guest\n")
        write("etc/hosts", "127.0.0.1 localhost\n")
        write("etc/systemd/network/80-hostkit-dhcp.network", NETWORK)
        write("etc/ssh/sshd_config.d/hostkit-lab.conf", SSHD_DROPIN)
        write("usr/local/sbin/hostkit-seed", SEED_SCRIPT, 0o755)
        write("usr/local/sbin/hostkit-reseed", RESEED_SCRIPT, 0o755)
        write("etc/systemd/system/hostkit-seed.service", SEED_UNIT)
        write("etc/systemd/system/hostkit-firstboot.service", FIRSTBOOT_UNIT)
        write("etc/hostkit-image-firstboot", "")
        # The initrd holds only the modules this (virtual) machine needs, found by the first boot's
        # update-initramfs on the guest itself: a tenth of Debian's MODULES=most, which GRUB loads
        # through the emulated BIOS and the kernel unpacks at every boot of every guest.
        write("etc/initramfs-tools/conf.d/hostkit-lab.conf", INITRAMFS_CONF)
        # Debian's grub-pc postinst would create /etc/default/grub from this template.
        template = (root / "usr/share/grub/default/grub").read_text()
        template = template.replace("GRUB_TIMEOUT=5", "GRUB_TIMEOUT=0")
        template = template.replace(
            'GRUB_CMDLINE_LINUX_DEFAULT="quiet"', 'GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0,115200"'
        )
        template += '\nGRUB_TERMINAL="serial console"\nGRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"\n'
        write("etc/default/grub", template)
        # Host keys made by openssh-server's postinst would be shared by every guest: drop them.
        for key in (root / "etc/ssh").glob("ssh_host_*"):
            key.unlink()
        # The first boot runs before any grub.cfg exists: a minimal one, replaced by update-grub.
        kernel = sorted((root / "boot").glob("vmlinuz-*"))[-1].name
        initrd = kernel.replace("vmlinuz", "initrd.img")
        write(
            "boot/grub/grub.cfg",
            f"set timeout=0\nlinux /boot/{kernel} root=/dev/vda ro console=ttyS0,115200\ninitrd /boot/{initrd}\nboot\n",
        )
        for unit in ("systemd-networkd.service", "hostkit-seed.service", "hostkit-firstboot.service"):
            _run(["chroot", str(root), "systemctl", "enable", unit], f"systemctl enable {unit} in the image")
        for unit in DISABLED_UNITS:  # enabled by the package's postinst (dh_installsystemd)
            _run(["chroot", str(root), "systemctl", "disable", unit], f"systemctl disable {unit} in the image")
        for unit in MASKED_UNITS:
            (root / "etc/systemd/system" / unit).unlink(missing_ok=True)
            (root / "etc/systemd/system" / unit).symlink_to("/dev/null")
        # Root may log in only with the lab's key (seeded per guest); no password.
        _run(["chroot", str(root), "passwd", "-l", "root"], "passwd -l root in the image")

    @staticmethod
    def _rescue_iso(dest: Path) -> None:
        src = dest.parent / "iso-src"
        (src / "boot/grub").mkdir(parents=True)
        (src / "boot/grub/grub.cfg").write_text(RESCUE_CFG)
        _run(["grub-mkrescue", "-o", str(dest), str(src), "--", "-volid", "HOSTKIT_BOOT"], "grub-mkrescue", timeout=300)
        shutil.rmtree(src)

    @staticmethod
    def _firstboot(raw: Path, iso: Path, log: Path, kernel: Path) -> None:
        """Boot the new disk once (``kernel``, the image's own, is what the accelerator probe boots)."""
        cmd = [
            QEMU,
            *accel_args(kernel),
            "-m",
            "1024",
            "-smp",
            "2",
            "-nographic",
            "-no-reboot",
            "-serial",
            f"file:{log}",
            "-monitor",
            "none",
            "-drive",
            f"file={raw},format=raw,if=virtio",
            "-cdrom",
            str(iso),
            "-boot",
            "d",
            "-netdev",
            "user,id=n0,restrict=on",
            "-device",
            "virtio-net-pci,netdev=n0",
        ]
        _run(cmd, "the image's first boot (update-grub)", timeout=FIRSTBOOT_TIMEOUT)
        cfg = subprocess.run(
            ["debugfs", "-R", "cat /boot/grub/grub.cfg", str(raw)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
        marker = subprocess.run(
            ["debugfs", "-R", "stat /etc/hostkit-image-firstboot", str(raw)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
        if "### BEGIN /etc/grub.d/10_linux ###" not in cfg.stdout or "not found" not in marker.stderr:
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:]) if log.exists() else ""
            raise LabError(f"the image's first boot did not write grub.cfg with update-grub: {tail}")


def ensure_image(progress=None) -> Image:
    return Image().ensure(progress)
