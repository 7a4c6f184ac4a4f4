"""``hostkit audit``: every inventory host reached the way Ansible reaches it, in parallel.

Per host (:data:`STEPS`): connect with testinfra as Ansible would (:mod:`hostkit.ssh`: the same
user, port, key, ``ssh_args``/ProxyJump, ``~/.ssh/config``, ssh-agent, become, or
``ansible_connection: local``; host keys checked strictly), read live facts with the agent zipapp
the host keeps (sent once per agent version) and every file the checks need in one remote
command, compute the plan exactly as apply does (profile, overrides), then run the checks of
:mod:`hostkit.audit.checks`. :func:`audit_host` does the
same on any testinfra ``Host`` (the pytest plugin's ``hostkit_audit`` fixture uses it with
testinfra's own ``host`` fixture).
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hostkit.ansible import agent_zipapp
from hostkit.ansible.inventory import InventoryHost, load_inventory
from hostkit.ansible.run import close_masters, current_options
from hostkit.ansible.settings import host_connection, settings
from hostkit.audit.bios import bios_check
from hostkit.audit.checks import FETCH_SCRIPT, HostView, run_checks
from hostkit.errors import BadInput, HostkitError
from hostkit.paths import state_dir
from hostkit.plan import make_plan
from hostkit.profiles import for_host
from hostkit.ssh import open_testinfra_host, put_file
from hostkit.tunables import role_paths

STATUSES = ("pass", "drift", "pending_reboot", "tolerated", "not_applicable")
# What the audit does on each host, in order (the progress display counts them).
STEPS = ("connect", "facts", "plan", "checks")  # checks: the BIOS's too, on a host with a BMC

OnEvent = Callable[[str, str, str], None] | None


def audit(
    inventory: str,
    limit: str | None = None,
    *,
    profile: str | None = None,
    force: bool = False,
    timeout: int = 10,
    forks: int | None = None,
    on_event: OnEvent = None,
) -> dict[str, dict]:
    hosts = load_inventory(inventory, limit)
    operator = settings()
    prepared, bios = {}, {}
    for h in hosts:  # bad profiles, overrides, connections and BMCs stop everything before a host is contacted
        prepared[h.name] = for_host(h.name, h.vars, profile)
        host_connection(h.name, h.vars, operator)
        if h.vars.get("hostkit_bmc") is not None:
            bios[h.name] = bios_check(h.name, h.vars, prepared[h.name][0])
    artifact = agent_zipapp.build(state_dir() / "agent")
    control_dir = tempfile.mkdtemp(prefix="hk-au-")  # this audit's SSH masters, closed at the end
    on_event, handlers = _verbose(on_event)
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(forks or len(hosts), len(hosts)))) as pool:  # --forks
            futures = {
                h.name: pool.submit(
                    _audit_host,
                    h,
                    prepared[h.name],
                    force,
                    str(artifact),
                    timeout,
                    control_dir,
                    operator,
                    on_event,
                    bios.get(h.name),
                )
                for h in hosts
            }
            return {name: f.result() for name, f in futures.items()}
    finally:
        close_masters(control_dir)
        for handler in handlers:
            logging.getLogger("testinfra").removeHandler(handler)
            handler.close()


def _verbose(on_event: OnEvent):
    """The command's -v/--log (:class:`hostkit.ansible.run.RunOptions`) for the audit, which runs no
    Ansible: -v echoes every host's steps, -vvv also every command testinfra runs on a host,
    --log FILE appends testinfra's log of those commands."""
    opts = current_options()
    handlers: list[logging.Handler] = []
    if opts.log:
        handlers.append(logging.FileHandler(opts.log))
    if opts.verbosity >= 3:
        handlers.append(logging.StreamHandler(sys.stderr))
    log = logging.getLogger("testinfra")
    for handler in handlers:
        handler.setFormatter(logging.Formatter("%(asctime)s %(threadName)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.DEBUG)
    if not (opts.verbosity and opts.echo):
        return on_event, handlers
    echo = opts.echo

    def both(host: str, step: str, status: str) -> None:
        echo(f"{host}: {step.partition(':')[0]} [{status}]")
        if on_event:
            on_event(host, step, status)

    return both, handlers


def _audit_host(
    h: InventoryHost,
    prepared,
    force: bool,
    artifact: str,
    timeout: int,
    control_dir: str,
    operator,
    on_event: OnEvent,
    bios=None,
) -> dict:
    def step(name: str, status: str = "ok") -> None:
        if on_event:
            on_event(h.name, f"{name}: {h.name}", status)

    try:
        step("connect")
        host = open_testinfra_host(h, timeout=timeout, control_dir=control_dir, operator=operator)
        result = audit_host(
            host,
            h.name,
            h.sysroot,
            prepared,
            force=force,
            artifact=artifact,
            python=h.vars.get("ansible_python_interpreter"),
            paths=role_paths(h.vars),
            step=step,
            bios=bios,
        )
    except BadInput as exc:
        step("connect", "failed")
        return {"status": "failed", "error": str(exc)}
    except HostkitError as exc:
        step("connect", "unreachable")
        return {"status": "unreachable", "error": str(exc) or type(exc).__name__}
    if result["status"] == "failed":
        step("facts", "failed")
    return result


def audit_host(
    host,
    name: str,
    sysroot: str,
    prepared,
    *,
    force: bool = False,
    artifact: str | None = None,
    python: str | None = None,
    paths: dict | None = None,
    step=None,
    bios=None,
) -> dict:
    """Audit one host through a testinfra ``Host`` (any backend): the agent's facts, the plan
    (``prepared``: :func:`hostkit.profiles.for_host`'s profile and pins), the checks.
    Returns ``{"status", "profile", "counts", "findings", "seconds"}`` or ``{"status", "error"}``.

    One remote command reads everything: the host's cached agent (:mod:`hostkit.ansible.agent_zipapp`)
    prints the facts, then every file the checks read follows (:class:`HostView`). A host without
    this agent version gets it once (over the ssh backend on the same command's stdin, over any
    other by :func:`hostkit.ssh.put_file`).

    ``bios`` (:func:`hostkit.audit.bios.bios_check`, for a host with a BMC) adds the BIOS findings,
    read from the BMC; a BMC that cannot be read fails the host (its other findings kept), a BIOS
    plan the BMC cannot carry out refuses it."""
    step = step or (lambda *a: None)
    start = time.monotonic()
    artifact = artifact or str(agent_zipapp.build(state_dir() / "agent"))
    view = HostView(host, sysroot or "/", paths or role_paths())  # where its roles write
    fetch = view.fetch_args()
    args = [python or "/usr/bin/python3", sysroot or "/", *fetch]
    body = (
        'p=$1 s=$2; shift 2; "$p" "$f" facts --sysroot "$s"; printf "\\n%s facts-rc %s\\n" "$1" "$?"; '
        "M=$1 R=$2 C=$3; shift 3; " + FETCH_SCRIPT
    )
    command = "sh -c %s hostkit-audit " + " ".join(["%s"] * len(args))
    step("facts")
    cmd = host.run(command, agent_zipapp.locate_script(artifact) + body, *args)
    if cmd.rc == agent_zipapp.CACHE_MISS:
        if callable(getattr(host.backend, "run_input", None)):  # ssh, hostkit.actions.RemoteHost
            cmd = host.backend.run_input(
                Path(artifact).read_bytes(), command, agent_zipapp.locate_script(artifact, upload=True) + body, *args
            )
        else:
            put_file(host, artifact, cmd.stdout.strip().splitlines()[-1])
            cmd = host.run(command, agent_zipapp.locate_script(artifact) + body, *args)
    out, mark, rest = cmd.stdout.partition(f"\n{fetch[0]} facts-rc ")
    rc, _, fetched = rest.partition("\n")
    if not mark or rc.strip() != "0":
        return {"status": "failed", "error": (out + cmd.stderr).strip()[-300:] or f"exit {cmd.rc}"}
    try:
        facts = json.loads(out)
    except ValueError:
        return {"status": "failed", "error": f"the agent printed no JSON: {(out + cmd.stderr).strip()[-300:]}"}
    view.load(fetched)
    step("plan")
    profile, pinned = prepared
    plan = make_plan(facts, profile, pinned, force=force, host=name)
    if plan["refused"]:
        return {"status": "refused", "error": "; ".join(plan["refused"]), "findings": []}
    step("checks")
    findings = run_checks(host, sysroot or "/", facts, plan, view.paths, view=view)
    error = None
    if bios is not None:
        try:  # part of the "checks" step
            findings += bios(facts)
        except BadInput as exc:
            error = ("refused", str(exc))
        except HostkitError as exc:
            error = ("failed", f"the BIOS could not be audited: {exc}")
    counts = {s: sum(1 for f in findings if f["status"] == s) for s in STATUSES}
    status = "drift" if counts["drift"] else ("pending_reboot" if counts["pending_reboot"] else "pass")
    return {
        "status": error[0] if error else status,
        **({"error": error[1]} if error else {}),
        "profile": plan["profile"],
        "counts": counts,
        "findings": findings,
        "seconds": round(time.monotonic() - start, 2),
    }


def junit_xml(results: dict[str, dict]) -> str:
    """One testcase per host x check; drift is a failure, unreachable an error, n/a a skip."""
    from hostkit.junit import Case, suite

    cases = []
    for host, r in results.items():
        cls = f"hostkit.audit.{host}"
        if r["status"] in ("unreachable", "failed", "refused"):
            cases.append(Case(cls, "reachable", "error", f"{r['status']}: {r.get('error') or ''}"))
            continue
        for f in r["findings"]:
            if f["status"] == "drift":
                msg = f"expected {f['expected']}, got {f['actual']} ({f['source']})"
                cases.append(Case(cls, f["check"], "failure", msg, msg))
            elif f["status"] == "not_applicable":
                cases.append(Case(cls, f["check"], "skipped", f.get("note") or "not applicable"))
            elif f["status"] in ("pending_reboot", "tolerated"):
                cases.append(Case(cls, f["check"], text=f"{f['status']}: {f.get('note') or ''}"))
            else:
                cases.append(Case(cls, f["check"]))
    return suite("hostkit-audit", cases)
