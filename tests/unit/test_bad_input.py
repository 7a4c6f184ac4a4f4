"""Bad input the controller decides: every case a one-line error naming the input, exit 2, no byte
changed on the host's tree, and no host ever contacted (no Ansible run started). No sshd needed.

The inventory's hosts point at a loopback port nobody listens on and at fixture copies: a command
that contacted a host by mistake would report it unreachable (exit 1) and leave a run directory,
so these cases also prove that the refusal comes before any SSH. Cases that need a host's facts
(a CPU that is not online there, a missing or read-only sysroot on the host) stay in
test_bad_input_corpus.py on the lab.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
import yaml

from hostkit.cli import main
from hostkit.errors import BadInput
from hostkit.facts import gather
from hostkit.lab import fixtures
from hostkit.paths import state_dir
from hostkit.plan import make_plan
from hostkit.profiles import apply_overrides, load_profile
from tests.treehash import tree_hash

# (id, host variables for host "p" or None, extra CLI args, needles that the one error line names)
OVERRIDE_CASES = [
    ("isolated-backwards", {"hostkit_overrides": {"isolated": "3-1"}}, [], ["'3-1'"]),
    ("isolated-open-range", {"hostkit_overrides": {"isolated": "0-"}}, [], ["'0-'"]),
    ("isolated-letters", {"hostkit_overrides": {"isolated": "a"}}, [], ["'a'"]),
    ("isolated-shell", {"hostkit_overrides": {"isolated": "0-3; rm -rf /"}}, [], ["rm -rf"]),
    ("housekeeping-shell", {"hostkit_overrides": {"housekeeping": "$(reboot)"}}, [], ["$(reboot)"]),
    ("irq-cpus-shell", {"hostkit_overrides": {"irq_cpus": "0`id`"}}, [], ["`id`"]),
    ("reserve-zero", {"hostkit_overrides": {"reserve_per_node": 0}}, [], ["reserve_per_node"]),
    (
        "rt-negative",
        {"hostkit_overrides": {"sysctl": {"kernel.sched_rt_runtime_us": -5}}},
        [],
        ["kernel.sched_rt_runtime_us"],
    ),
    (
        "rt-absurd",
        {"hostkit_overrides": {"sysctl": {"kernel.sched_rt_runtime_us": 10**12}}},
        [],
        ["kernel.sched_rt_runtime_us"],
    ),
    (
        "rt-string",
        {"hostkit_overrides": {"sysctl": {"kernel.sched_rt_runtime_us": "lots"}}},
        [],
        ["must be an integer"],
    ),
    ("governor-unknown", {"hostkit_overrides": {"governor": "turbo"}}, [], ["governor"]),
    ("unknown-override-key", {"hostkit_overrides": {"isolcpu": "8-63"}}, [], ["unknown key 'isolcpu'"]),
    ("wrong-type-bool", {"hostkit_overrides": {"isolation": "yes"}}, [], ["isolation"]),
    ("overrides-not-mapping", {"hostkit_overrides": ["isolated", "8-63"]}, [], ["must be a mapping"]),
    ("kernel-arg-metachar", {"hostkit_overrides": {"cmdline_extra": ["quiet; reboot"]}}, [], ["quiet; reboot"]),
    ("unknown-profile-var", {"hostkit_profile": "no-such-profile"}, [], ["no-such-profile"]),
    ("unknown-profile-cli", None, ["--profile", "bare-metal-inferense"], ["unknown profile", "bare-metal-inferense"]),
    ("unknown-tag", None, ["--tags", "isolcpus,grub"], ["unknown role", "grub"]),
    ("revert-without-verify", None, ["--revert-on-fail"], ["--verify-smoke"]),
    ("limit-matches-nothing", None, ["--limit", "nobody"], ["nobody"]),
    ("bad-forks-type", None, ["--forks", "many"], ["many"]),
]

INVENTORY_CASES = [
    ("yaml-syntax", "all:\n  hosts: [unclosed\n", "not valid YAML"),
    ("not-a-mapping", "- just\n- a list\n", "must be a YAML mapping"),
    ("no-hosts", "all:\n  vars: {a: 1}\n", "has no hosts"),
]


@pytest.fixture(scope="module")
def closed_port():
    """A loopback port bound but never listening: a connection to it is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


@pytest.fixture
def offline(tmp_path, closed_port):
    """An inventory whose one host p (a small KVM guest's tree, copied) is unreachable."""
    root = fixtures.materialize("kvm-small", tmp_path / "p")

    def inventory(host_vars: dict | None = None):
        host = {
            "ansible_host": "127.0.0.1",
            "ansible_port": closed_port,
            "hostkit_sysroot": str(root),
            **(host_vars or {}),
        }
        path = tmp_path / "inventory.yml"
        path.write_text(
            yaml.safe_dump({"all": {"vars": {"ansible_user": "root"}, "children": {"lab": {"hosts": {"p": host}}}}})
        )
        return path

    inventory.tree = lambda: tree_hash(root)
    return inventory


