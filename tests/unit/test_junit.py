"""The one JUnit writer (hostkit/junit.py) and the audit's reading of its findings into it; the
drift's is in test_drift.py, the audit's on live hosts in tests/lab/test_audit.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hostkit.audit.runner import junit_xml
from hostkit.junit import Case, suite


def test_the_suite_counts_each_outcome_and_escapes_what_it_is_given():
    doc = suite(
        "s&<x>",
        [
            Case("c", "passed"),
            Case("c", "noted", text="pending <reboot>"),
            Case("c", "failed", "failure", "expected 1, got 2", "a & b"),
            Case("c", "broken", "error", "timed out"),
            Case("c", "skipped", "skipped", "n/a"),
        ],
    )
    root = ET.fromstring(doc)
    assert root.attrib == {"name": "s&<x>", "tests": "5", "failures": "1", "errors": "1", "skipped": "1"}
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert list(cases["passed"]) == []
    assert cases["noted"].find("system-out").text == "pending <reboot>"
    failure = cases["failed"].find("failure")
    assert (failure.get("message"), failure.text) == ("expected 1, got 2", "a & b")
    assert cases["broken"].find("error").get("message") == "timed out"
    assert cases["skipped"].find("skipped").get("message") == "n/a"


def test_audit_findings_map_to_junit_outcomes():
    def finding(check, status, **kw):
        return {"check": check, "status": status, "expected": "1", "actual": "2", "source": "sysctl", **kw}

    results = {
        "h1": {
            "status": "drift",
            "findings": [
                finding("kernel.a", "pass"),
                finding("kernel.b", "drift"),
                finding("bios.numa_per_socket", "pending_reboot", note="set, applied at the next power cycle"),
                finding("irq.x", "not_applicable", note="no irqbalance"),
            ],
        },
        "h2": {"status": "unreachable", "error": "ssh: connection refused", "findings": []},
    }
    root = ET.fromstring(junit_xml(results))
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("5", "1", "1", "1")
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    assert list(cases["hostkit.audit.h1", "kernel.a"]) == []
    assert cases["hostkit.audit.h1", "kernel.b"].find("failure").text == "expected 1, got 2 (sysctl)"
    pending = cases["hostkit.audit.h1", "bios.numa_per_socket"].find("system-out").text
    assert pending == "pending_reboot: set, applied at the next power cycle"
    assert cases["hostkit.audit.h1", "irq.x"].find("skipped").get("message") == "no irqbalance"
    assert cases["hostkit.audit.h2", "reachable"].find("error").get("message") == "unreachable: ssh: connection refused"
