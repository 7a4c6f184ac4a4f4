"""The rules of hostkit drift below the lab: the latency comparison on generated samples (a fixed
seed: the same figures every run), the state's differences with what the plan says of them, the
verdict and its named cause, and the baselines' bad input. tests/lab/test_drift.py runs the
commands over SSH."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from hostkit.drift import latency, state, store, verdict
from hostkit.errors import BadInput
from hostkit.facts import gather
from hostkit.lab.fixtures import materialize
from hostkit.smoke.metrics import BUCKETS_S, histogram


def runs(seed: int, n: int, tail: float = 0.0, share: float = 0.003) -> dict:
    """A smoke run's deschedule histogram: lognormal around 20 us; ``tail``: that share multiplied."""
    rng = np.random.default_rng(seed)
    v = rng.lognormal(np.log(0.02), 0.5, n)
    if tail:
        v[rng.random(n) < share] *= tail
    return histogram(list(v))


def test_ten_runs_of_an_unchanged_host_raise_no_alarm():
    base = runs(1, 20_000)
    verdicts = [latency.compare(base, runs(100 + i, 20_000))["verdict"] for i in range(10)]
    assert verdicts == ["SAME"] * 10


def test_a_tail_that_moved_is_moved_with_its_interval_test_and_counts():
    got = latency.compare(runs(1, 20_000), runs(2, 20_000, tail=20))
    assert got["verdict"] == "MOVED"
    assert got["p_worse"] < latency.ALPHA and got["interval"][0] >= latency.MIN_RATIO
    assert (got["samples_before"], got["samples_now"]) == (20_000, 20_000)
    assert "95% interval" in got["basis"] and "of 20,000 now" in got["basis"]


def test_too_few_samples_is_inconclusive_never_no_drift():
    got = latency.compare(runs(1, 20_000), runs(2, 2_000, tail=20))
    assert got["verdict"] == "INCONCLUSIVE" and "10,000 needed" in got["basis"]


def test_a_better_tail_is_improved_not_drift():
    assert latency.compare(runs(1, 20_000, tail=20), runs(2, 20_000))["verdict"] == "IMPROVED"


def bucketed(counts: dict[int, int]) -> dict:
    """A histogram with ``counts`` (bucket index -> samples) over the smoke's fixed buckets."""
    le = list(BUCKETS_S)
    c = [counts.get(i, 0) for i in range(len(le) + 1)]
    return {"le_s": le, "counts": c, "count": sum(c), "sum_s": 0.0}


def test_a_significant_shift_of_one_bucket_is_not_called_moved():
    """Ten times the samples above the old p999, but the p999 one bucket (1.25x) higher: a real
    change, too small to call the tail moved (MIN_RATIO)."""
    got = latency.compare(bucketed({20: 19_990, 25: 10}), bucketed({20: 19_900, 21: 100}))
    assert got["p_worse"] < latency.ALPHA, got["basis"]
    assert got["ratio"] == 1.25 and got["verdict"] == "SAME", got["basis"]


@pytest.fixture
def facts(tmp_path):
    materialize("epyc-9634-nps1", tmp_path / "root")
    return gather(str(tmp_path / "root"))


def test_state_differences_say_what_the_plan_says(facts):
    before = state.effective_state(facts)
    now = json.loads(json.dumps(before))
    now["kernel"]["kernel.sched_rt_runtime_us"] = 500000
    now["kernel"]["release"] = "6.1.0-99-amd64"
    now["services"]["irqbalance running"] = not before["services"]["irqbalance running"]
    plan = {"sysctl": {"kernel.sched_rt_runtime_us": -1}, "irq": {"affinity": True, "assignments": {}}}
    diffs = {d["key"]: d for d in state.differences(before, now, plan)}
    assert set(diffs) == {"kernel.sched_rt_runtime_us", "release", "irqbalance running"}
    assert diffs["kernel.sched_rt_runtime_us"]["plan"] == "undoing a planned value"
    assert diffs["release"]["plan"] == "not planned" and diffs["release"]["layer"] == "kernel"
    back = state.differences(
        now, before, {"sysctl": {"kernel.sched_rt_runtime_us": before["kernel"]["kernel.sched_rt_runtime_us"]}}
    )
    assert {d["key"]: d["plan"] for d in back}["kernel.sched_rt_runtime_us"] == "planned"