def hostkit(capsys, *args) -> tuple[int, str, str]:
    """The CLI in-process (argparse errors exit through SystemExit, as from the shell)."""
    capsys.readouterr()
    try:
        rc = main([str(a) for a in args])
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc, err, needles, code=2):
    assert rc == code, (rc, err[-1500:])
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("hostkit: error:")]
    assert len(errors) == 1, err[-1500:]
    for needle in needles:
        assert needle in errors[0], errors[0]


def no_host_contacted():
    runs = state_dir() / "runs"
    return not runs.exists() or not any(runs.iterdir())


@pytest.mark.parametrize("case", OVERRIDE_CASES, ids=[c[0] for c in OVERRIDE_CASES])
def test_apply_refuses_bad_input_before_contacting_a_host(offline, capsys, case):
    name, host_vars, extra, needles = case
    inv = offline(host_vars)
    before = offline.tree()
    limit = [] if "--limit" in extra else ["--limit", "p"]
    rc, _, err = hostkit(capsys, "apply", "-i", inv, *limit, *extra)
    assert_one_line_error(rc, err, needles)
    assert no_host_contacted()
    assert offline.tree() == before


@pytest.mark.parametrize("command", ["apply", "plan", "audit", "rollback"])
@pytest.mark.parametrize("case", INVENTORY_CASES, ids=[c[0] for c in INVENTORY_CASES])
def test_malformed_inventory_is_bad_input(tmp_path, capsys, case, command):
    name, text, needle = case
    inv = tmp_path / "inv.yml"
    inv.write_text(text)
    rc, _, err = hostkit(capsys, command, "-i", inv)
    assert_one_line_error(rc, err, [needle])
    assert no_host_contacted()


@pytest.mark.parametrize("command", ["apply", "plan", "audit", "rollback"])
def test_missing_inventory_file_is_bad_input(tmp_path, capsys, command):
    rc, _, err = hostkit(capsys, command, "-i", tmp_path / "nowhere.yml")
    assert_one_line_error(rc, err, ["nowhere.yml", "does not exist"])


@pytest.mark.parametrize(
    "make_root,needles",
    [
        (lambda tmp: tmp / "nope", ["nope", "does not exist"]),
        (lambda tmp: tmp, ["sys/devices/system/cpu"]),  # a directory, but not a Linux root
    ],
    ids=["missing", "not-linux"],
)
def test_plan_on_a_bad_local_sysroot_is_bad_input(tmp_path, capsys, make_root, needles):
    root = make_root(tmp_path)
    rc, _, err = hostkit(capsys, "plan", "--sysroot", root)
    assert_one_line_error(rc, err, needles)


def _plan_epyc(sysroots, overrides):
    profile, pinned = apply_overrides(load_profile("bare-metal-inference"), overrides)
    return make_plan(gather(str(sysroots["epyc-9634-nps1"])), profile, pinned, host="p")


def test_reserving_every_core_of_a_node_is_bad_input(sysroots):
    # 60 housekeeping + 30 IRQ cores on a node of 84 cores: nothing left to isolate there.
    with pytest.raises(BadInput, match="leaves no isolated core"):
        _plan_epyc(sysroots, {"reserve_per_node": 60, "irq_cores": 30})


def test_pinning_every_cpu_as_housekeeping_is_refused(sysroots):
    plan = _plan_epyc(sysroots, {"housekeeping": "0-167"})
    assert plan["refused"] == ["nothing would be isolated: the plan would change the boot config for no benefit"]


