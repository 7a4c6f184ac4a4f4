"""hostkit rollout without sshd: batch computation, hooks (real /bin/sh commands), the state file,
and the bad input decided on the controller (exit 2, one line, no host contacted, no byte changed)."""

from __future__ import annotations

import json
import os
import time

import pytest
import yaml

from hostkit.errors import BadInput
from hostkit.rollout import hooks, state
from hostkit.rollout.batches import batch_size, next_wave, plan_batches
from tests.unit.test_bad_input import assert_one_line_error, closed_port, hostkit, no_host_contacted  # noqa: F401

H = [f"h{i}" for i in range(1, 11)]


# ----------------------------------------------------------------------------- batches


@pytest.mark.parametrize(
    "spec, canary, expected",
    [
        ("2", 0, [["h1", "h2"], ["h3", "h4"], ["h5"]]),
        ("2", 1, [["h1"], ["h2", "h3"], ["h4", "h5"]]),
        ("1", 2, [["h1", "h2"], ["h3"], ["h4"], ["h5"]]),
        ("5", 0, [["h1", "h2", "h3", "h4", "h5"]]),
        ("40%", 0, [["h1", "h2"], ["h3", "h4"], ["h5"]]),  # 40% of 5 = 2
        ("30%", 1, [["h1"], ["h2", "h3"], ["h4", "h5"]]),  # 30% of 5 = 1.5: rounded up to 2
        ("1%", 0, [["h1"], ["h2"], ["h3"], ["h4"], ["h5"]]),  # at least one host
        ("100%", 4, [["h1", "h2", "h3", "h4"], ["h5"]]),
    ],
)
def test_batches_canaries_first_then_n_or_percent_in_inventory_order(spec, canary, expected):
    assert plan_batches(H[:5], spec, canary) == expected


def test_a_single_host_may_be_its_own_canary():
    assert plan_batches(["only"], "1", 1) == [["only"]]


def test_percent_is_of_the_whole_fleet_canaries_included():
    assert batch_size("25%", 10) == 3  # 2.5 rounded up
    assert plan_batches(H, "25%", 1) == [["h1"], ["h2", "h3", "h4"], ["h5", "h6", "h7"], ["h8", "h9", "h10"]]


@pytest.mark.parametrize(
    "spec, canary, needle",
    [
        ("0", 0, "at least one host"),
        ("6", 0, "larger than the fleet"),
        ("0%", 0, "1-100%"),
        ("101%", 0, "1-100%"),
        ("-1", 0, "N (hosts) or P%"),
        ("two", 0, "N (hosts) or P%"),
        ("2.5", 0, "N (hosts) or P%"),
        ("", 0, "N (hosts) or P%"),
        ("2", 5, "leaves no host"),
        ("2", 7, "leaves no host"),
        ("2", -1, "0 or more"),
    ],
)
def test_bad_batches_are_bad_input(spec, canary, needle):
    with pytest.raises(BadInput, match=needle.replace("(", r"\(").replace(")", r"\)")):
        plan_batches(H[:5], spec, canary)


def test_a_host_listed_twice_is_bad_input():
    with pytest.raises(BadInput, match="twice"):
        plan_batches(["a", "b", "a"], "1")


@pytest.mark.parametrize(
    "hosts, m, out, expected",
    [
        (["a", "b", "c"], None, 0, ["a", "b", "c"]),  # no --max-unavailable: the whole batch
        (["a", "b", "c"], 2, 0, ["a", "b"]),
        (["c"], 2, 0, ["c"]),
        (["a", "b", "c"], 5, 0, ["a", "b", "c"]),
        (["a", "b", "c"], 2, 1, ["a"]),  # a host left drained counts against the budget
        (["a", "b", "c"], 2, 2, []),  # no room: the rollout stops
    ],
)
def test_waves_never_take_more_than_max_unavailable_hosts_out(hosts, m, out, expected):
    assert next_wave(hosts, m, out) == expected


# ----------------------------------------------------------------------------- hooks


def test_hooks_render_the_host_name_and_its_variables_and_accept_a_list():
    out = hooks.render(
        "node-1",
        {
            "hostkit_pre_batch": "kubectl drain {{ inventory_hostname }} --ignore-daemonsets",
            "hostkit_post_batch": ["kubectl uncordon {{ inventory_hostname }}", "echo {{ hostkit_fixture }}"],
            "hostkit_fixture": "epyc",
        },
    )
    assert out == {
        "pre_batch": ["kubectl drain node-1 --ignore-daemonsets"],
        "post_batch": ["kubectl uncordon node-1", "echo epyc"],
    }
    assert hooks.render("n", {}) == {"pre_batch": [], "post_batch": []}


