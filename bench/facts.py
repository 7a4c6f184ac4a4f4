#!/usr/bin/env python3
"""Benchmark: `hostkit facts --sysroot` against `lscpu --sysroot` on the largest fixture.

Both are run as whole commands (process start included), interleaved, in the
same run; medians and the ratio are printed. Target: hostkit <= 2x lscpu.
Also printed: the in-process cost of `gather()` alone, for reference.

    .venv/bin/python bench/facts.py [--runs N] [--fixture NAME]
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hostkit.facts import gather
from hostkit.lab import fixtures


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--fixture", default=None, help="default: the fixture with the most CPUs")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        if args.fixture:
            name = args.fixture
        else:
            sizes = {}
            for n in fixtures.fixture_names():
                root = fixtures.materialize(n, Path(tmp) / n)
                sizes[n] = gather(str(root))["topology"]["cpus"]
            name = max(sizes, key=sizes.get)
        root = str(fixtures.materialize(name, Path(tmp) / f"bench-{name}"))
        cpus = gather(root)["topology"]["cpus"]
        # The installed console script, as operators run it; bytecode compiled as pip does at install.
        compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "hostkit"), quiet=1)
        hostkit_cmd = [str(Path(sys.executable).parent / "hostkit"), "facts", "--sysroot", root, "--json"]
        lscpu_cmd = ["lscpu", "--sysroot", root]
        for _ in range(3):  # warm the page cache and the interpreter's .pyc files
            timed(hostkit_cmd)
            timed(lscpu_cmd)
        hk, ls, inproc = [], [], []
        for _ in range(args.runs):
            hk.append(timed(hostkit_cmd))
            ls.append(timed(lscpu_cmd))
            t = time.perf_counter()
            gather(root)
            inproc.append(time.perf_counter() - t)
    h, lsc, g = statistics.median(hk), statistics.median(ls), statistics.median(inproc)
    print(f"fixture: {name} ({cpus} CPUs), {args.runs} interleaved runs, medians")
    print(f"  lscpu --sysroot            {lsc * 1000:8.1f} ms")
    print(f"  hostkit facts --sysroot    {h * 1000:8.1f} ms   (whole command, --json)")
    print(f"  gather() in-process        {g * 1000:8.1f} ms")
    ratio = h / lsc
    print(f"ratio hostkit/lscpu: {ratio:.2f}  (target <= 2.00: {'met' if ratio <= 2.0 else 'MISSED'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
