"""hostkit's whole job from plain Ansible: the collection's playbook ``hostkit.tuning.rollout`` on four
sshd lab hosts, from a controller with no ``hostkit`` command (only ``ansible-playbook``,
``ansible-navigator`` and the collection ``hostkit collection install`` put in its own path).

Real Ansible over real SSH; every claim is read back from the hosts: their journals (which runs,
when), their trees hashed before and after (byte-exact rollbacks, untouched hosts), and an audit
over SSH (testinfra) of the live state. Two of the hosts through ``hostkit rollout`` get the same
journaled changes and verdicts. ansible-navigator (``--ee false``: it runs ansible-playbook)
drives the missed-gate rollout. The rules below the playbook (plan refusals, the smoke gate, the
rollback verdict) are tests/unit/test_collection_actions.py's.

Each test runs as few applies as its claim needs (#23's budget): the happy path tunes the fleet
once by the playbook and two hosts by the CLI, the missed gate one batch, the failing pre-batch
task none.

The collection's molecule scenarios (``extensions/molecule/``: converge, idempotence, verify by the
audit module, cleanup by the rollback module) run the same way, on one of the hosts.

The hosts are the 8-CPU Debian fixture; the bare-metal profile isolates CPUs, so every apply
changes kernel arguments and ``hostkit_reboot`` lets the lab's simulated reboot boot them. Smoke runs
are 2 s: INCONCLUSIVE (too few samples), which does not gate.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hostkit.api import AuditRequest, audit
from tests.conftest import lab_port
from tests.labutil import cli, sysroot, trees

HOSTS = ["c1", "c2", "c3", "c4"]
BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
ROLLOUT = ["-e", "hostkit_batch=2", "-e", "hostkit_smoke_duration=2", "-e", "hostkit_reboot=true"]
HOOKS = """\
- name: Record the {kind}-batch call; fail it while fail-{kind}-<host> exists (a drain that cannot finish)
  ansible.builtin.shell: >-
    echo "{kind} {{{{ inventory_hostname }}}}" >> {dir}/calls.log &&
    test ! -e {dir}/fail-{kind}-{{{{ inventory_hostname }}}}
  delegate_to: localhost
  changed_when: false
"""


@pytest.fixture(scope="module")
def lab(make_lab):
    """The four hosts, and a VMware guest (``v1``) the inventory holds only when a test asks for it."""
    return make_lab([(h, "boot-debian12") for h in HOSTS] + [("v1", "vmware-88vcpu")], lab_port(10))


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    """An Ansible controller without the hostkit command: the collection installed by `hostkit
    collection install -p`, a PATH of ansible-playbook and ansible-navigator (whose Python has the
    hostkit package, as an execution environment would), a working directory of its own."""
    root = tmp_path_factory.mktemp("controller")
    proc = cli("collection", "install", "-p", root / "collections")
    assert proc.returncode == 0, proc.stderr
    bindir = root / "bin"
    bindir.mkdir()
    for tool in [p.name for p in BIN.glob("ansible*")] + ["molecule"]:  # ansible-playbook, -navigator, -config ...
        (bindir / tool).symlink_to(BIN / tool)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "HOSTKIT_"))}
    env.update(
        PATH=f"{bindir}:/usr/bin:/bin",
        HOME=str(root),
        ANSIBLE_COLLECTIONS_PATH=str(root / "collections"),
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_NOCOLOR="1",
    )
    assert shutil.which("hostkit", path=env["PATH"]) is None
    return root, env


@pytest.fixture
def fleet(lab, tmp_path):
    """The lab inventory with recording pre/post-batch tasks and per-host variables (``hostvars``);
    after the test every host is rolled back (``hostkit rollback --all``) and byte-exact again."""
    before = trees(lab)
    for h in HOSTS + ["v1"]:
        d = sysroot(lab, h) / "var/lib/hostkit/journal"
        EARLIER[h] = {p.name.split(".")[0] for p in d.glob("*.json")} if d.is_dir() else set()
    for kind in ("pre", "post"):
        (tmp_path / f"{kind}.yml").write_text(HOOKS.format(kind=kind, dir=tmp_path))

    def inventory(hostvars: dict[str, dict] | None = None, with_vm: bool = False) -> Path:
        inv = yaml.safe_load(lab.inventory.read_text())
        if not with_vm:
            del inv["all"]["children"]["lab"]["hosts"]["v1"]
        inv["all"]["vars"]["hostkit_pre_batch_tasks"] = str(tmp_path / "pre.yml")
        inv["all"]["vars"]["hostkit_post_batch_tasks"] = str(tmp_path / "post.yml")
        for h, v in inv["all"]["children"]["lab"]["hosts"].items():
            # A target the 2 s runs cannot miss on this loaded machine (the profile's would), for
            # both faces: the profile value, as hostkit rollout reads it too.
            v["hostkit_overrides"] = {"smoke": {"target_p999_ms": 1000.0}}
            v.update((hostvars or {}).get(h, {}))
        path = tmp_path / "inventory.yml"
        path.write_text(yaml.safe_dump(inv, sort_keys=False))
        return path

    inventory.before = before
    inventory.dir = tmp_path

    def calls() -> list[list[str]]:
        """The hooks' calls, grouped by step (the hosts of a batch run a step at once, in either order)."""
        log = tmp_path / "calls.log"
        groups: list[list[str]] = []
        for line in log.read_text().splitlines() if log.exists() else []:
            kind = line.split()[0]
            if groups and groups[-1][0].split()[0] == kind and len(groups[-1]) < 2:
                groups[-1] = sorted(groups[-1] + [line])
            else:
                groups.append([line])
        return groups

    inventory.calls = calls
    yield inventory
    out = ""
    if any(journals(lab, h) for h in HOSTS + ["v1"]):  # runs of this test not rolled back yet
        proc = cli("rollback", "-i", lab.inventory, "--all")
        out = proc.stdout[-2000:] + proc.stderr[-2000:]
    changed = [h for h, t in trees(lab).items() if t != before[h]]
    assert not changed, f"not rolled back byte-exact: {changed}\n{out}"


