"""Smoke metrics and plots: histograms over fixed buckets, the Prometheus textfile (promtool clean,
written atomically), a fleet's merged histograms, and percentile-axis plots whose p99, p99.9 and
max labels never overlap."""

from __future__ import annotations

import json
import math
import random
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostkit.smoke import migration, output_files, plots, prometheus
from hostkit.smoke.fleet import fleet_summary
from hostkit.smoke.metrics import (
    BUCKETS_S,
    histogram,
    histogram_percentile,
    judge_slo,
    merge_histograms,
    percentile,
    summary,
)

PROMTOOL = "/usr/bin/promtool"  # Debian package prometheus (make setup)


def promtool_check(text: bytes | str) -> None:
    """``promtool check metrics`` on ``text``: exit 0 and not one line of complaint."""
    if not Path(PROMTOOL).exists():
        pytest.fail("promtool is not installed: `make setup` installs the Debian package prometheus")
    data = text if isinstance(text, bytes) else text.encode()
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=data, capture_output=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b""), proc.stdout + proc.stderr


def families(text: bytes | str) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    return {f.name: f for f in text_string_to_metric_families(text.decode() if isinstance(text, bytes) else text)}


def buckets_of(fam, **labels) -> list[tuple[str, float]]:
    """A histogram family's cumulative (le, count) pairs for one series."""
    return [
        (s.labels["le"], s.value)
        for s in fam.samples
        if s.name.endswith("_bucket") and all(s.labels.get(k) == v for k, v in labels.items())
    ]


def cumulative(hist: dict) -> list[float]:
    out, acc = [], 0
    for c in hist["counts"]:
        acc += c
        out.append(float(acc))
    return out


def doc_from(deschedule_ms: list[float], rpc_ms: list[float], target_ms: float = 1.0) -> dict:
    """The parts of a smoke result the metrics read, made by the same functions a run uses."""
    return {
        "histograms": {"deschedule": histogram(deschedule_ms), "rpc": histogram(rpc_ms)},
        "deschedule_ms": summary(deschedule_ms),
        "rpc_ms": summary(rpc_ms),
        "samples": len(deschedule_ms),
        "slo": judge_slo(deschedule_ms, target_ms, faults=[], errors=0),
        "sched_fifo": {"used": False},
    }


# ----------------------------------------------------------------------------- histograms


def test_buckets_are_fixed_increasing_and_span_1us_to_10s():
    assert BUCKETS_S[0] == 1e-6 and BUCKETS_S[-1] == 10.0 and len(BUCKETS_S) == 71
    assert all(b / a <= 1.34 for a, b in zip(BUCKETS_S, BUCKETS_S[1:]))


def test_a_value_on_a_bound_counts_in_that_bucket_and_beyond_the_last_in_inf():
    h = histogram([0.001, 0.0011, 2.0, 20_000.0])  # ms: 1 us exactly, 1.1 us, 2 ms, 20 s
    assert h["counts"][0] == 1 and h["counts"][1] == 1  # le=1e-6, le=1.25e-6
    assert h["counts"][BUCKETS_S.index(2e-3)] == 1
    assert h["counts"][-1] == 1 and len(h["counts"]) == len(BUCKETS_S) + 1
    assert h["count"] == 4 and h["sum_s"] == pytest.approx(20.0020021)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(min_value=0, max_value=12_000, allow_nan=False), min_size=1, max_size=400),
    st.sampled_from([50.0, 99.0, 99.9, 100.0]),
)
def test_histogram_percentile_is_the_bound_of_the_bucket_holding_the_exact_percentile(values, p):
    exact_s = percentile(sorted(values), p) / 1000.0
    bound = histogram_percentile(histogram(values), p)
    assert bound == min((b for b in BUCKETS_S if b >= exact_s), default=math.inf)


