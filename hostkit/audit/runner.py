"""``hostkit audit``: every inventory host over one testinfra SSH connection each, in parallel.

Per host: ship the agent zipapp over the same connection (SFTP), read live facts with it,
compute the plan exactly as apply does (profile, overrides), then run the checks of
:mod:`hostkit.audit.checks` through testinfra. Host keys are verified against the inventory's
known_hosts (:mod:`hostkit.ssh`).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import paramiko

from hostkit.ansible import agent_zipapp
from hostkit.ansible.inventory import InventoryHost, load_inventory
from hostkit.audit.checks import run_checks
from hostkit.errors import BadInput, HostkitError
from hostkit.paths import state_dir
from hostkit.plan import make_plan
from hostkit.profiles import for_host
from hostkit.ssh import open_testinfra_host
from hostkit.tunables import role_paths

STATUSES = ("pass", "drift", "pending_reboot", "tolerated", "not_applicable")


def audit(inventory: str, limit: str | None = None, *, profile: str | None = None, force: bool = False,
          timeout: int = 10) -> dict[str, dict]:
    hosts = load_inventory(inventory, limit)
    prepared = {}
    for h in hosts:  # bad profiles and overrides stop everything before a host is contacted
        prepared[h.name] = for_host(h.name, h.vars, profile)
    artifact = agent_zipapp.build(state_dir() / "agent")
    with ThreadPoolExecutor(max_workers=max(1, len(hosts))) as pool:
        futures = {h.name: pool.submit(_audit_host, h, prepared[h.name], force, str(artifact), timeout) for h in hosts}
        return {name: f.result() for name, f in futures.items()}


def _audit_host(h: InventoryHost, prepared, force: bool, artifact: str, timeout: int) -> dict:
    start = time.monotonic()
    try:
        host = open_testinfra_host(h, timeout=timeout)
        client = host.backend.client  # one SSH connection, reused by every check below
        # A private name per audit and host: lab hosts (and shared /tmp) must not overwrite each other's copy.
        remote = f"/tmp/.hostkit-agent-{os.getpid()}-{threading.get_ident()}.pyz"
        sftp = client.open_sftp()
        try:
            sftp.put(artifact, remote)
            sftp.chmod(remote, 0o600)
            python = h.vars.get("ansible_python_interpreter", "/usr/bin/python3")
            cmd = host.run("%s %s facts --sysroot %s", python, remote, h.sysroot)
        finally:
            try:
                sftp.remove(remote)
            finally:
                sftp.close()
        if cmd.rc != 0:
            return {"status": "failed", "error": (cmd.stdout + cmd.stderr).strip()[-300:]}
        facts = json.loads(cmd.stdout)
        profile, pinned = prepared
        plan = make_plan(facts, profile, pinned, force=force, host=h.name)
        if plan["refused"]:
            return {"status": "refused", "error": "; ".join(plan["refused"]), "findings": []}
        findings = run_checks(host, h.sysroot, facts, plan, role_paths(h.vars))  # where its roles write
    except BadInput as exc:
        return {"status": "failed", "error": str(exc)}
    except (HostkitError, paramiko.SSHException, socket.error, EOFError) as exc:
        return {"status": "unreachable", "error": str(exc) or type(exc).__name__}
    counts = {s: sum(1 for f in findings if f["status"] == s) for s in STATUSES}
    status = "drift" if counts["drift"] else ("pending_reboot" if counts["pending_reboot"] else "pass")
    return {"status": status, "profile": plan["profile"], "counts": counts, "findings": findings,
            "seconds": round(time.monotonic() - start, 2)}


def junit_xml(results: dict[str, dict]) -> str:
    """One testcase per host x check; drift is a failure, unreachable an error, n/a a skip."""
    from xml.sax.saxutils import escape, quoteattr

    cases, failures, errors, skipped = [], 0, 0, 0
    for host, r in results.items():
        if r["status"] in ("unreachable", "failed", "refused"):
            errors += 1
            cases.append(f'  <testcase classname={quoteattr("hostkit.audit." + host)} name="reachable">'
                         f'<error message={quoteattr(r["status"] + ": " + (r.get("error") or ""))}/></testcase>')
            continue
        for f in r["findings"]:
            attrs = f'classname={quoteattr("hostkit.audit." + host)} name={quoteattr(f["check"])}'
            body = ""
            if f["status"] == "drift":
                failures += 1
                msg = f"expected {f['expected']}, got {f['actual']} ({f['source']})"
                body = f"<failure message={quoteattr(msg)}>{escape(msg)}</failure>"
            elif f["status"] == "not_applicable":
                skipped += 1
                body = f"<skipped message={quoteattr(f.get('note') or 'not applicable')}/>"
            elif f["status"] in ("pending_reboot", "tolerated"):
                body = f"<system-out>{escape(f['status'] + ': ' + (f.get('note') or ''))}</system-out>"
            cases.append(f"  <testcase {attrs}>{body}</testcase>")
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="hostkit-audit" tests="{len(cases)}" '
            f'failures="{failures}" errors="{errors}" skipped="{skipped}">\n' + "\n".join(cases) + "\n</testsuite>\n")