def test_the_installed_entry_point_prints_the_same_one_line_error(offline):
    """The in-process cases above, once through `python -m hostkit.cli` as an operator runs it."""
    inv = offline({"hostkit_overrides": {"isolated": "3-1"}})
    before = offline.tree()
    proc = subprocess.run(
        [sys.executable, "-m", "hostkit.cli", "apply", "-i", str(inv), "--limit", "p"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_line_error(proc.returncode, proc.stderr, ["'3-1'"])
    assert no_host_contacted()
    assert offline.tree() == before


# ----------------------------------------------------------------------------- numbers, types, names

SMOKE_RESULT = (
    '{"deschedule_ms": {"p50": 0.01, "p99": 0.1, "p999": 1.0, "max": 2.0}, "queue_wait_ms": {"p99": 0.2}, '
    '"rpc_ms": {"p50": 0.01, "p99": 0.05}, "throughput_rps": 1000.0, "samples": 20000, "slow_infer": {"count": 0}, '
    '"sched_fifo": {"used": true, "available": true}, "transport": "shm", '
    '"slo": {"p999_ms": 1.0, "target_p999_ms": 1.0, "passed": true}, "diagnosis": []}'
)
# (id, the "after" smoke result, needles of the one error line)
MIGRATE_CASES = [
    ("int-5000-digits", SMOKE_RESULT.replace('"samples": 20000', '"samples": 1' + "0" * 5000), ["out of range"]),
    ("beyond-float", SMOKE_RESULT.replace('"throughput_rps": 1000.0', '"throughput_rps": 1' + "0" * 400), ["range"]),
    ("1e999", SMOKE_RESULT.replace('"p99": 0.1', '"p99": 1e999'), ["not a finite number"]),
    ("nan", SMOKE_RESULT.replace('"p99": 0.1', '"p99": NaN'), ["NaN is not a finite number"]),
    ("passed-missing", SMOKE_RESULT.replace('"passed": true', '"verdict": "PASSED"'), ["slo.passed is missing"]),
    ("passed-wrong-type", SMOKE_RESULT.replace('"passed": true', '"passed": "yes"'), ["slo.passed must be"]),
    ("samples-negative", SMOKE_RESULT.replace('"samples": 20000', '"samples": -5'), ["samples must be a count"]),
]


@pytest.mark.parametrize("case", MIGRATE_CASES, ids=[c[0] for c in MIGRATE_CASES])
def test_migrate_report_of_numbers_and_types_it_cannot_use_is_bad_input(tmp_path, capsys, case):
    name, after, needles = case
    (tmp_path / "vm.json").write_text(SMOKE_RESULT)
    (tmp_path / "bm.json").write_text(after)
    rc, _, err = hostkit(
        capsys, "migrate", "report", tmp_path / "vm.json", tmp_path / "bm.json", "--md", tmp_path / "m.md"
    )
    assert_one_line_error(rc, err, ["bm.json", *needles])
    assert not (tmp_path / "m.md").exists()


LONG = "a" * 300  # NAME_MAX is 255 bytes


@pytest.mark.parametrize(
    "args, needles",
    [
        (["plan", "--sysroot", "/", "--profile", LONG], ["profile", "a name of 300 bytes"]),
        (["plan", "--sysroot", "/", "--profile", "/".join(["b" * 200] * 25)], ["a path of 5024 bytes"]),
        (["plan", "-i", LONG + ".yml"], ["inventory", "a name of 304 bytes"]),
        (["migrate", "report", LONG + ".json", "x.json"], ["a name of 305 bytes"]),
        (["lab", "status", "--dir", LONG], ["lab directory"]),
        (["rollout", "--resume", LONG], ["rollout id"]),
    ],
    ids=["profile", "profile-path", "inventory", "smoke-result", "lab-dir", "rollout-id"],
)
def test_names_no_file_system_holds_are_bad_input(tmp_path, capsys, monkeypatch, args, needles):
    monkeypatch.chdir(tmp_path)
    rc, _, err = hostkit(capsys, *args)
    assert_one_line_error(rc, err, [*needles, "longer than the file system allows"])


def test_an_output_file_name_no_file_system_holds_is_bad_input_before_anything_is_written(tmp_path, capsys):
    (tmp_path / "r.json").write_text(SMOKE_RESULT)
    r = tmp_path / "r.json"
    rc, _, err = hostkit(
        capsys, "migrate", "report", r, r, "--md", tmp_path / "m.md", "--plot", tmp_path / (LONG + ".png")
    )
    assert_one_line_error(rc, err, ["--plot", "longer than the file system allows"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


@pytest.mark.parametrize(
    "group_vars, needles",
    [
        ("ansible_port: 1" + "0" * 5000 + "\n", ["could not be read", "4300 digits"]),
        ("ansible_ssh_port: 99999999999\n", ["ansible_ssh_port must be a port number"]),
        ("hostkit_overrides: {smoke: {target_p999_ms: .inf}}\n", ["target_p999_ms: inf is not a finite number"]),
        ("hostkit_profile: 42\n", ["hostkit_profile must be a string"]),
    ],
    ids=["int-5000-digits", "port-out-of-range", "inf", "profile-wrong-type"],
)
def test_inventory_variables_of_numbers_and_types_hostkit_cannot_use_are_bad_input(
    offline, capsys, group_vars, needles
):
    inv = offline()
    (inv.parent / "group_vars").mkdir()
    (inv.parent / "group_vars/all.yml").write_text(group_vars)
    before = offline.tree()
    rc, _, err = hostkit(capsys, "apply", "-i", inv, "--limit", "p")
    assert_one_line_error(rc, err, needles)
    assert no_host_contacted()
    assert offline.tree() == before
