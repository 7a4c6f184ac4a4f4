"""Inputs nobody here wrote, generated: damaged sysroot trees, profiles, smoke and migration reports,
host journals, the lab's state file, rollout state files, inventories and VM specs. Whatever the
input, hostkit answers with a result or one of its own errors (exit 2, one line naming what is
wrong) within a bound: never a Python traceback, never a hang, never a write to what it only reads.

Beside documents of any shape, real documents with some values swapped for what Python cannot
compute with (integers of thousands of digits, beyond float range, NaN and Infinity), values of the
wrong type, and file, directory and profile names no file system can hold.

The budget is small in ``make test`` (HOSTKIT_FUZZ_EXAMPLES, default 40 per property) and large in
``make fuzz`` (2000). A crash hypothesis finds is kept as an ``@example`` of its property: the
regression cases below.
"""

from __future__ import annotations

import contextlib
import copy
import io
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


# ----------------------------------------------------------------------------- numbers, types and names
# Real documents with some values (or whole parts) swapped for raw text: JSON and YAML that Python
# parses into numbers it cannot compute with, or into the wrong type.

JSON_NASTY = [
    "1" + "0" * 5000,  # int() refuses over 4300 digits (ValueError)
    "-" + "9" * 4400,
    "1" + "0" * 400,  # within int(), beyond float range (OverflowError on the way to a float)
    "18446744073709551617",
    "-18446744073709551617",
    "1e999",  # inf
    "-1e999",
    "1" + "0" * 400 + ".5",
    "NaN",
    "Infinity",
    "-Infinity",
    "5e-324",
    "-1",
    "0",
    "1.5",
    "true",
    "null",
    '"12"',
    '""',
    '"\\u0000"',
    "[]",
    "{}",
    "[1e999, NaN]",
    '{"p99": Infinity}',
]
YAML_NASTY = [
    "1" + "0" * 5000,
    "1" + "0" * 400,
    "0x" + "f" * 300,  # base 16: int() has no digit limit there, the value is 1200 bits
    "0b" + "1" * 100,
    "0o" + "7" * 200,
    ":".join(["59"] * 40),  # YAML 1.1 base 60
    "1_" * 30 + "0",
    ".inf",
    "-.inf",
    ".nan",
    "1.0e+999",
    "-1",
    "0",
    "true",
    "~",
    "'12'",
    "[]",
    "{}",
    "!!binary aGk=",
    "2001-12-14",
    "[.inf, .nan]",
    "{a: .nan}",
]
# Names no file system holds, and names that hold what no file name can.
NAMES = st.one_of(
    st.integers(256, 5000).map(lambda n: "a" * n),
    st.integers(21, 40).map(lambda n: "/".join(["b" * 200] * n)),  # 21 x 201 bytes > PATH_MAX
    st.integers(2048, 2100).map(lambda n: "x/" * n),
    st.sampled_from(["a\x00b", "p.yml\x00", "\udcff" * 300, "\ud800.yml", "é" * 130, "." * 300]),
)


def _paths(doc, at=()):
    """Every part of ``doc`` by its path of keys and indexes (the root excluded)."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield at + (key,)
        yield from _paths(value, at + (key,))


def _swapped(base: dict, nasty: list[str], dump):
    """``base`` with 1-3 of its parts swapped for raw text from ``nasty``, dumped by ``dump``."""

    @st.composite
    def make(draw):
        doc = copy.deepcopy(base)
        paths = sorted(set(_paths(doc)), key=repr)
        tokens = {}
        for n in range(draw(st.integers(1, 3))):
            path = draw(st.sampled_from(paths))
            node = doc
            try:
                for key in path[:-1]:
                    node = node[key]
                node[path[-1]] = f"RAWTOKEN{n}X"
            except (KeyError, IndexError, TypeError):  # a part already swapped away
                continue
            tokens[f"RAWTOKEN{n}X"] = draw(st.sampled_from(nasty))
        text = dump(doc)
        for placeholder, token in tokens.items():
            text = text.replace(json.dumps(placeholder) if dump is json.dumps else placeholder, token)
        return text

    return make()


def _yaml(doc) -> str:
    return yaml.safe_dump(doc, default_flow_style=True, width=1 << 30)


SMOKE_RESULT = {
    "deschedule_ms": {"p50": 0.01, "p99": 0.1, "p999": 1.0, "max": 2.0},
    "queue_wait_ms": {"p99": 0.2},
    "rpc_ms": {"p50": 0.01, "p99": 0.05},
    "throughput_rps": 1000.0,
    "samples": 20000,
    "slow_infer": {"count": 0},
    "sched_fifo": {"used": True, "available": True, "policy": "budget"},
    "transport": "shm",
    "slo": {"p999_ms": 1.0, "target_p999_ms": 1.0, "passed": True, "verdict": "PASSED"},
    "diagnosis": [{"cause": "none", "confidence": "high", "evidence": "-", "primary": True}],
    "gaps": {"costops": {"share_of_run": 0.01}, "tail_attribution": {"share": 0.5}},
    "deschedule_cdf_ms": [0.01, 0.1, 1.0, 2.0],
}


def cli(*args) -> tuple[int, str]:
    """hostkit's CLI in-process: (exit code, stderr); a traceback fails the test."""
    from hostkit.cli import main

    err = io.StringIO()
    with bounded(args[0]), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as exc:  # argparse
            rc = exc.code
    return rc, err.getvalue()