def test_merged_histograms_add_up_and_give_the_pooled_percentiles():
    rng = random.Random(13)
    a = [rng.lognormvariate(-3, 1) for _ in range(5000)]
    b = [rng.lognormvariate(-1, 1.5) for _ in range(3000)]
    merged = merge_histograms([histogram(a), histogram(b)])
    assert merged["counts"] == histogram(a + b)["counts"] and merged["count"] == 8000
    for p in (50, 99, 99.9):
        assert histogram_percentile(merged, p) == histogram_percentile(histogram(a + b), p)
    other = {**histogram(a), "le_s": [x * 2 for x in BUCKETS_S]}
    with pytest.raises(ValueError, match="different bucket bounds"):
        merge_histograms([histogram(a), other])


# ----------------------------------------------------------------------------- textfiles


def test_host_textfile_is_promtool_clean_in_seconds_with_the_slo():
    rng = random.Random(1)
    d = doc_from(
        [rng.expovariate(20) for _ in range(12_000)], [rng.expovariate(2) for _ in range(12_000)], target_ms=0.25
    )  # p999 of a 0.05 ms mean exponential: ~0.35 ms, MISSED
    text = prometheus.prometheus(d, "web-1", now=1.7e9)
    promtool_check(text)
    fams = families(text)
    assert fams["hostkit_smoke_deschedule_seconds"].type == "histogram"
    assert [v for _, v in buckets_of(fams["hostkit_smoke_deschedule_seconds"], host="web-1")] == cumulative(
        d["histograms"]["deschedule"]
    )
    assert buckets_of(fams["hostkit_smoke_rpc_seconds"])[-1] == ("+Inf", 12_000.0)
    gauge = {n: {tuple(sorted(s.labels.items())): s.value for s in f.samples} for n, f in fams.items()}
    assert gauge["hostkit_smoke_slo_target_p999_seconds"] == {(("host", "web-1"),): 0.00025}
    assert gauge["hostkit_smoke_slo_p999_seconds"][(("host", "web-1"),)] == pytest.approx(d["slo"]["p999_ms"] / 1000)
    assert gauge["hostkit_smoke_slo_verdict"] == {
        (("host", "web-1"), ("verdict", v)): float(v == "MISSED") for v in ("PASSED", "MISSED", "INCONCLUSIVE")
    }
    assert d["slo"]["verdict"] == "MISSED"
    assert not any("_ms" in n or "quantile" in str(f.samples) for n, f in fams.items())


def test_fleet_textfile_sums_two_hosts_buckets():
    rng = random.Random(2)
    docs = {
        "a": doc_from([rng.expovariate(50) for _ in range(11_000)], [rng.expovariate(5) for _ in range(11_000)]),
        "b": doc_from([rng.expovariate(2) for _ in range(4_000)], [rng.expovariate(1) for _ in range(4_000)]),
    }
    fleet = fleet_summary(docs)
    text = prometheus.prometheus_fleet(fleet, failed=["c"], now=1.7e9)
    promtool_check(text)
    fams = families(text)
    for key in ("deschedule", "rpc"):
        got = [v for _, v in buckets_of(fams[f"hostkit_smoke_fleet_{key}_seconds"])]
        per_host = [cumulative(docs[h]["histograms"][key]) for h in ("a", "b")]
        assert got == [x + y for x, y in zip(*per_host)]
    pooled = histogram_percentile(merge_histograms([docs[h]["histograms"]["deschedule"] for h in docs]), 99.9)
    p999 = fams["hostkit_smoke_fleet_deschedule_p999_seconds"].samples[0].value
    assert p999 == min(pooled, max(d["deschedule_ms"]["max"] for d in docs.values()) / 1000)
    hosts = {s.labels["state"]: s.value for s in fams["hostkit_smoke_fleet_hosts"].samples}
    assert hosts == {"measured": 2.0, "failed": 1.0}
    verdicts = {s.labels["verdict"]: s.value for s in fams["hostkit_smoke_fleet_slo_hosts"].samples}
    assert verdicts == {"PASSED": 1.0, "MISSED": 1.0, "INCONCLUSIVE": 0.0}  # b: 4,000 samples, many over 1 ms
    assert output_files.host_path("/x/hk.prom", "web 1/b") == "/x/hk-web_1_b.prom"


