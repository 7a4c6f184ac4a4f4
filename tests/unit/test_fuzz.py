"""Inputs nobody here wrote, generated: damaged sysroot trees, profiles, smoke and migration reports,
host journals, the lab's state file and VM specs. Whatever the input, hostkit answers with a result
or one of its own errors (exit 2, one line naming what is wrong) within a bound: never a Python
traceback, never a hang, never a write to what it only reads.

The budget is small in ``make test`` (HOSTKIT_FUZZ_EXAMPLES, default 40 per property) and large in
``make fuzz`` (2000). A crash hypothesis finds is kept as an ``@example`` of its property: the
regression cases below.
"""

from __future__ import annotations

import json
import os
import signal
import string
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hostkit.errors import HostkitError
from tests.treehash import tree_hash

EXAMPLES = int(os.environ.get("HOSTKIT_FUZZ_EXAMPLES", "40"))
BOUND_S = 20  # seconds one input may take before it counts as a hang
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("HOSTKIT_FUZZ_SEED"),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


@contextmanager
def bounded(what: str):
    """Fail (not hang) when the body runs longer than BOUND_S."""

    def alarm(signum, frame):
        raise AssertionError(f"{what}: no answer within {BOUND_S} s (a hang)")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(BOUND_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def answers(fn, *args, **kw):
    """``fn(*args)``'s result, or None when it refused the input with one of hostkit's own errors
    in one line; anything else (a traceback) fails the test."""
    with bounded(getattr(fn, "__name__", "call")):
        try:
            return fn(*args, **kw)
        except HostkitError as exc:
            text = str(exc)
            assert text and "\n" not in text and len(text) < 2000, f"not a one-line error: {text[:3000]!r}"
            return None


# ----------------------------------------------------------------------------- what generated values look like

NUMBERS = st.sampled_from(
    [
        "0",
        "-1",
        "1",
        "63",
        "99999999",
        "²",
        "٣",
        "1e3",
        "0x10",
        " 7 ",
        "7\n\x00",
        "",
        "-",
        "4294967296",
        "18446744073709551616",
    ]
)
CPULISTS = st.sampled_from(
    [
        "0-3",
        "0-3,8-11",
        "3-1",
        "0-",
        "a",
        "0-99999999",
        "0-63\n\x00",
        "0,,1",
        "0-3:1/2",
        "²",
        "ff,ffffffff",
        "0" * 5000,
        "1-2-3",
        " ",
        "\x00",
    ]
)
JUNK = st.one_of(NUMBERS, CPULISTS, st.text(max_size=40), st.binary(max_size=40).map(lambda b: b.decode("latin-1")))
# Files the facts read on every host, as the fixture trees name them.
TOPOLOGY_FILES = [
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/possible",
    "sys/devices/system/cpu/present",
    "sys/devices/system/cpu/isolated",
    "sys/devices/system/cpu/cpu0/topology/physical_package_id",
    "sys/devices/system/cpu/cpu1/topology/core_cpus_list",
    "sys/devices/system/cpu/cpu0/topology/thread_siblings",
    "sys/devices/system/node/node0/cpulist",
    "sys/devices/system/node/node0/distance",
    "sys/devices/system/node/node0/meminfo",
    "proc/cmdline",
    "proc/stat",
    "proc/interrupts",
    "proc/cpuinfo",
    "proc/sys/kernel/sched_rt_runtime_us",
    "sys/class/dmi/id/sys_vendor",
    "sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list",
    "proc/sysinfo",
    "sys/firmware/dmi/tables/DMI",
    "etc/default/grub",
    "proc/irq/default_smp_affinity",
]
DAMAGE = st.sampled_from(["text", "directory", "fifo", "loop", "missing", "huge"])


def damage(root: Path, rel: str, how: str, text: str) -> None:
    path = root / rel
    if path.is_dir() and not path.is_symlink():
        return
    path.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    if how == "text":
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
    elif how == "directory":
        path.mkdir()
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "loop":
        path.symlink_to(path.name)
    elif how == "huge":
        path.write_bytes(b"0," * (9 << 20))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    from hostkit.lab import fixtures

    return fixtures.materialize("kvm-small", tmp_path_factory.mktemp("fuzz") / "kvm-small")


# ----------------------------------------------------------------------------- sysroot trees


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(TOPOLOGY_FILES), DAMAGE, JUNK), min_size=1, max_size=4))
@example([("sys/devices/system/node/node0/distance", "text", "10 ²")])
@example([("sys/devices/system/cpu/online", "text", "0-63\n\x00")])
@example([("proc/cmdline", "fifo", "")])
@example([("proc/interrupts", "loop", "")])
@example([("etc/default/grub", "fifo", "0")])  # found by the fuzzer: the boot loader reader waited on it
@example([("sys/devices/system/node/node0/meminfo", "text", "Node 0 MemTotal: ٣ kB")])
@example([("sys/devices/system/cpu/online", "text", "0" * 5000)])  # make fuzz: int() refuses over 4300 digits
def test_facts_and_plan_of_a_damaged_tree_answer_and_write_nothing(pristine, tmp_path_factory, damages):
    import shutil

    from hostkit.facts import gather
    from hostkit.plan import make_plan
    from hostkit.profiles import load_profile

    root = tmp_path_factory.mktemp("tree") / "root"
    shutil.copytree(pristine, root, symlinks=True)
    for rel, how, text in damages:
        damage(root, rel, how, text)
    before = tree_hash(root)
    facts = answers(gather, str(root))
    if facts is not None:
        json.dumps(facts)  # the document is JSON (no bytes, no sets)
        answers(make_plan, facts, load_profile("bare-metal-inference"))
    assert tree_hash(root) == before


