"""pytest plugin of the audit (entry point pytest11): ``python -m pytest --pyargs hostkit.audit --hostkit-inventory INV``.

One test per host x check, the same checks as ``hostkit audit`` (host keys verified), so people who
already run testinfra suites can run hostkit's audit next to theirs and use pytest's own reports
(``--junitxml``, ``-k``, ``-x``).
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("hostkit")
    group.addoption("--hostkit-inventory", help="Ansible inventory of the hosts to audit")
    group.addoption("--hostkit-limit", default=None, help="Ansible host pattern")
    group.addoption("--hostkit-profile", default=None, help="profile (default: each host's hostkit_profile)")


_results: dict = {}


def _audit(config):
    key = (config.getoption("hostkit_inventory"), config.getoption("hostkit_limit"))
    if key not in _results:
        from hostkit.audit.runner import audit

        _results[key] = audit(key[0], key[1], profile=config.getoption("hostkit_profile"))
    return _results[key]


def pytest_generate_tests(metafunc):
    if "hostkit_finding" not in metafunc.fixturenames:
        return
    if not metafunc.config.getoption("hostkit_inventory"):
        metafunc.parametrize("hostkit_finding", [pytest.param(None, marks=pytest.mark.skip(
            reason="no --hostkit-inventory given: nothing to audit"))])
        return
    params, ids = [], []
    for host, r in _audit(metafunc.config).items():
        if r["status"] in ("unreachable", "failed", "refused"):
            params.append({"host": host, "check": "reachable", "status": r["status"], "error": r.get("error")})
            ids.append(f"{host}::reachable")
            continue
        for f in r["findings"]:
            params.append({"host": host, **f})
            ids.append(f"{host}::{f['check']}")
    metafunc.parametrize("hostkit_finding", params, ids=ids)