@pytest.mark.parametrize(
    "value, needle",
    [
        ("kubectl drain {{ no_such_var }}", "no_such_var"),
        ("kubectl drain {{ inventory_hostname", "hostkit_pre_batch"),
        (["ok", 3], "must be a command"),
        ("   ", "must be a command"),
    ],
)
def test_a_hook_that_does_not_render_is_bad_input(value, needle):
    with pytest.raises(BadInput, match=needle):
        hooks.render("n", {"hostkit_pre_batch": value})


def test_a_hook_runs_with_the_rollout_environment_and_reports_its_exit(tmp_path):
    log = tmp_path / "log"
    cmd = f'echo "$HOSTKIT_HOOK $HOSTKIT_HOST $HOSTKIT_BATCH $HOSTKIT_ROLLOUT" >> {log}'
    ok = hooks.run_hook("pre_batch", "n1", cmd, timeout=10, rollout_id="R1", batch=2)
    assert ok.ok and ok.rc == 0 and log.read_text() == "pre_batch n1 2 R1\n"
    bad = hooks.run_hook("post_batch", "n1", "echo node busy >&2; exit 7", timeout=10, rollout_id="R1", batch=0)
    assert (bad.ok, bad.rc, bad.output) == (False, 7, "node busy")
    assert bad.why() == "post_batch hook `echo node busy >&2; exit 7` exit 7: node busy"


def test_a_hook_that_runs_out_of_time_is_killed_with_its_children(tmp_path):
    pidfile = tmp_path / "child.pid"
    start = time.monotonic()
    r = hooks.run_hook("pre_batch", "n1", f"sleep 60 & echo $! > {pidfile}; wait", timeout=1, rollout_id="R", batch=0)
    assert r.rc is None and not r.ok and "timed out after 1 s" in r.why()
    assert time.monotonic() - start < 10
    child = int(pidfile.read_text())
    for _ in range(50):  # the killed sleep is reaped by init shortly after
        if not os.path.exists(f"/proc/{child}") or "Z" in open(f"/proc/{child}/stat").read().split()[2]:
            break
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split()[2] == "Z"


@pytest.mark.parametrize("seconds", [0, 0.5, 86401])
def test_hook_timeout_bounds(seconds):
    with pytest.raises(BadInput, match="--hook-timeout"):
        hooks.check_timeout(seconds)


# ----------------------------------------------------------------------------- state file


def saved_state(rid: str, status: str) -> dict:
    """The state file of a rollout with no host, as :func:`hostkit.rollout.state.load` accepts it."""
    doc = {
        "version": state.VERSION,
        "rollout_id": rid,
        "status": status,
        "created": state.now(),
        "request": {"inventory": "inventory.yml", "batch": "1"},
        "batches": [],
        "hosts": {},
    }
    state.save(doc)
    return doc


def test_state_is_replaced_atomically_and_read_back():
    doc = saved_state("20261130T000000Z-abcdef", "running")
    path = state.save(doc)
    assert json.loads(path.read_text())["status"] == "running"
    doc["status"] = "completed"
    state.save(doc)
    assert state.load("20261130T000000Z-abcdef")["status"] == "completed"
    assert sorted(p.name for p in path.parent.iterdir()) == ["rollout.json"]  # no temporary file left


@pytest.mark.parametrize("rid, needle", [("../etc", "not a hostkit rollout id"), ("nope", "no rollout nope")])
def test_unknown_or_malformed_rollout_ids_are_bad_input(rid, needle):
    with pytest.raises(BadInput, match=needle):
        state.load(rid)


# ----------------------------------------------------------------------------- the command's bad input


@pytest.fixture
def fleet(tmp_path, closed_port):  # noqa: F811
    """Three unreachable hosts (nothing listens on their port) with real fixture trees."""
    from hostkit.lab import fixtures
    from tests.treehash import tree_hash

    roots = {h: fixtures.materialize("kvm-small", tmp_path / h) for h in ("a", "b", "c")}

    def inventory(extra: dict | None = None):
        hosts = {
            h: {
                "ansible_host": "127.0.0.1",
                "ansible_port": closed_port,
                "hostkit_sysroot": str(r),
                **((extra or {}).get(h) or {}),
            }
            for h, r in roots.items()
        }
        path = tmp_path / "inventory.yml"
        path.write_text(
            yaml.safe_dump({"all": {"vars": {"ansible_user": "root"}, "children": {"lab": {"hosts": hosts}}}})
        )
        return path

    inventory.trees = lambda: {h: tree_hash(r) for h, r in roots.items()}
    return inventory