# ----------------------------------------------------------------------------- documents users name


def documents(depth: int = 3):
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=20)
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=5)),
        max_leaves=12,
    )


PROFILE_KEYS = [
    "name",
    "extends",
    "isolation",
    "reserve_per_node",
    "sched_rt_runtime_us",
    "governor",
    "irq",
    "kubelet",
    "containerd",
    "tuned",
    "smoke",
    "bios",
    "sysctl",
    "allow_virtual",
]


@FUZZ
@given(st.one_of(documents(), st.dictionaries(st.sampled_from(PROFILE_KEYS), documents(), max_size=5)))
@example({"extends": ["bare-metal-inference"]})
@example({"extends": {"a": 1}})
def test_a_profile_file_of_any_shape_is_loaded_or_refused(tmp_path_factory, doc):
    from hostkit.profiles import load_profile

    path = tmp_path_factory.mktemp("profile") / "p.yml"
    path.write_text(yaml.safe_dump(doc))
    answers(load_profile, str(path))


RAW_YAML = st.sampled_from(
    [
        "a: &a [1, 2]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
        "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
        "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nisolation: *f\n",
        "[" * 5000 + "]" * 5000,
        "{a: " * 3000 + "1" + "}" * 3000,
        "\xff\xfe not utf-8",
        ": : :",
        "extends: x\n" * 3,
    ]
)


@FUZZ
@given(RAW_YAML)
def test_a_profile_file_that_is_no_yaml_mapping_is_refused_in_one_line(tmp_path_factory, text):
    from hostkit.profiles import load_profile

    path = tmp_path_factory.mktemp("raw") / "p.yml"
    path.write_bytes(text.encode("latin-1") if text.startswith("\xff") else text.encode())
    assert answers(load_profile, str(path)) is None


def smoke_like():
    """A smoke result with some fields replaced by anything."""
    base = {
        "deschedule_ms": {"p50": 0.01, "p99": 0.1, "p999": 1.0, "max": 2.0},
        "queue_wait_ms": {"p99": 0.2},
        "rpc_ms": {"p50": 0.01, "p99": 0.05},
        "throughput_rps": 1000.0,
        "samples": 20000,
        "slow_infer": {"count": 0},
        "sched_fifo": {"used": True, "available": True, "policy": "budget"},
        "transport": "shm",
        "slo": {"p999_ms": 1.0, "target_p999_ms": 1.0, "passed": True, "verdict": "PASSED"},
        "diagnosis": [{"cause": "none", "confidence": "high", "evidence": "-"}],
    }
    return st.dictionaries(st.sampled_from(sorted(base)), documents(), max_size=3).map(lambda d: {**base, **d})


@FUZZ
@given(
    st.one_of(smoke_like(), documents(), st.dictionaries(st.text(max_size=5), smoke_like(), max_size=3)), smoke_like()
)
def test_migrate_report_of_any_document_is_written_or_refused(tmp_path_factory, before, after):
    from hostkit.smoke.migration import load_results, markdown, pair

    d = tmp_path_factory.mktemp("mig")
    (d / "vm.json").write_text(json.dumps(before))
    (d / "bm.json").write_text(json.dumps(after))

    def report():
        return markdown(pair(load_results(str(d / "vm.json")), load_results(str(d / "bm.json"))), "vm", "bm")

    answers(report)


@FUZZ
@given(
    st.lists(
        st.one_of(
            documents(),
            st.fixed_dictionaries(
                {
                    "kind": st.sampled_from(["file", "values", "kthreads", "other"]),
                    "time": st.text(max_size=8),
                    "path": JUNK,
                    "before": documents(),
                    "items": documents(),
                }
            ),
        ),
        max_size=4,
    ),
    st.one_of(st.text(max_size=8), st.integers()),
)
def test_a_damaged_journal_is_named_and_nothing_is_rolled_back(tmp_path_factory, entries, run_id):
    from hostkit.agent.journal import history
    from hostkit.agent.rollback import rollback

    root = tmp_path_factory.mktemp("journal")
    (root / "etc").mkdir()
    (root / "etc/x.conf").write_text("x\n")
    jdir = root / "var/lib/hostkit/journal"
    jdir.mkdir(parents=True)
    (jdir / "20261201T000000Z-aaaaaa.json").write_text(
        json.dumps({"run_id": run_id, "started": "2026", "entries": entries})
    )
    before = tree_hash(root)
    answers(history, str(root))
    answers(rollback, str(root), check=True)
    assert tree_hash(root) == before


@FUZZ
@given(st.one_of(documents(), st.fixed_dictionaries({"port": documents(), "hosts": st.lists(documents(), max_size=3)})))
@example({"port": None, "hosts": [{"\n": 0}]})  # make fuzz: a key with a newline quoted into the error line
def test_a_damaged_lab_state_file_is_named(tmp_path_factory, doc):
    from hostkit.lab.lab import Lab

    d = tmp_path_factory.mktemp("labstate")
    (d / "lab.json").write_text(json.dumps(doc))
    answers(Lab(d).hosts)


@FUZZ
@given(st.one_of(st.text(alphabet=string.printable + "²٣", max_size=60), documents()))
@example("sockets=2,cores=2,threads=1,nodes=2,mem=" + "9" * 5000)
def test_any_vm_spec_is_parsed_or_refused(spec):
    from hostkit.lab.vm import parse_spec

    answers(parse_spec, spec)