def assert_answered(rc, err, codes=(0, 1)):
    """A result (``codes``) or bad input: exit 2 with exactly one ``hostkit: error:`` line."""
    if rc == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("hostkit: error: ") and len(lines[0]) < 2000, err[-3000:]
    else:
        assert rc in codes, (rc, err[-3000:])


@FUZZ
@given(
    _swapped(SMOKE_RESULT, JSON_NASTY, json.dumps),
    st.one_of(st.just(json.dumps(SMOKE_RESULT)), _swapped(SMOKE_RESULT, JSON_NASTY, json.dumps)),
    st.booleans(),
)
@example(
    json.dumps(SMOKE_RESULT).replace('"samples": 20000', '"samples": 1' + "0" * 5000), json.dumps(SMOKE_RESULT), False
)
@example(json.dumps(SMOKE_RESULT).replace('"passed": true, ', ""), json.dumps(SMOKE_RESULT), True)
@example(
    json.dumps(SMOKE_RESULT).replace('"throughput_rps": 1000.0', '"throughput_rps": 1' + "0" * 400),
    json.dumps(SMOKE_RESULT),
    False,
)
def test_migrate_report_of_numbers_and_types_it_cannot_use_is_bad_input(tmp_path_factory, before, after, fleet):
    """``hostkit migrate report`` as an operator runs it, Markdown and JSON: numbers Python cannot
    compute with or fields of the wrong type are bad input, and then no Markdown file is written."""
    d = tmp_path_factory.mktemp("mig")
    wrap = (lambda text: '{"hosts": {"web1": ' + text + "}}") if fleet else (lambda text: text)
    (d / "vm.json").write_text(wrap(before))
    (d / "bm.json").write_text(wrap(after))
    rc, err = cli("migrate", "report", d / "vm.json", d / "bm.json", "--md", d / "out.md")
    assert_answered(rc, err)
    assert (d / "out.md").exists() == (rc != 2)
    assert_answered(*cli("migrate", "report", d / "vm.json", d / "bm.json", "--json"))


LAB_STATE = {
    "port": 2222,
    "hosts": [
        {
            "name": "h1",
            "address": "127.0.0.2",
            "port": 2222,
            "sysroot": "/nonexistent/h1",
            "source": "kvm-small",
            "pid": 4194304,
            "kind": "sshd",
            "vm": None,
            "started": None,
        },
        {
            "name": "g1",
            "address": "127.0.0.3",
            "port": 2223,
            "sysroot": "/",
            "source": "sockets=1,cores=2",
            "pid": None,
            "kind": "vm",
            "vm": "sockets=1,cores=2",
            "started": "booted",
        },
    ],
}


@FUZZ
@given(_swapped(LAB_STATE, JSON_NASTY, json.dumps))
@example(json.dumps(LAB_STATE).replace('"port": 2222, "sysroot"', '"port": 1' + "0" * 5000 + ', "sysroot"'))
@example(json.dumps(LAB_STATE).replace('"pid": 4194304', '"pid": 1e999'))
def test_a_lab_state_of_numbers_and_types_it_cannot_use_is_named(tmp_path_factory, text):
    from hostkit.lab.lab import Lab

    d = tmp_path_factory.mktemp("labstate")
    (d / "lab.json").write_text(text)
    before = tree_hash(d)
    lab = Lab(d)
    answers(lab.hosts)
    answers(lab.status)
    assert tree_hash(d) == before


