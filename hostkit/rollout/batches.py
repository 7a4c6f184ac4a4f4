"""Batches of a rollout: canaries first, then ``N`` hosts or ``P%`` of the fleet at a time.

Pure functions on host names (inventory order, after ``--limit``); bad input raises
:class:`~hostkit.errors.BadInput` before anything runs.
"""

from __future__ import annotations

import math
import re

from hostkit.errors import BadInput


def batch_size(spec: str, fleet: int) -> int:
    """``N`` (hosts) or ``P%`` (of the fleet, rounded up, at least one host) for a fleet of ``fleet`` hosts."""
    text = str(spec).strip()
    m = re.fullmatch(r"(\d+)(%?)", text)
    if not m:
        raise BadInput(f"--batch expects N (hosts) or P% (of the fleet), got {spec!r}")
    value = int(m.group(1))
    if m.group(2):
        if not 0 < value <= 100:
            raise BadInput(f"--batch {text}: a percentage must be 1-100%")
        return max(1, math.ceil(value * fleet / 100))
    if value < 1:
        raise BadInput(f"--batch {text}: a batch needs at least one host")
    if value > fleet:
        raise BadInput(f"--batch {text} is larger than the fleet ({fleet} host(s) after --limit)")
    return value


def plan_batches(hosts: list[str], batch: str, canary: int = 0) -> list[list[str]]:
    """The batches, in order: the first ``canary`` hosts alone as the first batch (when given),
    then the others ``batch`` at a time, in inventory order."""
    if not hosts:
        raise BadInput("no host to roll out to")
    if len(set(hosts)) != len(hosts):
        raise BadInput("a host is listed twice")
    size = batch_size(batch, len(hosts))
    if canary < 0:
        raise BadInput(f"--canary must be 0 or more hosts, got {canary}")
    if canary >= len(hosts) and len(hosts) > 1:
        raise BadInput(f"--canary {canary} leaves no host after the canaries (fleet: {len(hosts)} host(s))")
    if canary > len(hosts):
        raise BadInput(f"--canary {canary} is larger than the fleet ({len(hosts)} host(s))")
    out = [hosts[:canary]] if canary else []
    rest = hosts[canary:]
    out += [rest[i : i + size] for i in range(0, len(rest), size)]
    return out


def check_max_unavailable(value: int | None) -> None:
    if value is not None and value < 1:
        raise BadInput(f"--max-unavailable must be 1 or more hosts, got {value}")


def next_wave(hosts: list[str], max_unavailable: int | None, out: int = 0) -> list[str]:
    """The next hosts of a batch to take out of service together: all of ``hosts`` (None), or at
    most ``max_unavailable`` minus the ``out`` hosts of the fleet already out of service (failed and
    left drained); empty when no host may go out (the rollout must stop)."""
    if max_unavailable is None:
        return list(hosts)
    return list(hosts[: max(0, max_unavailable - out)])
