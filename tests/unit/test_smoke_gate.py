"""The smoke SLO gate: PASSED only on a credible p999; too few samples are INCONCLUSIVE (or a certain MISS)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostkit.smoke.gate import verdict
from hostkit.smoke.metrics import CREDIBLE_P999, judge_slo


def test_credible_and_within_target_passes():
    s = judge_slo([0.1] * CREDIBLE_P999, 1.0, faults=[], errors=0)
    assert s["verdict"] == "PASSED" and s["passed"] is True and s["samples_missing"] == 0


def test_too_few_samples_is_inconclusive_and_says_how_many_are_missing():
    s = judge_slo([0.1] * 3732, 1.0, faults=[], errors=0)
    assert s["verdict"] == "INCONCLUSIVE" and s["passed"] is False
    assert s["samples_missing"] == 6268 and "6,268 short of the 10,000" in s["basis"]


def test_the_issues_case_a_max_over_target_on_few_samples_is_never_passed():
    # p999 0.80 ms of 3,732 samples, max 4.8 ms against 1.0 ms: reported PASSED before
    values = [0.1] * 3728 + [0.8, 0.8, 0.8, 4.8]
    s = judge_slo(values, 1.0, faults=[], errors=0)
    assert s["p999_ms"] == 0.8 and s["max_ms"] == 4.8 and s["verdict"] == "INCONCLUSIVE"


def test_more_samples_over_target_than_a_credible_p999_allows_is_a_miss_already():
    s = judge_slo([0.1] * 3000 + [5.0] * 11, 1.0, faults=[], errors=0)
    assert s["verdict"] == "MISSED" and "11 of 3,011 samples exceed the target" in s["basis"]


def test_a_fault_misses_whatever_the_samples():
    assert judge_slo([0.1] * 20000, 1.0, faults=["worker died"], errors=0)["verdict"] == "MISSED"
    assert judge_slo([0.1] * 5, 1.0, faults=[], errors=1)["verdict"] == "MISSED"


def test_no_samples_is_inconclusive():
    s = judge_slo([], 1.0, faults=[], errors=0)
    assert s["verdict"] == "INCONCLUSIVE" and s["p999_ms"] is None and s["samples_missing"] == CREDIBLE_P999


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, CREDIBLE_P999 - 1), above=st.integers(0, 30), target=st.floats(0.01, 100))
def test_fewer_samples_than_credible_never_pass_and_an_early_miss_stays_a_miss(n, above, target):
    above = min(above, n)
    values = [target / 2] * (n - above) + [target * 2] * above
    s = judge_slo(values, target, faults=[], errors=0)
    assert s["passed"] is False and s["verdict"] in ("INCONCLUSIVE", "MISSED")
    if s["verdict"] == "MISSED":  # whatever the missing samples are, a credible run with these misses
        completed = values + [0.0] * (CREDIBLE_P999 - n)
        assert judge_slo(completed, target, faults=[], errors=0)["verdict"] == "MISSED"


def test_results_written_before_the_verdict_existed_still_read():
    assert verdict({"passed": True}) == "PASSED" and verdict({"passed": False}) == "MISSED"
    assert verdict({"passed": False, "verdict": "INCONCLUSIVE"}) == "INCONCLUSIVE"


@pytest.mark.live
@pytest.mark.skipif(not shutil.which("python3"), reason="needs the host's python3")
def test_the_host_agent_reports_inconclusive_on_too_few_samples(tmp_path):
    """The remote path (`hostkit smoke -i`): the shipped agent zipapp, run by the host's own python3
    (standard library only, no numpy), gives the verdict from the same code."""
    from hostkit.ansible.agent_zipapp import build

    pyz = build(tmp_path)
    proc = subprocess.run(
        [
            shutil.which("python3"),
            "-I",
            str(pyz),
            "smoke",
            "--requests",
            "400",
            "--infer-ms",
            "0",
            "--target-p999-ms",
            "1000",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    doc = json.loads(proc.stdout)
    assert doc["samples"] == 400 and doc["errors"]["count"] == 0, doc.get("errors")
    assert doc["slo"]["verdict"] == "INCONCLUSIVE" and doc["slo"]["passed"] is False
    assert doc["slo"]["samples_missing"] == CREDIBLE_P999 - 400
