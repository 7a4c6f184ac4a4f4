"""Shared by the fleet benchmarks (apply_fleet.py, audit_fleet.py): one fresh lab of identical
hosts per fleet size, the machine's busy CPU time, and the N-host/1-host ratio against a target."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hostkit.lab.lab import Lab  # noqa: E402


def machine_cpu_seconds() -> float:
    """Busy CPU time of the whole machine: the lab's sshd and remote Python run here too."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def fleets(sizes: list[int], fixture: str, port: int, prefix: str) -> Iterator[tuple[int, Lab, dict]]:
    """(n, lab, env) per size: a lab of n hosts built from ``fixture``, torn down after the caller's
    step; env points hostkit's state directory into a temporary directory."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, HOSTKIT_STATE_DIR=str(Path(tmp) / "state"))
        for n in sizes:
            lab = Lab(Path(tmp) / f"lab{n}")
            lab.up(host_specs=[(f"{prefix}-{i}", fixture) for i in range(1, n + 1)], port=port)
            try:
                yield n, lab, env
            finally:
                lab.down()


def print_ratio(results: dict[int, float], target: float) -> None:
    """The largest fleet's time over one host's, against the target."""
    if 1 in results and max(results) > 1:
        big = max(results)
        ratio = results[big] / results[1]
        print(f"ratio {big}-host/1-host: {ratio:.2f}  (target <= {target:.2f}: {'met' if ratio <= target else 'MISSED'})")