def test_a_bios_setting_a_firmware_update_reset_is_undoing_a_planned_value(facts):
    """The bios layer (a host with a BMC): the BIOS version and every attribute in effect; the
    attributes the host's BIOS plan sets are planned values (the baseline's plan.bios_attributes)."""
    bios = {
        "bios_version": "A42 v2.60 (08/11/2022)",
        "attributes": {"NumaMemoryDomainsPerSocket": "TwoMemoryDomainsPerSocket", "ProcSMT": "Enabled"},
        "pending": {},
    }
    before = state.effective_state({**facts, "bios": bios})
    updated = {**bios, "bios_version": "A42 v2.72 (03/15/2023)"}
    updated["attributes"] = {**bios["attributes"], "NumaMemoryDomainsPerSocket": "Auto"}  # the update's default
    plan = {"bios_attributes": {"NumaMemoryDomainsPerSocket": "TwoMemoryDomainsPerSocket"}}
    got = {
        d["key"]: (d["layer"], d["before"], d["now"], d["plan"])
        for d in state.differences(before, state.effective_state({**facts, "bios": updated}), plan)
    }
    assert got == {
        "BIOS version": ("bios", "A42 v2.60 (08/11/2022)", "A42 v2.72 (03/15/2023)", "not planned"),
        "NumaMemoryDomainsPerSocket": ("bios", "TwoMemoryDomainsPerSocket", "Auto", "undoing a planned value"),
    }
    assert "bios" not in state.effective_state(facts)  # no BMC, no bios layer
    unread = state.effective_state({**facts, "bios": {"error": "h: the BMC at https://10.0.0.1 did not answer"}})
    assert unread["bios"] == {"BMC": "not read: h: the BMC at https://10.0.0.1 did not answer"}


def test_both_drifts_name_the_undone_value_as_the_cause():
    diffs = [
        {"layer": "irqs", "key": "IRQ 57 (eth0-rx-0)", "before": "0-1", "now": "3", "plan": "undoing a planned value"},
        {"layer": "kernel", "key": "release", "before": "6.1.0-1", "now": "6.1.0-2", "plan": "not planned"},
    ]
    lat = {"verdict": "MOVED", "p999_ms_before": 0.4, "p999_ms_now": 6.0}
    got = verdict.verdict("accepted", diffs, diffs, lat)
    assert got["verdict"] == "both" and got["status"] == "drift"
    assert got["cause"] == "IRQ 57 (eth0-rx-0): 0-1 -> 3 (undoing a planned value); p999 0.4 -> 6.0 ms"
    noted = [{"layer": "irqs", "key": "IRQ 9 (acpi)", "before": "0", "now": "1", "plan": "not planned"}]
    got = verdict.verdict("accepted", noted, [], {"verdict": "SAME"})
    assert got["verdict"] == "same" and got["noted_only"] == noted


def test_baselines_are_never_overwritten_and_bad_ones_are_one_line(facts):
    now = time.time()
    doc = store.new("h1", "accepted", facts, state.effective_state(facts), None, None, "test", now)
    path = store.write("h1", doc)
    with pytest.raises(BadInput, match="never overwritten"):
        store.write("h1", doc)
    assert store.read("h1", None, facts["hostname"], now)["name"] == "accepted"
    with pytest.raises(BadInput, match="was taken on"):
        store.read("h1", "accepted", "another-host", now)
    with pytest.raises(BadInput, match="the clock went back"):
        store.read("h1", "accepted", None, now - 3600)
    with pytest.raises(BadInput, match="no baseline 'other'"):
        store.read("h1", "other", None, now)
    with pytest.raises(BadInput, match="baseline name"):
        store.check_name("../x")
    path.write_text(json.dumps({**doc, "format": 0}))
    with pytest.raises(BadInput, match="has format 0"):
        store.read("h1", "accepted", None, now)
    path.write_text("{not json")
    with pytest.raises(BadInput):
        store.read("h1", "accepted", None, now)
    assert json.loads((path.parent / "journal.log").read_text().splitlines()[0])["why"] == "test"