CLI_CASES = [
    ("batch-zero", ["--batch", "0"], None, ["--batch 0"]),
    ("batch-larger-than-fleet", ["--batch", "4"], None, ["--batch 4", "larger than the fleet (3"]),
    ("batch-larger-than-limit", ["--batch", "2", "--limit", "a"], None, ["larger than the fleet (1"]),
    ("batch-percent-zero", ["--batch", "0%"], None, ["1-100%"]),
    ("batch-missing", [], None, ["--batch N"]),
    ("canary-too-many", ["--batch", "1", "--canary", "3"], None, ["--canary 3"]),
    ("max-failures-negative", ["--batch", "1", "--max-failures", "-1"], None, ["--max-failures"]),
    ("max-unavailable-zero", ["--batch", "2", "--max-unavailable", "0"], None, ["--max-unavailable must be 1"]),
    ("max-unavailable-text", ["--batch", "2", "--max-unavailable", "two"], None, ["--max-unavailable"]),
    ("hook-timeout-zero", ["--batch", "1", "--hook-timeout", "0"], None, ["--hook-timeout"]),
    ("reboot-timeout", ["--batch", "1", "--reboot-timeout", "5"], None, ["--reboot-timeout"]),
    ("target-zero", ["--batch", "1", "--target-p999-ms", "0"], None, ["--target-p999-ms"]),
    ("smoke-duration-negative", ["--batch", "1", "--smoke-duration", "-2"], None, ["--duration"]),
    ("hook-undefined", ["--batch", "1"], {"b": {"hostkit_pre_batch": "drain {{ nodename }}"}}, ["b:", "nodename"]),
    ("profile-unknown", ["--batch", "1"], {"c": {"hostkit_profile": "no-such-profile"}}, ["no-such-profile"]),
    ("limit-nothing", ["--batch", "1", "--limit", "zz"], None, ["zz"]),
]


@pytest.mark.parametrize("case", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_a_rollout_with_bad_input_changes_nothing_and_contacts_no_host(fleet, capsys, case):
    _, args, extra, needles = case
    inv = fleet(extra)
    before = fleet.trees()
    rc, out, err = hostkit(capsys, "rollout", "-i", inv, *args)
    assert_one_line_error(rc, err, needles)
    assert no_host_contacted() and fleet.trees() == before


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--resume", "20261130T000000Z-aaaaaa"], ["no rollout 20261130T000000Z-aaaaaa"]),
        (["--abort", "20261130T000000Z-aaaaaa"], ["no rollout"]),
        (["--resume", "R", "--abort", "R"], ["not allowed with argument"]),
        (["--resume", "R", "--batch", "2"], ["drop --batch"]),
        (["--resume", "R", "--max-unavailable", "1"], ["drop --max-unavailable"]),
        (["--abort", "R", "-i", "inv.yml", "--reboot"], ["drop --inventory, --reboot"]),
        (["--resume", "../x"], ["not a hostkit rollout id"]),
    ],
)
def test_resume_and_abort_bad_input(capsys, args, needles):
    rc, out, err = hostkit(capsys, "rollout", *args)
    assert_one_line_error(rc, err, needles)
    assert no_host_contacted()


@pytest.mark.parametrize(
    "status, needle", [("completed", "has finished: nothing to resume"), ("aborted", "was aborted")]
)
def test_resume_of_a_finished_or_aborted_rollout_is_bad_input(capsys, status, needle):
    rid = "20261130T000000Z-bbbbbb"
    saved_state(rid, status)
    before = state.load(rid)
    rc, out, err = hostkit(capsys, "rollout", "--resume", rid)
    assert_one_line_error(rc, err, [needle])
    assert state.load(rid) == before


def test_abort_of_an_aborted_rollout_is_bad_input(capsys):
    rid = "20261130T000000Z-cccccc"
    saved_state(rid, "aborted")
    rc, out, err = hostkit(capsys, "rollout", "--abort", rid)
    assert_one_line_error(rc, err, ["already aborted"])


def test_without_reboot_a_plan_changing_kernel_arguments_refuses_the_rollout(monkeypatch, sysroots):
    """The rollout's smoke gate and apply --verify-smoke share one rule (api.smoke_before_reboot): a host
    whose plan changes kernel arguments would be gated on the kernel it booted, untuned."""
    from hostkit import api
    from hostkit.rollout import driver
    from tests.unit.test_verify_smoke import bare_metal_and_guest_plans

    plans = bare_metal_and_guest_plans(sysroots)
    monkeypatch.setattr(api, "plan", lambda req, on_event=None: plans)
    assert driver.refusals(driver.RolloutRequest(inventory="inv.yml", batch="1", reboot=True)) == []
    assert driver.refusals(driver.RolloutRequest(inventory="inv.yml", batch="1")) == [
        "bm: a smoke gate would measure the running kernel, booted without isolcpus=managed_irq,2-83,86-167 "
        "nohz_full=2-83,86-167 rcu_nocbs=2-83,86-167 ...: reboot into them first (--reboot, hostkit_reboot)"
    ]
    assert api.audit_failed("pending_reboot", strict=True) and not api.audit_failed("pending_reboot", strict=False)
    assert [s for s in ("pass", "drift", "unreachable", "failed", "refused") if api.audit_failed(s, False)] == [
        "drift",
        "unreachable",
        "failed",
        "refused",
    ]
