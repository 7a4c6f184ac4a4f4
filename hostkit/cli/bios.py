"""``hostkit bios``: BIOS settings through each host's BMC (Redfish): facts, plan, apply, rollback."""

from __future__ import annotations

import argparse
import logging

from hostkit import api
from hostkit.cli import output
from hostkit.cli.args import command, forks_value, json_arg

DESCRIPTION = """\
BIOS settings through each inventory host's BMC (its hostkit_bmc: address, username, password from
Ansible Vault or password_env, ca_file or verify_tls), over Redfish with sushy.

  facts     vendor, model, BIOS version; the attributes now, those pending the next reset, the
            attribute registry; processors and memory channels per socket
  plan      each bios intent of the host's profile (numa_per_socket, smt, c_states, turbo) in the
            vendor's attribute and value, current -> wanted, and the topology after the cycle;
            what the BMC's registry forbids is refused, one line each, and nothing is PATCHed
  audit     three findings apart: drift (the BIOS does not hold what the plan wants), pending
            (set, applied at the next reset: not drift), and a cross-layer mismatch (the booted
            OS's NUMA nodes or threads against what the BIOS in effect says, read over SSH)
  apply     journal the old values (.hostkit/bios/HOST.json), PATCH Bios/Settings (pending until
            the next reset: a second apply says "pending", not "changed"); --reboot power-cycles
            through ComputerSystem.Reset and fails, naming it, a setting still pending afterwards
  rollback  PATCH the journaled values back; --reboot cycles and clears the journal

Vendor maps: Dell PowerEdge, HPE ProLiant, Lenovo XCC, Supermicro (docs/bios.md)."""

EPILOG = """\
exit codes: 0 ok (an audit with only pending settings too), 1 a BMC failed (unreachable,
credentials, TLS, rejected PATCH, not applied) or an audit found drift or a cross-layer mismatch,
2 bad input or a plan the BMC's registry refuses (nothing changed)

examples:
  hostkit bios facts -i inventory.yml --limit bm1         what bm1's BMC says
  hostkit bios plan -i inventory.yml                       intents -> vendor attributes
  hostkit bios audit -i inventory.yml                      drift, pending, cross-layer
  hostkit bios apply -i inventory.yml --reboot             set, power-cycle once, check
  hostkit bios rollback -i inventory.yml --reboot          the journaled values back"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = command(
        sub, "bios", "BIOS settings over each host's BMC (Redfish): facts, plan, apply, rollback", DESCRIPTION, EPILOG
    )
    p.add_argument("action", choices=("facts", "plan", "audit", "apply", "rollback"), help="what to do")
    p.add_argument("-i", "--inventory", required=True, metavar="INVENTORY", help="the hosts: an Ansible inventory")
    p.add_argument("--limit", metavar="PATTERN", help="only hosts matching this Ansible pattern")
    p.add_argument("--forks", type=forks_value, metavar="N", help="BMCs at a time (default: all of them)")
    # No Ansible runs here: -v and --log show and keep sushy's log of the Redfish requests instead.
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="each Redfish request on stderr (sushy's log; passwords are masked by sushy)",
    )
    p.add_argument("--log", metavar="FILE", help="append sushy's log of the Redfish requests to FILE")
    p.add_argument(
        "--profile", metavar="NAME|FILE", help="the profile whose bios section is wanted (default: each host's)"
    )
    p.add_argument("--reboot", action="store_true", help="apply/rollback: power-cycle through the BMC and check")
    p.add_argument(
        "--shutdown-timeout",
        type=int,
        default=120,
        metavar="S",
        help="seconds of GracefulShutdown before ForceOff (default: 120)",
    )
    p.add_argument(
        "--reboot-timeout",
        type=int,
        default=api.REBOOT_TIMEOUT,
        metavar="S",
        help=f"seconds for the OS to answer after the power-on (default: {api.REBOOT_TIMEOUT})",
    )
    p.add_argument(
        "--no-os-check",
        action="store_true",
        help="after the cycle (and in an audit), do not compare the booted OS's NUMA nodes and threads "
        "with the BIOS (for a host hostkit cannot reach over SSH yet)",
    )
    json_arg(p)
    return p


def _text(result: api.BiosResult) -> None:
    for host, doc in sorted(result.hosts.items()):
        status = doc["status"]
        if "error" in doc:
            output.note(f"{host}: {status.upper()}: {doc['error']}")
        if "bios" in doc:
            b = doc["bios"]
            procs = b["processors"]
            print(f"{host}: {b['vendor']} {b['model']}, BIOS {b['bios_version']} ({b['bmc']})")
            print(
                f"  {procs['sockets']} x {procs['model']}, {procs['cores_per_socket']} cores, "
                f"{procs['threads_per_core']} thread(s) per core"
            )
            for sock, m in (b["memory"] or {}).items():
                print(f"  socket {sock}: {m['populated_channels']}/{m['channels']} memory channels populated")
            print(f"  {len(b['attributes'])} attributes, {len(b['pending'])} pending the next reset")
            for name, value in sorted(b["pending"].items()):
                print(f"    pending {name}: {b['attributes'].get(name)} -> {value}")
        if "plan" in doc:
            plan = doc["plan"]
            rows = [
                [s["intent"], str(s["wanted"]), s["attribute"], str(s["current"]), s["value"], s["state"]]
                for s in plan["steps"]
            ]
            output.print_table(
                ["intent", "wanted", "attribute", "current", "value", "state"],
                rows,
                title=f"{host}: {plan['vendor']} ({plan['cpu_vendor'] or 'unknown'} CPUs)",
            )
            for line in plan["refused"]:
                print(f"  REFUSED {line}")
            a = plan["after_cycle"]
            print(
                f"  after the cycle: {a['numa_per_socket']} NUMA node(s) per socket, {a['numa_nodes']} in all, "
                f"{a['threads_per_core']} thread(s) per core"
            )
        for f in doc.get("findings", []):
            print(f"  {f['kind'].upper()}: {f['line']}")
        if "restore" in doc:
            print(f"{host}: restore {doc['restore'] or 'nothing (the journaled values are set)'}")
        if doc.get("os", {}).get("checked"):
            o = doc["os"]
            print(
                f"  the booted OS: {o['numa_per_socket']} NUMA node(s) per socket, {o['threads_per_core']} thread(s) per core"
            )
        for step in doc.get("steps", []):
            print(f"  {step['step']}: {step['seconds']} s")
        if "cycles" in doc:
            print(f"  power cycles: {doc['cycles']}")
        print(f"{host}: {status} ({doc.get('seconds', 0)} s)")


def _request_log(args) -> None:
    """-v and --log: sushy's own log (requests, their status; it masks passwords) on stderr or in FILE."""
    log = logging.getLogger("sushy")
    if args.verbose:
        log.addHandler(logging.StreamHandler())
    if args.log:
        handler = logging.FileHandler(args.log)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
        log.addHandler(handler)
    if args.verbose or args.log:
        log.setLevel(logging.DEBUG)


def run(args) -> int:
    _request_log(args)
    result = api.bios(
        api.BiosRequest(
            action=args.action,
            inventory=args.inventory,
            limit=args.limit,
            profile=args.profile,
            reboot=args.reboot,
            shutdown_timeout=args.shutdown_timeout,
            forks=args.forks,
            os_check=not args.no_os_check,
            boot_timeout=args.reboot_timeout,
        ),
        progress=None if args.json else output.note,
    )
    if args.json:
        output.emit_json(result.to_dict())
    else:
        _text(result)
    return result.rc
