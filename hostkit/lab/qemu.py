"""QEMU on this machine: its binary and build, the accelerator that really runs guests here, and
the cache where the real-kernel lab keeps what it made with them.

The cache (``/var/cache/hostkit/vm`` or ``$HOSTKIT_VM_CACHE``) lives outside the checkout, so a
fresh clone on the same machine reuses it. It holds the guest images (:mod:`hostkit.lab.vm_image`),
their guests' saved states (:mod:`hostkit.lab.vm_state`) and the accelerator probe's answer.

Acceleration: KVM where it really runs a guest (probed once per QEMU build and cached),
TCG (``-cpu max``, multi-threaded) everywhere else. On this project's 2-core CI machine KVM
does not run guests, so they are TCG: slow, but real kernels.

Everything the lab's other modules share about QEMU itself is here, below all of them: the
guests (:mod:`hostkit.lab.vm`) and the image build (:mod:`hostkit.lab.vm_image`) both start QEMU.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

QEMU = "qemu-system-x86_64"
ACCEL_FILE = "accel.json"  # in the cache: {"qemu": <version line>, "kvm": bool}
TCG = ["-accel", "tcg,thread=multi", "-cpu", "max"]
KVM = ["-accel", "kvm", "-cpu", "host"]


def cache_dir() -> Path:
    """The lab's QEMU cache: guest images, saved states, the accelerator probe."""
    return Path(os.environ.get("HOSTKIT_VM_CACHE", "/var/cache/hostkit/vm"))


def version() -> str:
    """QEMU's version line (a saved state loads only into the build that wrote it)."""
    out = subprocess.run([QEMU, "--version"], stdin=subprocess.DEVNULL, capture_output=True, text=True).stdout
    return out.splitlines()[0] if out else "unknown"


def kvm_runs_guests(kernel: Path, timeout: float = 20.0) -> bool:
    """Does a guest kernel really start under KVM here? (QEMU may hang or abort even with /dev/kvm.)"""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    cmd = [
        QEMU,
        *KVM,
        "-m",
        "256",
        "-nographic",
        "-no-reboot",
        "-monitor",
        "none",
        "-kernel",
        str(kernel),
        "-append",
        "console=ttyS0 panic=-1",
    ]
    try:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
    except OSError:
        return False
    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + timeout
    try:
        os.set_blocking(proc.stdout.fileno(), False)
        while time.monotonic() < deadline and proc.poll() is None:
            chunk = proc.stdout.read() or b""
            seen += chunk
            if b"Linux version" in seen:
                return True
            time.sleep(0.2)
        seen += proc.stdout.read() or b""
        return b"Linux version" in seen
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def accel_args(kernel: Path | None = None) -> list[str]:
    """QEMU arguments for the best accelerator that really runs guests here.

    ``HOSTKIT_VM_ACCEL=tcg|kvm`` overrides the probe; the probe's answer is cached per QEMU build.
    The probe boots ``kernel`` (a guest image's); without one, or before it exists, the answer is
    TCG until a call with a kernel probes.
    """
    forced = os.environ.get("HOSTKIT_VM_ACCEL")
    if forced in ("tcg", "kvm"):
        return list(KVM if forced == "kvm" else TCG)
    cache = cache_dir() / ACCEL_FILE
    build = version()
    try:
        known = json.loads(cache.read_text())
        if known.get("qemu") == build:
            return list(KVM if known["kvm"] else TCG)
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    if kernel is None or not kernel.exists():
        return list(TCG)  # nothing to probe with yet; the next call with a kernel probes
    works = kvm_runs_guests(kernel)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"qemu": build, "kvm": works}) + "\n")
    return list(KVM if works else TCG)


def accel_name(args: list[str]) -> str:
    return "kvm" if "kvm" in args else "tcg"