def ansible(controller, *args, tool: str = "ansible-playbook", timeout: int = 900) -> subprocess.CompletedProcess:
    root, env = controller
    return subprocess.run([tool, *map(str, args)], cwd=root, env=env, capture_output=True, text=True, timeout=timeout)


# Per host, the runs its journal held when the test began (earlier tests of the module, rolled back).
EARLIER: dict[str, set[str]] = {}


def journals(lab, host: str, rolled_back: bool = False) -> list[dict]:
    """The runs of this test in the host's journal that are not rolled back (``rolled_back``: those that are)."""
    d = sysroot(lab, host) / "var/lib/hostkit/journal"
    runs = [p for p in sorted(d.glob("*.json")) if not p.name.endswith(".rollback.json")] if d.is_dir() else []
    return [
        json.loads(p.read_text())
        for p in runs
        if p.stem not in EARLIER.get(host, ()) and p.with_suffix(".rollback.json").exists() is rolled_back
    ]


def journal_times(lab, host: str, rolled_back: bool = False) -> tuple[str, str]:
    (run,) = journals(lab, host, rolled_back)
    times = [e["time"] for e in run["entries"]]
    return min(times), max(times)


def changes(lab, hosts: list[str] = HOSTS) -> dict[str, list[tuple[str, str, str]]]:
    """Per host, what its one journaled run changed: (role, kind, path) in journal order."""
    out = {}
    for h in hosts:
        (run,) = journals(lab, h)
        out[h] = [(e["role"], e["kind"], e.get("path") or "") for e in run["entries"]]
    return out


def gate_lines(stdout: str) -> dict[str, str]:
    """Per host, the tune role's "gates passed" line."""
    return dict(re.findall(r'ok: \[(\w+)\] => \{\s*"msg": "(gates passed: [^"]*)"', stdout))


def assert_batches_in_order(lab, batches: list[list[str]]) -> None:
    for earlier, later in zip(batches, batches[1:]):
        assert max(journal_times(lab, h)[1] for h in earlier) < min(journal_times(lab, h)[0] for h in later)


def assert_live_audit_passes(lab, inventory: Path) -> None:
    res = audit(AuditRequest(inventory=str(inventory), strict=True))
    assert {h: r["status"] for h, r in res.hosts.items()} == dict.fromkeys(HOSTS, "pass"), res.hosts