@pytest.mark.parametrize(
    ("call", "req", "flag"),
    [
        ("drift", {"inject_stall": "50@0.5"}, "--inject-stall"),
        ("drift", {"smoke_duration": 30.0}, "--smoke-duration"),
        ("baseline", {"smoke_requests": 5}, "--smoke-requests"),
    ],
)
def test_no_smoke_with_a_smoke_run_s_shape_is_bad_input_before_any_host(tmp_path, call, req, flag):
    """Refused before the inventory is read: the inventory named here does not exist."""
    from hostkit import api

    request = {"drift": api.DriftRequest, "baseline": api.BaselineRequest}[call]
    with pytest.raises(BadInput, match=f"^--no-smoke with {flag}: there is no smoke run"):
        getattr(api, call)(request(inventory=str(tmp_path / "none.yml"), smoke=False, **req))


def test_a_signature_s_run_is_a_duration_or_a_count_and_a_stall_is_checked(tmp_path):
    from hostkit import api

    missing = str(tmp_path / "none.yml")
    with pytest.raises(BadInput, match="--requests and --duration exclude each other"):
        api.baseline(api.BaselineRequest(inventory=missing, smoke_duration=30.0, smoke_requests=11_000))
    with pytest.raises(BadInput, match="expects MS@EVERY_S"):
        api.drift(api.DriftRequest(inventory=missing, inject_stall="50"))
    with pytest.raises(BadInput, match="shorter than its period"):
        api.drift(api.DriftRequest(inventory=missing, inject_stall="600@0.5"))


