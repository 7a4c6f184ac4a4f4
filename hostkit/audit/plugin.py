"""pytest plugin of the audit (entry point pytest11), in testinfra's own idioms.

* ``python -m pytest --pyargs hostkit.audit --connection=ansible --ansible-inventory=INV``
  (testinfra's options; ``--hosts`` narrows the hosts) or ``--hostkit-inventory INV``: one test
  per host x check, the same checks as ``hostkit audit`` with hosts reached as Ansible reaches
  them (host keys checked strictly); a drift fails its test, an unreachable host fails its
  ``reachable`` test. Without an inventory the run stops with a usage error naming the options
  (never a silent "skipped").
* In your own testinfra tests, the ``hostkit_audit`` fixture runs hostkit's checks over
  testinfra's ``host`` fixture (whatever its backend): ``hostkit_audit(host)`` returns the
  host's audit (``status``, ``counts``, ``findings``); ``hostkit_drift(result)`` lists what
  drifted.
"""

from __future__ import annotations

import pytest

INVENTORY_OPTIONS = "--ansible-inventory=FILE (testinfra's, with --connection=ansible) or --hostkit-inventory=FILE"


def pytest_addoption(parser):
    group = parser.getgroup("hostkit")
    group.addoption(
        "--hostkit-inventory", help="Ansible inventory of the hosts to audit (default: testinfra's --ansible-inventory)"
    )
    group.addoption("--hostkit-limit", default=None, help="Ansible host pattern (default: testinfra's --hosts)")
    group.addoption("--hostkit-profile", default=None, help="profile (default: each host's hostkit_profile)")


_results: dict = {}
_USAGE = pytest.StashKey[str]()


def pytest_collection_modifyitems(config, items):
    """The run stops here, exit 4 (pytest's usage error) naming what is missing: never "skipped"."""
    if _USAGE in config.stash:
        raise pytest.UsageError(config.stash[_USAGE])


def _opt(config, name):
    try:
        return config.getoption(name)
    except ValueError:  # testinfra's plugin not loaded
        return None


def inventory_and_limit(config) -> tuple[str | None, str | None]:
    """The inventory and host pattern to audit: hostkit's options, else testinfra's."""
    inventory = _opt(config, "hostkit_inventory") or _opt(config, "ansible_inventory")
    limit = _opt(config, "hostkit_limit")
    hosts = _opt(config, "hosts")
    if not limit and hosts:
        patterns = [h.split("://", 1)[-1] for h in (hosts if isinstance(hosts, list) else [hosts])]
        limit = ",".join(p for h in patterns for p in h.split(",") if p) or None
    return inventory, limit


def _audit(config):
    key = inventory_and_limit(config)
    if key not in _results:
        from hostkit.audit.runner import audit

        _results[key] = audit(key[0], key[1], profile=config.getoption("hostkit_profile"))
    return _results[key]


def pytest_generate_tests(metafunc):
    if "hostkit_finding" not in metafunc.fixturenames:
        return
    inventory, _ = inventory_and_limit(metafunc.config)
    if not inventory:
        connection = _opt(metafunc.config, "connection")
        metafunc.config.stash[_USAGE] = (
            "hostkit's audit needs an Ansible inventory (each host's sysroot, profile and overrides come from "
            f"it): {INVENTORY_OPTIONS}"
            + (f"; --connection={connection} alone names no inventory" if connection else "")
        )
        metafunc.parametrize("hostkit_finding", [None], ids=["no-inventory"])
        return
    from hostkit.errors import HostkitError

    try:
        results = _audit(metafunc.config)
    except HostkitError as exc:  # bad input (an inventory that does not parse, ...): nothing was audited
        metafunc.config.stash[_USAGE] = f"hostkit audit: {exc}"
        metafunc.parametrize("hostkit_finding", [None], ids=["bad-input"])
        return
    params, ids = [], []
    for host, r in results.items():
        if r["status"] in ("unreachable", "failed", "refused"):
            params.append({"host": host, "check": "reachable", "status": r["status"], "error": r.get("error")})
            ids.append(f"{host}::reachable")
            continue
        for f in r["findings"]:
            params.append({"host": host, **f})
            ids.append(f"{host}::{f['check']}")
    metafunc.parametrize("hostkit_finding", params, ids=ids)


def host_variables(host) -> dict:
    """A testinfra host's Ansible variables when its backend has them (``ansible://``), else none."""
    if getattr(host.backend, "HAS_RUN_ANSIBLE", False):
        return dict(host.backend.get_variables())
    return {}


@pytest.fixture
def hostkit_audit(request):
    """``hostkit_audit(host, profile=None, force=False)``: hostkit's checks on a testinfra host.

    The host's ``hostkit_sysroot``, ``hostkit_profile``, ``hostkit_overrides`` and role paths
    are its Ansible variables (testinfra's ``ansible`` backend); over another backend the host's
    own ``/`` and the default profile (or ``profile``) are audited."""
    from hostkit.audit.runner import audit_host
    from hostkit.profiles import for_host
    from hostkit.tunables import role_paths

    def run(host, profile: str | None = None, force: bool = False) -> dict:
        hv = host_variables(host)
        name = str(hv.get("inventory_hostname") or host.backend.get_hostname())
        prepared = for_host(name, hv, profile or request.config.getoption("hostkit_profile"))
        return audit_host(
            host,
            name,
            hv.get("hostkit_sysroot") or "/",
            prepared,
            force=force,
            python=hv.get("ansible_python_interpreter"),
            paths=role_paths(hv),
        )

    return run


def hostkit_drift(result: dict) -> list[str]:
    """One line per drifting check of a :func:`hostkit_audit` result (empty: nothing drifted)."""
    if result["status"] in ("failed", "refused"):
        return [f"{result['status']}: {result.get('error')}"]
    return [
        f"{f['check']}: expected {f['expected']}, got {f['actual']} ({f['source']})"
        for f in result["findings"]
        if f["status"] == "drift"
    ]