def test_the_rollout_playbook_tunes_every_host_once_in_order_and_matches_hostkit_rollout(lab, controller, fleet):
    """The playbook over four hosts in two batches; then, rolled back by the collection's module,
    hostkit rollout over two of them: the same journaled changes and verdicts."""
    inv = fleet()
    proc = ansible(controller, "-i", inv, "hostkit.tuning.rollout", *ROLLOUT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    batches = [["c1", "c2"], ["c3", "c4"]]
    assert_batches_in_order(lab, batches)
    assert [len(journals(lab, h)) for h in HOSTS] == [1, 1, 1, 1]
    assert_live_audit_passes(lab, inv)
    gates = gate_lines(proc.stdout)
    assert sorted(gates) == HOSTS and all(
        "audit pass, smoke INCONCLUSIVE" in g and "(before: INCONCLUSIVE" in g for g in gates.values()
    ), gates
    assert fleet.calls() == [["pre c1", "pre c2"], ["post c1", "post c2"], ["pre c3", "pre c4"], ["post c3", "post c4"]]
    by_playbook = changes(lab)

    # And through hostkit rollout, after a rollback by the collection's own module: the same
    # journals and verdicts. One batch of the first two hosts: the batch order is the playbook's
    # claim above (and the CLI's in tests/lab/test_rollout.py), the rules are the same per host.
    back = ansible(controller, "-i", inv, "all", "-m", "hostkit.tuning.rollback", tool="ansible")
    assert back.returncode == 0, back.stdout[-3000:]
    assert trees(lab) == fleet.before
    inv_cli = yaml.safe_load(inv.read_text())
    for var in ("hostkit_pre_batch_tasks", "hostkit_post_batch_tasks"):
        inv_cli["all"]["vars"].pop(var)
    (fleet.dir / "cli.yml").write_text(yaml.safe_dump(inv_cli))
    pair = HOSTS[:2]
    proc = cli(
        "rollout",
        "-i",
        fleet.dir / "cli.yml",
        "--limit",
        ",".join(pair),
        "--batch",
        "2",
        "--reboot",
        "--smoke-duration",
        "2",
        "--json",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    state = json.loads(proc.stdout)
    assert [b["hosts"] for b in state["batches"]] == [pair]
    assert {h: (r["before"]["verdict"], r["after"]["verdict"]) for h, r in state["hosts"].items()} == dict.fromkeys(
        pair, ("INCONCLUSIVE", "INCONCLUSIVE")
    )
    assert {h: changes(lab, [h])[h] for h in pair} == {h: by_playbook[h] for h in pair}
    assert all(journals(lab, h) == [] for h in HOSTS[2:])  # the rest stays as the rollback left it


def test_missed_smoke_gates_within_and_past_max_failures_through_navigator(lab, controller, fleet):
    """Through ansible-navigator (no execution environment here: ``--ee false``), which runs the
    same playbook as ansible-playbook, with hostkit rollout's rule for failed hosts
    (``hostkit_max_failures`` 1): in the first batch c2 misses its gate and is rolled back alone in
    the playbook's ``rescue:`` (tolerated: c1 stays tuned, the rollout goes on); in the second c4
    misses too, one failure past the limit: the rollout stops and its batch is rolled back, c3
    (which passed) included. Every host back in service ran its post-batch tasks."""
    miss = {"hostkit_target_p999_ms": 0.0001}
    inv = fleet({"c2": miss, "c4": miss})
    proc = ansible(
        controller,
        "run",
        "hostkit.tuning.rollout",
        "-i",
        inv,
        "--ee",
        "false",
        "-m",
        "stdout",
        "--pae",
        "false",
        "--lf",
        controller[0] / "navigator.log",
        *ROLLOUT,
        "-e",
        "hostkit_max_failures=1",
        tool="ansible-navigator",
    )
    assert proc.returncode != 0
    out = proc.stdout
    assert re.search(
        r'ok: \[c2\] => \{\s*"msg": "Smoke gate: MISSED: p999 .* vs target 0.0001 ms.* - rolled back; '
        r"failed hosts 1, tolerated up to hostkit_max_failures 1: the rollout goes on",
        out,
    ), out[-4000:]
    assert re.search(
        r'fatal: \[c4\]: FAILED! => .*Smoke gate: MISSED: p999 .* vs target 0.0001 ms.* - rolled back"', out
    ), out[-4000:]
    assert re.search(
        r"fatal: \[c3\]: FAILED! => .*rolled back: the rollout stopped after 2 failed host\(s\) "
        r"\(c2, c4; hostkit_max_failures 1\)",
        out,
    ), out[-4000:]
    assert "tolerated: hostkit_max_failures" not in out  # a stopped rollout ends before the closing play
    now = trees(lab)
    assert now["c1"] != fleet.before["c1"] and len(journals(lab, "c1")) == 1  # passed within the limit: stays tuned
    for h in ("c2", "c3", "c4"):  # rolled back byte for byte
        assert now[h] == fleet.before[h], h
        assert len(journals(lab, h, rolled_back=True)) == 1 and not journals(lab, h), h
    assert journal_times(lab, "c1")[1] < journal_times(lab, "c3", rolled_back=True)[0]  # the batches in order
    assert fleet.calls() == [["pre c1", "pre c2"], ["post c1", "post c2"], ["pre c3", "pre c4"], ["post c3", "post c4"]]
    gates = gate_lines(out)
    assert sorted(gates) == ["c1", "c3"] and "smoke INCONCLUSIVE" in gates["c1"], gates


def test_a_failing_pre_batch_task_changes_nothing_on_its_batch(lab, controller, fleet):
    """The first batch's pre-batch task fails on c1 (the canary batch: no host is tuned first, so
    the test needs no apply): nothing changes on c1 or c2, the rollout stops before c3 and c4."""
    inv = fleet()
    (fleet.dir / "fail-pre-c1").touch()
    proc = ansible(
        controller,
        "-i",
        inv,
        "hostkit.tuning.rollout",
        "-e",
        "hostkit_batch=2",
        "-e",
        "hostkit_reboot=true",
        "-e",
        "hostkit_smoke_gate=false",
    )
    assert proc.returncode != 0
    assert trees(lab) == fleet.before and not any(journals(lab, h) for h in HOSTS)
    # c2 was drained before c1's failure stopped the batch: it is back in service; c1 never left it
    assert fleet.calls() == [["pre c1", "pre c2"], ["post c2"]]
    assert re.search(r"fatal: \[c1\]: FAILED! => .*Record the pre-batch call", proc.stdout)
    assert re.search(
        r"fatal: \[c2\]: FAILED! => .*batch stopped: a pre-batch task failed on another host", proc.stdout
    ), proc.stdout[-3000:]


@pytest.mark.parametrize(
    "bad, why",
    [
        ({"hostkit_profile": "no-such-profile"}, "unknown profile 'no-such-profile'"),
        ({"hostkit_overrides": {"isolation": "sometimes"}}, "c2: hostkit_overrides"),
    ],
)
def test_bad_input_fails_its_host_with_one_line_and_leaves_the_batch_untouched(lab, controller, fleet, bad, why):
    inv = fleet({"c2": bad})
    proc = ansible(
        controller, "-i", inv, "hostkit.tuning.rollout", "-e", "hostkit_batch=4", "-e", "hostkit_reboot=true"
    )
    assert proc.returncode != 0
    (line,) = re.findall(r"fatal: \[c2\]: FAILED! => (.*)", proc.stdout)
    assert why in json.loads(line)["msg"] and "\\n" not in json.loads(line)["msg"]
    assert trees(lab) == fleet.before and not any(journals(lab, h) for h in HOSTS)
    assert fleet.calls() == []  # stopped before the pre-batch tasks


def test_a_plan_refused_on_a_vm_fails_that_host_alone_with_its_reason(lab, controller, fleet):
    inv = fleet(with_vm=True)
    proc = ansible(
        controller, "-i", inv, "hostkit.tuning.rollout", "-e", "hostkit_batch=5", "-e", "hostkit_reboot=true"
    )
    assert proc.returncode != 0
    (line,) = re.findall(r"fatal: \[(\w+)\]: FAILED! => (.*)", proc.stdout)
    assert line[0] == "v1" and json.loads(line[1])["msg"].startswith(
        "refused: isolation asked on a host with deceptive topology"
    )
    assert trees(lab) == fleet.before and not any(journals(lab, h) for h in HOSTS + ["v1"])
    assert fleet.calls() == []


@pytest.mark.parametrize("scenario", ["isolcpus", "irq_affinity"])
def test_the_collections_molecule_scenario_passes_on_a_lab_host(lab, controller, fleet, scenario):
    """``molecule test`` from the collection's source tree (molecule's collection mode needs its
    galaxy.yml, which an installed collection does not keep), on c1:
    converge, idempotence (a second converge changes nothing), verify (the audit module: every check
    of the role passes on the live host), cleanup (the rollback module). Its verify fails on the host
    before a converge, so it proves something."""
    root, env = controller
    source = root / "source"
    if not source.exists():
        subprocess.run(
            [sys.executable, REPO / "scripts" / "build_collection.py", source], check=True, capture_output=True
        )
    coll = source / "ansible_collections" / "hostkit" / "tuning"
    env = dict(
        env,
        MOLECULE_HOSTKIT_INVENTORY=str(fleet()),
        MOLECULE_HOSTKIT_LIMIT="c1",
        NO_COLOR="1",
        ANSIBLE_COLLECTIONS_PATH=str(source),
    )

    def molecule(*args):
        return subprocess.run(
            ["molecule", *args, "-s", scenario], cwd=coll, env=env, capture_output=True, text=True, timeout=600
        )

    untouched = molecule("verify")
    assert untouched.returncode != 0 and "not as planned" in untouched.stdout + untouched.stderr
    proc = molecule("test")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    for step in ("syntax", "converge", "idempotence", "verify", "cleanup"):
        assert re.search(rf"{step}\S*: Executed: Successful", out), step
    assert trees(lab)["c1"] == fleet.before["c1"]
    assert [r["run_id"] for r in journals(lab, "c1", rolled_back=True)] == [f"molecule-{scenario}"]