def test_a_calibration_needs_a_baseline_with_latency_and_writes_no_alerting_file(facts, tmp_path):
    """--inject-stall against a baseline taken with --no-smoke would measure nothing and say "same";
    with --prom or --junit it would write a calibration's tail as the host's. Both are bad input,
    before any host is contacted (the inventory's host does not exist)."""
    from hostkit import api

    store.write("h1", store.new("h1", "calm", facts, state.effective_state(facts), None, None, "test", time.time()))
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": {"h1": {"ansible_host": "192.0.2.1"}}}}))
    with pytest.raises(BadInput, match="^--inject-stall: the baseline of h1 has no latency"):
        api.drift(api.DriftRequest(inventory=str(inv), inject_stall="100@0.5"))
    proc = subprocess.run(
        [sys.executable, "-m", "hostkit.cli", "drift", "-i", str(inv), "--inject-stall", "100@0.5", "--prom", "d.prom"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "--inject-stall with --prom: a calibration" in proc.stderr, proc.stderr
    assert not (tmp_path / "d.prom").exists()


# ----------------------------------------------------------------------------- metrics, JUnit, alert rules

RULES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "hostkit-drift.rules.yml"


def judged_fleet() -> dict:
    """Three hosts as hostkit drift judges them: one undone by an upgrade whose tail moved, one the
    same, one that could not be judged."""
    undone = [{"layer": "irqs", "key": "IRQ 57 (eth0)", "before": "0-1", "now": "3", "plan": "undoing a planned value"}]
    return {
        "n1": verdict.verdict("accepted", undone, undone, latency.compare(runs(1, 20_000), runs(2, 20_000, tail=20))),
        "n2": verdict.verdict("accepted", [], [], latency.compare(runs(1, 20_000), runs(3, 20_000))),
        "n3": {"status": "failed", "error": "unreachable"},
    }


def test_drift_metrics_are_promtool_clean_and_say_each_host_s_verdict():
    from hostkit.drift.prometheus import junit_xml, prometheus
    from tests.unit.test_smoke_metrics import families, promtool_check

    text = prometheus(judged_fleet(), now=1_800_000_000)
    promtool_check(text)
    fams = families(text)
    value = {(f.name, tuple(sorted(s.labels.items()))): s.value for f in fams.values() for s in f.samples}
    n1, n2 = (("baseline", "accepted"), ("host", "n1")), (("baseline", "accepted"), ("host", "n2"))
    assert value[("hostkit_drift_state_drifted", n1)] == 1 and value[("hostkit_drift_latency_drifted", n1)] == 1
    assert value[("hostkit_drift_state_drifted", n2)] == 0 and value[("hostkit_drift_latency_drifted", n2)] == 0
    undone = (("baseline", "accepted"), ("host", "n1"), ("layer", "irqs"), ("plan", "undoing a planned value"))
    assert value[("hostkit_drift_differences", undone)] == 1
    assert value[("hostkit_drift_failed", (("host", "n3"),))] == 1
    assert value[("hostkit_drift_failed", (("host", "n1"),))] == 0
    assert not any(k[0] == "hostkit_drift_state_drifted" and ("host", "n3") in k[1] for k in value)  # no stale verdict
    assert value[("hostkit_drift_latency_samples", (*n1[:1], ("host", "n1"), ("run", "now")))] == 20_000

    xml = junit_xml(judged_fleet())
    assert 'tests="5" failures="2" errors="1" skipped="0"' in xml
    assert "irqs IRQ 57 (eth0): 0-1 -&gt; 3 (undoing a planned value)" in xml


def test_the_example_alert_rules_pass_promtool_and_page_on_undone_tuning(tmp_path):
    """`promtool check rules` on the shipped example, then `promtool test rules`: the metrics of
    the fleet above, as node_exporter would scrape them, fire the page for n1 and nothing for n2."""
    from tests.unit.test_smoke_metrics import PROMTOOL

    proc = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "SUCCESS: 5 rules found" in proc.stdout, proc.stdout + proc.stderr
    series = [
        ('hostkit_drift_differences{host="n1",baseline="accepted",layer="irqs",plan="undoing a planned value"}', 1),
        ('hostkit_drift_state_drifted{host="n1",baseline="accepted"}', 1),
        ('hostkit_drift_latency_drifted{host="n1",baseline="accepted"}', 1),
        ('hostkit_drift_state_drifted{host="n2",baseline="accepted"}', 0),
        ('hostkit_drift_latency_drifted{host="n2",baseline="accepted"}', 0),
        ('hostkit_drift_failed{host="n3"}', 1),
    ]
    page = {"severity": "page", "host": "n1", "baseline": "accepted"}
    rules = {r["alert"]: r for r in yaml.safe_load(RULES.read_text())["groups"][0]["rules"]}

    def said(alert: str, **values) -> dict:
        """The annotations as Prometheus renders them: $labels and $value substituted."""
        out = {}
        for key, text in rules[alert]["annotations"].items():
            for name, v in values.items():
                text = text.replace(f"{{{{ $labels.{name} }}}}", v).replace("{{ $value }}", values.get("value", ""))
            out[key] = text.strip()
        return out

    undone = said("HostkitTuningUndone", host="n1", baseline="accepted", value="1")
    assert undone["summary"] == "n1: a change undid hostkit's tuning (baseline accepted)"
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": f"{v}x120"} for s, v in series],
                "alert_rule_test": [
                    {
                        "eval_time": "5m",
                        "alertname": "HostkitTuningUndone",
                        "exp_alerts": [{"exp_labels": page, "exp_annotations": undone}],
                    },
                    {
                        "eval_time": "5m",
                        "alertname": "HostkitTailLatencyDrifted",
                        "exp_alerts": [
                            {
                                "exp_labels": page,
                                "exp_annotations": said("HostkitTailLatencyDrifted", host="n1", baseline="accepted"),
                            }
                        ],
                    },
                    # state drifted, but by an undone value: the page above, not a second, lesser alert
                    {"eval_time": "90m", "alertname": "HostkitStateDrifted", "exp_alerts": []},
                    {
                        "eval_time": "90m",
                        "alertname": "HostkitDriftNotJudged",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "ticket", "host": "n3"},
                                "exp_annotations": said("HostkitDriftNotJudged", host="n3"),
                            }
                        ],
                    },
                ],
            }
        ],
    }
    (tmp_path / "test.yml").write_text(json.dumps(test))
    proc = subprocess.run(
        [PROMTOOL, "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
