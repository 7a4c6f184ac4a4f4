"""``hostkit lab``: real sshd lab hosts on loopback, each with its own sysroot."""

from __future__ import annotations

import argparse

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import Parser, json_arg
from hostkit.errors import BadInput


def add_parser(sub) -> argparse.ArgumentParser:
    lab = sub.add_parser(
        "lab",
        help="start/stop lab hosts on loopback: sshd sysroots and real-kernel QEMU guests",
        description="A lab of real sshd hosts on 127.0.0.2, 127.0.0.3, ... each with its own "
        "writable sysroot (a fixture copy), host keys in known_hosts (strict "
        "checking on) and an Ansible inventory DIR/inventory.yml. With --vm, real "
        "kernels: QEMU guests booted through their own GRUB from a Debian image "
        "built once (mmdebstrap) and cached in /var/cache/hostkit/vm.",
    )
    lsub = lab.add_subparsers(dest="lab_cmd", required=True, parser_class=Parser)
    up = lsub.add_parser(
        "up",
        help="start the lab",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="VM specs (--vm NAME=SPEC): sockets=S,cores=C,threads=T,nodes=N"
        "[,mem=MiB][,vendor=vmware|kvm][,disk_queues=Q][,setup=NAME], or a preset:\n"
        + "\n".join(f"  {k:12s} {v}" for k, v in api.lab_vm_presets().items())
        + "\n\nsetups (run, and booted into, before the guest is used; held by the saved state):\n"
        + "\n".join(f"  {k}: {v}" for k, v in api.lab_vm_setups().items())
        + "\n\nexamples:\n"
        "  hostkit lab up --hosts 3                       three sshd sysroot hosts\n"
        "  hostkit lab up --vm g1=numa2                   one real-kernel guest (resumed in seconds from\n"
        "                                                 its preset's saved state; --boot: a boot)\n"
        "  hostkit lab up --host bm=epyc-9634-nps1 --vm vm=vmware-like\n"
        "  hostkit lab up --vm g1=nps --bmc               a guest behind a BMC (hostkit bios)\n"
        "  hostkit lab status; hostkit lab down",
    )
    up.add_argument(
        "--hosts",
        type=int,
        default=None,
        metavar="N",
        help="N hosts built from the fixtures round-robin (default: one per fixture)",
    )
    up.add_argument(
        "--host",
        action="append",
        metavar="NAME=SYSROOT_DIR",
        help="a host with a copy of this sysroot directory (or fixture name); repeatable",
    )
    up.add_argument(
        "--vm",
        action="append",
        metavar="NAME=SPEC",
        help="a QEMU guest with a real kernel (SPEC or a preset, see below); repeatable, mixable with --host",
    )
    up.add_argument(
        "--boot-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds to wait for each guest's sshd, and for each boot of its setup when it boots (default 600)",
    )
    up.add_argument(
        "--boot",
        action="store_true",
        help="boot every guest through GRUB instead of resuming a preset's saved state "
        "(the state is saved once per image, at the first --vm of each preset)",
    )
    up.add_argument("--port", type=int, default=2222, help="sshd port on every loopback address (default 2222)")
    up.add_argument(
        "--bmc",
        action="store_true",
        help="a lab BMC (Redfish over TLS, sushy-tools' emulator) in front of every host, its hostkit_bmc "
        "in the inventory (for hostkit bios); a guest's BMC powers it and gives it the NUMA nodes and "
        "threads its BIOS says at each power-on",
    )
    for sp in (
        up,
        lsub.add_parser("down", help="stop exactly the sshd processes the lab started; remove it"),
        lsub.add_parser("status", help="show lab hosts and whether their sshd answers"),
    ):
        sp.add_argument("--dir", default=".hostkit/lab", help="lab directory (default .hostkit/lab)")
        json_arg(sp)
    return lab


def _pairs(items: list[str] | None, flag: str, form: str) -> list[tuple[str, str]]:
    out = []
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise BadInput(f"{flag} expects {form}, got {item!r}")
        out.append((name, value))
    return out


def run(args) -> int:
    if args.lab_cmd == "up":
        req = api.LabUpRequest(
            dir=args.dir,
            hosts=args.hosts,
            host_specs=tuple(_pairs(args.host, "--host", "NAME=SYSROOT_DIR (or NAME=FIXTURE)")),
            vm_specs=tuple(_pairs(args.vm, "--vm", "NAME=SPEC (or NAME=PRESET)")),
            port=args.port,
            boot_timeout=args.boot_timeout,
            resume=not args.boot,
            bmc=args.bmc,
        )
        up = api.lab_up(
            req,
            say=output.note,
            progress=None
            if args.json
            else (lambda h: output.note(f"started {h['name']} on {h['address']}:{h['port']} ({h['source']})")),
        )
        if args.json:
            output.emit_json(up.to_dict())
        else:
            print(f"lab up: {len(up.hosts)} host(s); inventory {up.inventory}")
            print(f"  ssh -F {up.ssh_config} {up.hosts[0]['name']}")
            print(f"  hostkit facts -i {up.inventory}")
        return up.rc
    if args.lab_cmd == "down":
        down = api.lab_down(api.LabRequest(dir=args.dir))
        if args.json:
            output.emit_json(down.to_dict())
        else:
            stopped = down.stopped
            print(f"lab down: stopped {len(stopped)} host(s)" + (f": {', '.join(stopped)}" if stopped else ""))
        return down.rc
    status = api.lab_status(api.LabRequest(dir=args.dir))
    if args.json:
        output.emit_json(status.to_dict())
    elif not status.hosts:
        print(f"no lab in {status.dir}")
    else:
        rows = [
            [
                h["name"],
                h["kind"],
                f"{h['address']}:{h['port']}",
                str(h["pid"]),
                "up" if h["answering"] else ("running" if h["running"] else "DOWN"),
                h["source"],
                h["sysroot"] or "/ (own kernel)",
            ]
            for h in status.hosts
        ]
        output.print_table(["host", "kind", "address", "pid", "state", "fixture / VM spec", "sysroot"], rows)
    return status.rc
