#!/usr/bin/env python3
"""`make test`: the suites in their order, each suite's time, the ten slowest tests, the guest boots.

1. the fast suite, alone, in two parts: first the tests that time something on this machine or
   write its kernel state (markers ``measures`` and ``live``: smoke, gaps, live writes, restored),
   one at a time; then the rest (unit, fixtures, module cases, lint and sanity) on both cores
   (pytest-xdist, ``-n 2``);
2. then side by side: the lab suite (real sshd hosts), the real-kernel (VM) suite in two lanes
   (QEMU guests mostly wait on TCG: three processes keep the 2 cores busy) and the dependency
   floors (a fresh venv at the floors, then unit tests that measure nothing), which would
   otherwise wait for the last of them.

Each background suite writes its log to .hostkit/test-<suite>.log, printed after the lab suite's
own output. Any suite failing fails the run. At the end: each suite's outcome and wall time, the ten
slowest tests of the run (from each suite's JUnit XML) and the real-kernel guests started and the
kernel boots (tests/vmutil.py's log).

    .venv/bin/python scripts/run_tests.py [PYTEST_ARGS...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / ".hostkit"
FAST = "unit"
# The VM modules split in two lanes of about the same length (lane B on ports of its own). test_bmc.py
# stays in lane B: moved to lane A it ran beside the lab suite on the default ports, and 28 lab tests
# found 127.0.0.2:2325 taken.
VM_LANE_B = ["tests/vm/test_rollout.py", "tests/vm/test_tuned.py", "tests/vm/test_vmware.py", "tests/vm/test_bmc.py"]


def suite(name: str, marker: str, extra: list[str], args: list[str], env: dict | None = None) -> dict:
    return {
        "name": name,
        "argv": [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            marker,
            *extra,
            f"--junitxml={OUT / f'junit-{name}.xml'}",
            *args,
        ],
        "env": {**os.environ, **(env or {})},
    }


def start(s: dict, log: Path | None) -> None:
    s["t0"] = time.monotonic()
    out = open(log, "w") if log else None
    s["proc"] = subprocess.Popen(
        s["argv"], cwd=ROOT, env=s["env"], stdout=out, stderr=subprocess.STDOUT if out else None
    )
    s["log"] = log


def wait(s: dict) -> int:
    s["rc"] = s["proc"].wait()
    s["seconds"] = time.monotonic() - s["t0"]
    return s["rc"]


def wait_all(suites: list[dict]) -> None:
    """Wait for every suite, each timed when its own process ends (not when it is waited for)."""
    pending = list(suites)
    while pending:
        for s in list(pending):
            if s["proc"].poll() is not None:
                wait(s)
                pending.remove(s)
        time.sleep(1)


def slowest(suites: list[dict], n: int = 10) -> list[tuple[float, str, str]]:
    rows = []
    for s in suites:
        path = OUT / f"junit-{s['name']}.xml"
        if not path.exists():
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            rows.append((float(case.get("time") or 0), s["name"], f"{case.get('classname')}::{case.get('name')}"))
    return sorted(rows, reverse=True)[:n]


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:02.0f} s"


def main() -> int:
    args = sys.argv[1:]
    OUT.mkdir(exist_ok=True)
    boots = OUT / "test-guest-boots.jsonl"
    boots.unlink(missing_ok=True)
    vm_env = {"HOSTKIT_TEST_BOOT_LOG": str(boots)}
    t0 = time.monotonic()
    measure = suite("measure", f"{FAST} and (live or measures)", [], args)
    # pytest-xdist, each module's tests on one worker (module fixtures set up once, as alone)
    fast = suite(
        "fast", f"{FAST} and not live and not measures", ["-n", str(os.cpu_count() or 2), "--dist", "loadfile"], args
    )
    for s in (measure, fast):
        start(s, None)
        wait(s)
    lab = suite("lab", "lab", [], args)
    lane_a = suite("vm-a", "vm", [f"--ignore={m}" for m in VM_LANE_B], args, vm_env)
    lane_b = suite(
        "vm-b", "vm", VM_LANE_B, args, {**vm_env, "HOSTKIT_TEST_VM_PORT": "2600", "HOSTKIT_TEST_LAB_PORT": "2422"}
    )
    floors = suite("floors", "floors", [], args)
    print(
        "the lab suite next, beside the VM suite in two lanes and the dependency floors "
        "(.hostkit/test-vm-a.log, .hostkit/test-vm-b.log, .hostkit/test-floors.log)",
        flush=True,
    )
    for s in (lane_a, lane_b, floors):
        start(s, OUT / f"test-{s['name']}.log")
    start(lab, None)
    wait_all([lab, lane_a, lane_b, floors])
    for s in (floors, lane_a, lane_b):
        sys.stdout.write(s["log"].read_text())
    suites = [measure, fast, lab, lane_a, lane_b, floors]
    total = time.monotonic() - t0
    print("\n==================== make test ====================")
    for s in suites:
        outcome = "passed" if s["rc"] == 0 else f"FAILED (exit {s['rc']})"
        print(f"  {s['name']:7s} {outcome:16s} {minutes(s['seconds'])}")
    print(f"  all     {'passed' if all(s['rc'] == 0 for s in suites) else 'FAILED':16s} {minutes(total)}")
    print("the ten slowest tests:")
    for seconds, name, test in slowest(suites):
        print(f"  {seconds:7.1f} s  {name:7s} {test}")
    if boots.exists():
        sys.path.insert(0, str(ROOT))
        from tests.vmutil import guest_summary

        print(guest_summary([json.loads(line) for line in boots.read_text().splitlines() if line.strip()]))
    return 0 if all(s["rc"] == 0 for s in suites) else 1


if __name__ == "__main__":
    sys.exit(main())
