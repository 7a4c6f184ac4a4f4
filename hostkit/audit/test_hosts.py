"""The audit as a plain pytest suite (see plugin.py): one test per host x check."""

import pytest


def test_host_check(hostkit_finding):
    f = hostkit_finding
    if f["status"] in ("unreachable", "failed", "refused"):
        pytest.fail(f"{f['host']}: {f['status']}: {f.get('error')}")
    if f["status"] == "not_applicable":
        pytest.skip(f.get("note") or "not applicable")
    assert f["status"] != "drift", f"{f['host']}: expected {f['expected']}, got {f['actual']} ({f['source']})"