PROFILE = {
    "name": "fuzzed",
    "extends": "bare-metal-inference",
    "reserve_per_node": 2,
    "irq_cores": 1,
    "isolcpus_flags": ["managed_irq"],
    "cmdline_extra": ["quiet"],
    "sysctl": {"kernel.sched_rt_runtime_us": 950000, "vm.stat_interval": 10},
    "smoke": {"target_p999_ms": 1.0, "transport": "shm"},
    "kubelet": {"reserved_memory_mib_per_node": 1024},
    "bios": {"numa_per_socket": 1, "min_memory_speed_mts": 4800},
}


@pytest.fixture(scope="module")
def epyc_facts(tmp_path_factory):
    from hostkit.facts import gather
    from hostkit.lab import fixtures

    return gather(str(fixtures.materialize("epyc-9634-nps1", tmp_path_factory.mktemp("epyc") / "root")))


@FUZZ
@given(_swapped(PROFILE, YAML_NASTY, _yaml))
@example(_yaml(PROFILE).replace("reserve_per_node: 2", "reserve_per_node: 1" + "0" * 5000))
@example(_yaml(PROFILE).replace("target_p999_ms: 1.0", "target_p999_ms: .nan"))
@example(_yaml(PROFILE).replace("target_p999_ms: 1.0", "target_p999_ms: 0x" + "f" * 300))
def test_a_profile_of_numbers_and_types_it_cannot_use_is_refused(tmp_path_factory, epyc_facts, text):
    from hostkit.plan import make_plan
    from hostkit.profiles import load_profile

    path = tmp_path_factory.mktemp("profile") / "p.yml"
    path.write_text(text)
    profile = answers(load_profile, str(path))
    if profile is not None:
        answers(make_plan, epyc_facts, profile)


INVENTORY = {
    "all": {
        "vars": {"ansible_user": "root", "hostkit_smoke_duration": 5},
        "children": {
            "lab": {
                "hosts": {
                    "p": {
                        "ansible_host": "127.0.0.1",
                        "ansible_port": 22,
                        "hostkit_sysroot": "/nonexistent/p",
                        "hostkit_profile": "bare-metal-inference",
                        "hostkit_overrides": {
                            "reserve_per_node": 2,
                            "isolated": "2-3",
                            "sysctl": {"kernel.sched_rt_runtime_us": 950000},
                            "smoke": {"target_p999_ms": 0.5},
                        },
                        "hostkit_pre_batch": ["echo {{ inventory_hostname }}"],
                    }
                }
            }
        },
    }
}


HOST_VARS = INVENTORY["all"]["children"]["lab"]["hosts"]["p"]


@FUZZ
@given(
    st.one_of(
        st.tuples(_swapped(INVENTORY, YAML_NASTY, _yaml), st.just(None)),
        st.tuples(st.just(None), _swapped(HOST_VARS, YAML_NASTY, _yaml)),
    )
)
@example((_yaml(INVENTORY).replace("ansible_port: 22", "ansible_port: 1" + "0" * 5000), None))
@example((None, _yaml(HOST_VARS).replace("ansible_port: 22", "ansible_port: 1" + "0" * 5000)))
@example((None, _yaml(HOST_VARS).replace("target_p999_ms: 0.5", "target_p999_ms: .inf")))
def test_an_inventory_of_numbers_and_types_it_cannot_use_is_refused(tmp_path_factory, texts):
    """The inventory itself, or the host's variables in group_vars/all.yml beside it (read by
    Ansible's own loader), then what hostkit takes from each host: profile, overrides, hooks, connection."""
    from hostkit.ansible.inventory import load_inventory
    from hostkit.ansible.settings import host_connection
    from hostkit.profiles import for_host
    from hostkit.rollout.hooks import render

    inventory, group_vars = texts
    d = tmp_path_factory.mktemp("inv")
    (d / "inventory.yml").write_text(inventory or "all:\n  hosts:\n    p:\n")
    if group_vars is not None:
        (d / "group_vars").mkdir()
        (d / "group_vars/all.yml").write_text(group_vars)
    hosts = answers(load_inventory, str(d / "inventory.yml"))
    for h in hosts or []:
        answers(for_host, h.name, h.vars)
        answers(render, h.name, h.vars)
        answers(host_connection, h.name, h.vars)


