#!/usr/bin/env python3
"""Benchmark: `hostkit lab up --vm g1=PRESET` from a warm image cache to SSH-ready, resumed from the
preset's saved state against booted through GRUB (`--boot`), alternating, in the same run.

The path users run, end to end: the CLI process, the cache checks (sha256 of the image and of the
state), QEMU's start, the resume (load, clock, the guest's new identity) or the boot, and the lab's
wait for the guest's sshd; then one `ssh g1 true` (the first login). `lab down` is not timed.
The image and the preset's state are made first (not timed). Target: resume <= 20 s.

    .venv/bin/python bench/lab_up.py [--runs N] [--preset numa2] [--port 2950]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hostkit.lab import qemu, vm
from hostkit.lab.vm_image import ensure_image
from hostkit.lab.vm_state import SavedState

HOSTKIT = str(Path(sys.executable).parent / "hostkit")


def up(lab: Path, preset: str, port: int, boot: bool) -> tuple[float, float]:
    """Seconds to `lab up` returning (sshd answers), and to the first `ssh true` after it."""
    t0 = time.perf_counter()
    subprocess.run(
        [
            HOSTKIT,
            "lab",
            "up",
            "--dir",
            str(lab),
            "--vm",
            f"g1={preset}",
            "--port",
            str(port),
            *(["--boot"] if boot else []),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ready = time.perf_counter() - t0
    subprocess.run(["ssh", "-F", str(lab / "ssh_config"), "g1", "true"], check=True, timeout=600)
    login = time.perf_counter() - t0
    subprocess.run([HOSTKIT, "lab", "down", "--dir", str(lab)], check=True, stdout=subprocess.DEVNULL)
    return ready, login


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--preset", default="numa2", choices=sorted(vm.PRESETS))
    ap.add_argument("--port", type=int, default=2950)
    args = ap.parse_args()

    image = ensure_image(progress=print)
    state = SavedState(image, args.preset, qemu.accel_args(image.kernel))
    why = state.ensure(print)
    if why:
        print(f"no saved state of {args.preset}: {why}")
        return 1
    times: dict[str, list[tuple[float, float]]] = {"resume": [], "boot": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            for mode in ("resume", "boot") if i % 2 == 0 else ("boot", "resume"):
                times[mode].append(up(Path(tmp) / f"{mode}{i}", args.preset, args.port, mode == "boot"))
                print(
                    f"run {i + 1} {mode:6s}: sshd answers {times[mode][-1][0]:6.1f} s, first login "
                    f"{times[mode][-1][1]:6.1f} s (load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
    med = {m: (statistics.median(t[0] for t in v), statistics.median(t[1] for t in v)) for m, v in times.items()}
    print(f"\nhostkit lab up --vm g1={args.preset}, warm cache, {qemu.accel_name(state.accel)}, median of {args.runs}:")
    for m in ("resume", "boot"):
        print(f"  {m:6s}  sshd answers {med[m][0]:6.1f} s   first login {med[m][1]:6.1f} s")
    print(
        f"  boot / resume: {med['boot'][1] / med['resume'][1]:.1f}x to the first login; "
        f"target resume <= 20 s: {'met' if med['resume'][1] <= 20 else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
