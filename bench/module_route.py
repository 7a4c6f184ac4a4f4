#!/usr/bin/env python3
"""Micro-benchmark (one part of an apply, not a user's whole command): one call of
``hostkit.tuning.hostkit_changes`` on a real-kernel guest, run as Ansible's module (the controller
without the hostkit package: the payload's module_utils compiled on the guest at every call)
against through the host's agent (the action plugin with hostkit on the controller), and one
``ping`` module round trip, alternating, in the same run.

Each call is a real ad hoc ``ansible`` run of a role-sized change set (a sysctl.d file and two
values) in check mode, so the guest's state never changes and every call does the same work.
Printed per route: the median wall time of the call and the guest's CPU for it (its QEMU
process's CPU time across the call, an idle guest's rate measured in the same run subtracted).
The guest is resumed from its preset's saved state (`hostkit lab up --vm g1=PRESET`); `hostkit
facts` first puts the agent in its cache (a host after its first hostkit run).

    .venv/bin/python bench/module_route.py [--runs 5] [--preset small] [--port 2960]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hostkit.ansible.run import close_masters
from hostkit.ansible.settings import runner_env
from hostkit.lab import vm
from hostkit.paths import project_root

BIN = Path(sys.executable).parent
CHANGES = [
    {
        "name": "conf",
        "file": {
            "path": "/etc/sysctl.d/61-hostkit-bench.conf",
            "content": "kernel.numa_balancing = 0\nvm.zone_reclaim_mode = 0\n",
        },
    },
    {
        "values": {
            "items": [
                {"path": "/proc/sys/kernel/numa_balancing", "value": 0, "kind": "int"},
                {"path": "/proc/sys/vm/zone_reclaim_mode", "value": 0, "kind": "int"},
            ]
        }
    },
    {"run": {"argv": ["sysctl", "--system"], "if_changed": ["conf"]}},
]


def qemu_cpu(pidfile: Path) -> float:
    """CPU seconds the guest's QEMU process has used (user + system)."""
    fields = Path(f"/proc/{pidfile.read_text().strip()}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def call(inventory: Path, env: dict, module: str, args: str) -> float:
    t = time.perf_counter()
    proc = subprocess.run(
        [str(BIN / "ansible"), "g1", "-i", str(inventory), "-m", module, "-a", args, "--check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{module}: exit {proc.returncode}: {proc.stdout[-800:]} {proc.stderr[-800:]}")
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--preset", default="small", choices=sorted(vm.PRESETS))
    ap.add_argument("--port", type=int, default=2960)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lab, state = Path(tmp) / "lab", Path(tmp) / "state"
        base = dict(os.environ, HOSTKIT_STATE_DIR=str(state))
        subprocess.run(
            [
                str(BIN / "hostkit"),
                "lab",
                "up",
                "--dir",
                str(lab),
                "--vm",
                f"g1={args.preset}",
                "--port",
                str(args.port),
            ],
            check=True,
            env=base,
        )
        try:
            inventory, pidfile = lab / "inventory.yml", lab / "hosts" / "g1" / "qemu.pid"
            subprocess.run(
                [str(BIN / "hostkit"), "facts", "-i", str(inventory)], check=True, env=base, stdout=subprocess.DEVNULL
            )
            control = Path(tmp) / "cp"
            control.mkdir()
            env = dict(base, **runner_env(project_root(), str(control)))
            shadow = Path(tmp) / "no-hostkit" / "hostkit"
            shadow.mkdir(parents=True)
            (shadow / "__init__.py").write_text("raise ImportError('no hostkit on this controller')\n")
            routes = {
                "ping (module round trip)": (dict(env), "ansible.builtin.ping", ""),
                "hostkit_changes as a module": (
                    dict(env, PYTHONPATH=str(shadow.parent)),
                    "hostkit.tuning.hostkit_changes",
                    None,
                ),
                "hostkit_changes via the agent": (dict(env), "hostkit.tuning.hostkit_changes", None),
            }
            payload = json.dumps({"run_id": "bench", "role": "numa_sysctl", "changes": CHANGES})
            c0, t0 = qemu_cpu(pidfile), time.perf_counter()
            time.sleep(20)
            idle = (qemu_cpu(pidfile) - c0) / (time.perf_counter() - t0)
            got: dict[str, list[tuple[float, float]]] = {name: [] for name in routes}
            for _ in range(args.runs):
                for name, (renv, module, margs) in routes.items():
                    c0 = qemu_cpu(pidfile)
                    wall = call(inventory, renv, module, payload if margs is None else margs)
                    got[name].append((wall, qemu_cpu(pidfile) - c0 - idle * wall))
        finally:
            if (Path(tmp) / "cp").is_dir():
                close_masters(str(Path(tmp) / "cp"))
            subprocess.run(
                [str(BIN / "hostkit"), "lab", "down", "--dir", str(lab)], env=base, stdout=subprocess.DEVNULL
            )
    print(
        f"guest {args.preset} (TCG), {args.runs} calls per route, idle guest {idle:.3f} CPU s/s subtracted; "
        f"load {open('/proc/loadavg').read().split()[0]}"
    )
    print(f"{'route':32s} {'wall s (median)':>16s} {'guest CPU s (median)':>21s}")
    med = {}
    for name, xs in got.items():
        walls, cpus = sorted(w for w, _ in xs), sorted(c for _, c in xs)
        med[name] = (walls[len(walls) // 2], cpus[len(cpus) // 2])
        print(f"{name:32s} {med[name][0]:16.2f} {med[name][1]:21.2f}")
    module, agent = med["hostkit_changes as a module"], med["hostkit_changes via the agent"]
    print(f"via the agent / as a module: wall {agent[0] / module[0]:.2f}x, guest CPU {agent[1] / module[1]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