def test_the_text_is_prometheus_clients_byte_for_byte():
    """hostkit writes the exposition itself (standard library: hosts run it, the drift timer); the
    same families rendered by prometheus_client's generate_latest, the reference, are the same bytes:
    the host's (histograms, NaN-free gauges, a label with a quote and a backslash) and the fleet's."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import Metric

    rng = random.Random(3)
    d = doc_from([rng.expovariate(30) for _ in range(12_000)], [rng.expovariate(4) for _ in range(12_000)])
    sets = [
        prometheus.host_families(d, 'web "1"\\b', now=1.7e9),
        prometheus.fleet_families(fleet_summary({"a": d}), failed=["c"], now=1.7e9),
    ]
    for fams in sets:

        class Reference:
            def collect(self, fams=fams):
                for f in fams:
                    m = Metric(f.name, f.doc, f.type)
                    for name, labels, value in f.samples:
                        m.add_sample(name, labels, value)
                    yield m

        registry = CollectorRegistry(auto_describe=True)
        registry.register(Reference())
        assert prometheus.exposition(fams) == generate_latest(registry)


def test_fleet_without_a_measured_host_still_writes_a_clean_file_and_plot(tmp_path):
    fleet = fleet_summary({})
    text = prometheus.prometheus_fleet(fleet, failed=["a", "b"], now=1.7e9)
    promtool_check(text)
    assert {s.labels["state"]: s.value for s in families(text)["hostkit_smoke_fleet_hosts"].samples} == {
        "measured": 0.0,
        "failed": 2.0,
    }
    assert "hostkit_smoke_fleet_deschedule_seconds" not in families(text)
    plots.plot_fleet({}, fleet, str(tmp_path / "f.png"))
    assert png_size(tmp_path / "f.png") == ("PNG", (990, 605))


def test_textfile_replaces_the_old_one_by_rename_never_half_written(tmp_path):
    target = tmp_path / "hostkit.prom"
    small, big = b"# small\n" * 10, b"x" * (4 << 20)  # a 4 MiB file takes many write(2)s
    output_files.write_atomic(str(target), small)
    seen, stop = set(), threading.Event()

    def reader():
        while not stop.is_set():
            data = target.read_bytes()
            seen.add(data if data in (small, big) else f"TORN {len(data)}")

    t = threading.Thread(target=reader)
    t.start()
    inodes = {target.stat().st_ino}
    try:
        for k in range(30):
            output_files.write_atomic(str(target), big if k % 2 == 0 else small)
            inodes.add(target.stat().st_ino)
    finally:
        stop.set()
        t.join()
    assert not [s for s in seen if isinstance(s, str)], sorted(s for s in seen if isinstance(s, str))
    assert len(inodes) > 1  # a new file each time, renamed over the old one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostkit.prom"]  # no temporary file left
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # node_exporter may run as another user


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "hostkit.prom"
    output_files.write_atomic(str(target), b"old\n")
    with pytest.raises(TypeError):  # fails after the temporary file was made: text into a binary file
        output_files.write_atomic(str(target), "new\n")
    assert target.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostkit.prom"]


# ----------------------------------------------------------------------------- plots


def label_boxes(fig) -> dict[str, list]:
    """The mark labels' text boxes in pixels, as matplotlib's renderer lays them out."""
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    out: dict[str, list] = {}
    for t in fig.findobj(Text):
        gid = t.get_gid() or ""
        if gid.startswith("hostkit-mark:"):
            t.update_positions(renderer)
            out.setdefault(gid.split(":", 1)[1], []).append((t.get_text(), Text.get_window_extent(t, renderer)))
    return out


def assert_no_overlap(fig, expected: dict[str, int]) -> None:
    boxes = label_boxes(fig)
    assert {k: len(v) for k, v in boxes.items()} == expected
    flat = [(text, b) for v in boxes.values() for text, b in v]
    width, height = fig.get_size_inches() * fig.dpi
    for i, (ta, a) in enumerate(flat):
        assert 0 <= a.x0 and a.x1 <= width and 0 <= a.y0 and a.y1 <= height, f"{ta!r} outside the figure"
        for tb, b in flat[i + 1 :]:
            assert not a.overlaps(b), f"{ta!r} overlaps {tb!r}"


def png_size(path: Path) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as im:
        im.verify()  # a whole, valid PNG
    with Image.open(path) as im:
        return im.format, im.size


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """One real smoke run through the CLI (20,000 inferences of the transport-only model, ~1 s):
    its JSON, its textfile and its plot."""
    d = tmp_path_factory.mktemp("smoke")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hostkit.cli",
            "smoke",
            "--requests",
            "20000",
            "--infer-ms",
            "0",
            "--target-p999-ms",
            "1000",
            "--json",
            "--prom",
            str(d / "hostkit.prom"),
            "--plot",
            str(d / "smoke.png"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), d


@pytest.mark.live
def test_real_smoke_textfile_is_promtool_clean(real_run):
    doc, d = real_run
    text = (d / "hostkit.prom").read_bytes()
    promtool_check(text)
    fams = families(text)
    host = fams["hostkit_smoke_deschedule_seconds"].samples[0].labels["host"]
    assert [v for _, v in buckets_of(fams["hostkit_smoke_deschedule_seconds"], host=host)] == cumulative(
        doc["histograms"]["deschedule"]
    )
    assert buckets_of(fams["hostkit_smoke_rpc_seconds"])[-1] == ("+Inf", 20000.0)
    verdict = {s.labels["verdict"]: s.value for s in fams["hostkit_smoke_slo_verdict"].samples}
    assert verdict == {"PASSED": 1.0, "MISSED": 0.0, "INCONCLUSIVE": 0.0}
    assert sorted(p.name for p in d.iterdir()) == ["hostkit.prom", "smoke.png"]


@pytest.mark.live
def test_real_smoke_plot_is_a_whole_png_of_the_figure_size(real_run):
    _, d = real_run
    assert png_size(d / "smoke.png") == ("PNG", (990, 605))


@pytest.mark.live
def test_plot_labels_p99_p999_and_max_without_overlap(real_run, tmp_path):
    doc, _ = real_run
    assert doc["samples"] == 20000  # p99, p99.9 and max are three different samples
    fig = plots.plot_results([("real run", doc)], str(tmp_path / "one.png"), 1000)
    assert png_size(tmp_path / "one.png") == ("PNG", (990, 605))
    assert_no_overlap(fig, {"p99": 1, "p99.9": 1, "max": 1})
    labels = [t for v in label_boxes(fig).values() for t, _ in v]
    assert any(t.startswith("p99 ") for t in labels) and any(t.startswith("max ") for t in labels)
    # before and after the same run: six labels on three points, still spread apart
    fig = migration.plot([("h", doc, doc)], str(tmp_path / "same.png"))
    assert png_size(tmp_path / "same.png") == ("PNG", (990, 605))
    assert_no_overlap(fig, {"p99": 2, "p99.9": 2, "max": 2})


def test_plot_of_all_samples_spreads_a_crowded_tail(tmp_path):
    rng = random.Random(5)
    values = [rng.lognormvariate(-3, 0.2) for _ in range(1500)]  # p99.9 and max two samples apart
    fig = plots.plot([("a", {}, values), ("b", {}, values[:900])], str(tmp_path / "p.png"), target_ms=0.06)
    assert png_size(tmp_path / "p.png") == ("PNG", (990, 605))
    # b's 900 samples: its nearest-rank p99.9 is its largest sample, one label for both
    assert_no_overlap(fig, {"p99": 2, "p99.9": 1, "max": 1, "p99.9 = max": 1})


def test_plot_without_matplotlib_is_bad_input_before_the_run(tmp_path):
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from hostkit.cli.main import main\n"
        f"sys.exit(main(['smoke', '--duration', '30', '--plot', {str(tmp_path / 'p.png')!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "--plot needs matplotlib" in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", ["--prom", "--plot"])
def test_output_into_a_missing_directory_is_bad_input_before_the_run(tmp_path, option):
    for extra in ([], ["-i", str(tmp_path / "no-inventory.yml")]):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "hostkit.cli",
                "smoke",
                "--duration",
                "30",
                *extra,
                option,
                str(tmp_path / "nowhere" / "f"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert f"{option} {tmp_path / 'nowhere' / 'f'}: directory {tmp_path / 'nowhere'} does not exist" in proc.stderr
    assert list(tmp_path.iterdir()) == []