def _rollout_state(rid: str) -> dict:
    return {
        "version": 1,
        "rollout_id": rid,
        "status": "failed",
        "created": "2026-12-01T00:00:00Z",
        "updated": "2026-12-01T00:10:00Z",
        "request": {
            "inventory": "/nonexistent/inventory.yml",
            "batch": "1",
            "limit": None,
            "canary": 1,
            "max_failures": 0,
            "max_unavailable": None,
            "reboot": False,
            "reboot_timeout": 900,
            "target_p999_ms": 1.0,
            "smoke_duration": None,
            "profile": None,
            "force": False,
            "hook_timeout": 600.0,
        },
        "controller": {"host": "elsewhere", "pid": 4194304},
        "batches": [
            {
                "index": 0,
                "canary": True,
                "hosts": ["web1"],
                "status": "failed",
                "apply_runs": ["20261201T000000Z-aaaaaa"],
                "started": "2026-12-01T00:00:01Z",
                "finished": "2026-12-01T00:09:00Z",
            }
        ],
        "hosts": {
            "web1": {
                "batch": 0,
                "status": "rolled_back",
                "step": "rollback",
                "gate": {"gate": "smoke", "why": "MISSED: p999 3.0 ms vs target 1.0 ms"},
                "runs": ["20261201T000000Z-aaaaaa"],
                "apply_started": "2026-12-01T00:00:02Z",
                "out": False,
                "apply": {"run_id": "20261201T000000Z-aaaaaa", "status": "changed", "changed": 3},
                "audit": {"status": "passed", "counts": {"passed": 12}},
                "before": {"verdict": "MISSED", "p999_ms": 400.0, "target_p999_ms": 1.0, "why": "-", "samples": 20000},
                "after": {"verdict": "MISSED", "p999_ms": 3.0, "target_p999_ms": 1.0, "why": "-", "samples": 20000},
                "hooks": [],
                "rollback": {"runs": ["20261201T000000Z-aaaaaa"], "ok": True},
            }
        },
        "failed_hosts": 1,
        "failure": {"batch": 0, "host": "web1", "gate": "smoke", "why": "MISSED"},
        "events": [],
    }


RID = "20261201T000000Z-fuzzed"


@FUZZ
@given(_swapped(_rollout_state(RID), JSON_NASTY, json.dumps))
@example(json.dumps(_rollout_state(RID)).replace('"batch": 0, "status"', '"batch": 1' + "0" * 5000 + ', "status"'))
@example(json.dumps(_rollout_state(RID)).replace('"p999_ms": 3.0', '"p999_ms": "3 ms"'))
def test_a_rollout_state_of_numbers_and_types_it_cannot_use_is_refused(text):
    """The state file as ``rollout --resume``/``--abort`` read it, and the report written from it."""
    from hostkit.rollout import report, state

    path = state.run_dir(RID) / state.STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    loaded = answers(state.load, RID)
    if loaded is not None:
        answers(report.markdown, loaded)


@FUZZ
@given(NAMES)
@example("a" * 300)
@example("/".join(["b" * 200] * 25))
@example("p\x00.yml")
def test_names_no_file_system_holds_are_bad_input(tmp_path, monkeypatch, name):
    """As a profile, a smoke result, an inventory, a lab directory, a rollout id and an output file:
    one line, exit 2, nothing written."""
    from hostkit.ansible.inventory import load_inventory
    from hostkit.lab.lab import Lab
    from hostkit.profiles import load_profile
    from hostkit.rollout import state
    from hostkit.smoke.migration import load_results

    monkeypatch.chdir(tmp_path)
    before = tree_hash(tmp_path)
    assert answers(load_profile, name) is None
    assert answers(load_results, name) is None
    assert answers(load_inventory, name) is None
    assert answers(lambda: Lab(name).hosts()) is None
    assert answers(state.load, name) is None
    (tmp_path / "ok.json").write_text(json.dumps(SMOKE_RESULT))
    rc, err = cli("migrate", "report", "ok.json", "ok.json", "--md", name)
    assert_answered(rc, err, codes=())
    rc, err = cli("plan", "--sysroot", "/", "--profile", name)
    assert_answered(rc, err, codes=())
    (tmp_path / "ok.json").unlink()
    assert tree_hash(tmp_path) == before
