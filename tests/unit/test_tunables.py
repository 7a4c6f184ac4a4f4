"""The tunables table (hostkit/tunables.py) and everything that reads it: schema, facts, capture,
adoption, audit, rollback's follow-ups, the roles' variables; the one value normaliser."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hostkit import tunables
from hostkit.agent import adopt as adopt_mod
from hostkit.agent import rollback as rollback_mod
from hostkit.audit.checks import audited_files, check_sysctls, run_checks
from hostkit.core.values import normalise, same
from hostkit.facts import gather
from hostkit.facts.capture import PATTERNS
from hostkit.plan import make_plan
from hostkit.profiles import apply_overrides, load_profile
from hostkit.profiles.schema import SCHEMA, defaults

REPO = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- the table itself


def test_keys_are_unique_and_tuned_sysctls_are_bounded():
    assert len(tunables.BY_KEY) == len(tunables.SYSCTLS)
    assert len({s.fact for s in tunables.SYSCTLS}) == len(tunables.SYSCTLS)  # facts["kernel"] names
    for s in tunables.tuned_sysctls():
        assert s.min is not None and s.max is not None and s.min <= s.max, s.key
        assert s.default is None or s.min <= s.default <= s.max, s.key
        assert s.kind in ("int", "str", "cpulist", "mask"), s.key
        assert (REPO / "roles" / s.role).is_dir(), s.role
    assert len(set(tunables.PATH_VARS)) == len(tunables.PATH_VARS)


# ----------------------------------------------------------------------------- schema, planner


def test_schema_sysctls_are_the_tuned_sysctls():
    fields = SCHEMA["sysctl"]
    assert list(fields) == [s.key for s in tunables.tuned_sysctls()]
    for s in tunables.tuned_sysctls():
        f = fields[s.key]
        assert (f.kind, f.default, f.min, f.max, f.nullable, f.doc) == (s.kind, s.default, s.min, s.max, True, s.doc)


@pytest.mark.parametrize("sysctl", tunables.tuned_sysctls(), ids=lambda s: s.key)
def test_profile_bounds_come_from_the_table(sysctl):
    from hostkit.errors import BadInput

    for bad, needle in ((sysctl.min - 1, f"must be >= {sysctl.min}"), (sysctl.max + 1, f"must be <= {sysctl.max}")):
        with pytest.raises(BadInput, match=re.escape(needle)):
            apply_overrides(load_profile(), {"sysctl": {sysctl.key: bad}})
    prof, _ = apply_overrides(load_profile(), {"sysctl": {sysctl.key: sysctl.max}})
    assert prof["sysctl"][sysctl.key] == sysctl.max


def test_a_null_default_leaves_the_kernel_value_alone(sysroots):
    """Tunables whose default is null are in no plan unless a profile sets them."""
    untouched = {s.key for s in tunables.tuned_sysctls() if s.default is None}
    plan = make_plan(gather(str(sysroots["epyc-9634-nps1"])), load_profile())
    assert set(plan["sysctl"]) == {s.key for s in tunables.tuned_sysctls()} - untouched
    assert all(defaults()["sysctl"][k] is None for k in untouched)


# ----------------------------------------------------------------------------- facts, capture


def test_facts_read_every_sysctl_of_the_table(sysroot_copy):
    root = sysroot_copy("kvm-small")
    for _i, s in enumerate(tunables.SYSCTLS):
        p = root / s.proc_path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"{(s.min if s.min is not None else 0) + (1 if s.max and s.max > (s.min or 0) else 0)}\n")
    kernel = gather(str(root))["kernel"]
    for s in tunables.SYSCTLS:
        assert kernel[s.fact] == int((root / s.proc_path.lstrip("/")).read_text()), s.key


def test_capture_takes_every_sysctl_of_the_table():
    assert {s.proc_path.lstrip("/") for s in tunables.SYSCTLS} <= set(PATTERNS)


# ----------------------------------------------------------------------------- adoption, rollback


def test_adoption_records_every_tuned_sysctl_and_the_managed_files(sysroot_copy):
    root = sysroot_copy("epyc-9634-nps1")
    for s in tunables.tuned_sysctls():
        p = root / s.proc_path.lstrip("/")
        if not p.exists():
            p.write_text(f"{s.min}\n")
    (root / "etc/sysctl.d/10-other.conf").write_text("vm.swappiness = 10\n")
    doc = adopt_mod.adopt(str(root))
    assert doc["values"] == [s.proc_path for s in tunables.tuned_sysctls()] + ["/proc/cmdline"]
    assert doc["files"] == ["/etc/default/grub", "/etc/default/irqbalance", "/etc/sysctl.d/10-other.conf"]


def test_adopted_patterns_and_rollback_follow_ups_are_the_table_s():
    assert tunables.adopted_patterns() == [
        "/etc/default/grub",
        "/etc/default/irqbalance",
        "/etc/sysconfig/irqbalance",
        "/etc/containerd/config.toml",
        "/etc/tuned/active_profile",
        "/etc/tuned/profile_mode",
        "/etc/tuned/bootcmdline",
        "/etc/systemd/system.conf.d/00-tuned.conf",
        "/boot/grub2/grubenv",
        "/etc/default/grub.d/*.cfg",
        "/etc/sysctl.d/*.conf",
        "/etc/kubernetes/kubelet.conf.d/*",
    ]
    assert rollback_mod.FOLLOW_UP == [
        ("/etc/default/grub", ["update-grub"], True),
        ("/etc/default/grub.d/", ["update-grub"], True),
        ("/etc/default/irqbalance", ["systemctl", "try-restart", "irqbalance.service"], False),
        ("/etc/sysconfig/irqbalance", ["systemctl", "try-restart", "irqbalance.service"], False),
        ("/etc/systemd/system/", ["systemctl", "daemon-reload"], False),
        ("/etc/containerd/", ["systemctl", "try-restart", "containerd.service"], False),
        ("/etc/kubernetes/", ["systemctl", "try-restart", "kubelet.service"], False),
        ("/var/lib/kubelet/", ["systemctl", "try-restart", "kubelet.service"], False),
        ("/etc/tuned/", ["tuned-adm", "profile", "{tuned_previous_profile}"], False),
        # boot configuration nothing regenerates (grubenv, BLS, systemd-boot): the next boot reads it
        ("/boot/grub2/grubenv", [], True),
        ("/boot/loader/entries/", [], True),
        ("/boot/efi/loader/entries/", [], True),
        ("/efi/loader/entries/", [], True),
        ("/etc/kernel/cmdline", [], True),
        ("/etc/systemd/system/hostkit-pm-qos.service", ["systemctl", "stop", "hostkit-pm-qos.service"], False),
    ]
    for f in tunables.FILES:  # every file a role writes is under the prefix of its follow-up, or needs none
        if f.follow_up:
            assert f.path.rstrip("/") + "/" == f.prefix or f.path.startswith(f.prefix), f


# ----------------------------------------------------------------------------- roles


def _yaml(role: str, part: str) -> dict:
    return yaml.safe_load((REPO / "roles" / role / part / "main.yml").read_text()) or {}


def test_role_variables_are_generated_from_the_table():
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts/role_tunables.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for role in {s.role for s in tunables.tuned_sysctls()}:
        block = _yaml(role, "vars")[f"__{role}_sysctls"]
        assert block == {
            s.key: {"path": s.proc_path, "kind": s.kind, "min": s.min, "max": s.max}
            for s in tunables.tuned_sysctls(role)
        }


def test_the_rt_runtime_role_reads_its_sysctl_from_the_plan_with_the_table_default():
    (rt,) = tunables.tuned_sysctls(tunables.ROLE_RT)
    assert _yaml(rt.role, "defaults")["rt_runtime_us"] == (
        f"{{{{ hostkit_plan.sysctl['{rt.key}'] | default({rt.default}) }}}}"
    )


def test_role_path_defaults_are_the_table_s():
    for f in tunables.FILES:
        if f.var:
            assert _yaml(f.role, "defaults")[f.var] == f.path, f.var
            spec = yaml.safe_load((REPO / "roles" / f.role / "meta/argument_specs.yml").read_text())
            assert f.var in spec["argument_specs"]["main"]["options"], f.var


def test_inventory_keeps_the_role_paths_an_operator_moves(tmp_path):
    from hostkit.ansible.inventory import load_inventory

    inv = tmp_path / "inv.yml"
    inv.write_text(
        yaml.safe_dump({"all": {"hosts": {"h": {"kubelet_dropin": "/etc/k/90-x.conf", "unrelated_var": 1}}}})
    )
    (h,) = load_inventory(str(inv))
    assert h.vars.get("kubelet_dropin") == "/etc/k/90-x.conf" and "unrelated_var" not in h.vars
    assert tunables.role_paths(h.vars)["kubelet_dropin"] == "/etc/k/90-x.conf"
    assert tunables.role_paths({})["kubelet_dropin"] == "/etc/kubernetes/kubelet.conf.d/60-hostkit.conf"


# ----------------------------------------------------------------------------- audit


class LocalHost:
    """A testinfra-like host running commands on this machine (the audit's view of a sysroot)."""

    class _Cmd:
        def __init__(self, proc):
            self.stdout, self.stderr, self.rc = proc.stdout, proc.stderr, proc.returncode

    class _File:
        def __init__(self, path):
            self.exists = Path(path).is_file()
            self.content_string = Path(path).read_text() if self.exists else ""

    def run(self, command, *args):
        line = command % tuple(shlex.quote(str(a)) for a in args)
        return self._Cmd(subprocess.run(line, shell=True, capture_output=True, text=True))

    def file(self, path):
        return self._File(path)


def test_audit_compares_every_planned_sysctl_by_the_table():
    plan = {"sysctl": {s.key: s.max for s in tunables.tuned_sysctls()}}
    facts = {"kernel": {s.fact: str(s.max) + "\n" for s in tunables.tuned_sysctls()}}
    assert {f["status"] for f in check_sysctls(facts, plan)} == {"pass"}
    facts["kernel"][tunables.tuned_sysctls()[0].fact] = None
    found = check_sysctls(facts, plan)
    assert [f["status"] for f in found].count("drift") == 1
    assert [f["source"] for f in found] == [s.proc_path for s in tunables.tuned_sysctls()]


def test_audit_reads_the_kubelet_dropin_and_irqbalance_config_where_the_inventory_moved_them(sysroot_copy):
    root = sysroot_copy("epyc-9634-nps1")
    facts = gather(str(root))
    plan = make_plan(facts, load_profile())
    moved = tunables.role_paths(
        {
            "kubelet_dropin": "/etc/kubelet.d/90-inference.yaml",
            "irq_affinity_irqbalance_config": "/etc/sysconfig/irqbalance",
        }
    )
    for rel, text in (
        ("etc/kubelet.d/90-inference.yaml", yaml.safe_dump(plan["kubelet"]["config"])),
        ("etc/sysconfig/irqbalance", f"IRQBALANCE_BANNED_CPULIST={plan['isolated']}\n"),
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    assert "/etc/kubelet.d/90-inference.yaml" in audited_files(moved)

    def by_check(paths):
        return {f["check"]: f for f in run_checks(LocalHost(), str(root), facts, plan, paths)}

    at_moved, at_default = by_check(moved), by_check(None)
    assert at_moved["kubelet cpuManagerPolicy"]["status"] == "pass"
    assert at_moved["kubelet cpuManagerPolicy"]["source"] == "/etc/kubelet.d/90-inference.yaml"
    assert at_moved["irqbalance banned CPUs"]["status"] == "pass"
    assert at_moved["irqbalance banned CPUs"]["source"] == "/etc/sysconfig/irqbalance"
    assert at_moved["housekeeping = kubelet reservedSystemCPUs"]["status"] == "pass"
    # Without the inventory's paths the audit reads the roles' defaults: nothing written there.
    assert at_default["kubelet configuration"]["status"] == "drift"
    assert at_default["irqbalance banned CPUs"]["status"] == "drift"  # the fixture's own, empty ban


# ----------------------------------------------------------------------------- the normaliser


@pytest.mark.parametrize(
    "kind, want, got, equal",
    [
        ("int", 950000, "950000\n", True),
        ("int", -1, " -1 ", True),
        ("int", 0, "0\t1\n", True),  # a two-valued sysctl compares by its first
        ("int", 10, None, False),
        ("int", 10, "ten", False),
        ("cpulist", "0-3", "0,1,2,3\n", True),
        ("cpulist", "", "\n", True),
        ("cpulist", "0-3", "garbage", False),
        ("str", "static", " static\n", True),
        ("mask", "f", "0000000f", True),
        ("mask", "00000003,00000000", "0-1", False),
    ],
)
def test_normalise(kind, want, got, equal):
    assert same(kind, want, got) is equal


def test_mask_against_a_cpulist():
    assert same("mask", "00000003,00000000", "32-33", got_kind="cpulist")
    assert not same("mask", "3", None, got_kind="cpulist")
    with pytest.raises(ValueError, match="unknown value kind"):
        normalise("float", "1")


def test_plan_json_is_unchanged_by_the_table(sysroots):
    """The plan's sysctl map is the profile's, in the table's order, as plain JSON ints."""
    plan = make_plan(gather(str(sysroots["epyc-9634-nps1"])), load_profile())
    assert json.loads(json.dumps(plan["sysctl"])) == {
        "kernel.sched_rt_runtime_us": 950000,
        "kernel.numa_balancing": 0,
        "kernel.timer_migration": 1,
        "vm.zone_reclaim_mode": 0,
        "vm.stat_interval": 10,
    }


# ----------------------------------------------------------------------------- a tunable end to end


def test_swappiness_end_to_end_through_the_table(sysroot_copy, tmp_path):
    """vm.swappiness is one entry in the table: the schema takes it, facts read it, the planner plans
    it, the numa_sysctl role writes it (runtime and sysctl.d) from its generated variables, the audit
    passes, adoption records it and rollback restores the kernel's value."""
    from hostkit.ansible.run import run_playbook

    root = sysroot_copy("epyc-9634-nps1")
    (root / "proc/sys/vm/swappiness").write_text("60\n")
    facts = gather(str(root))
    assert facts["kernel"]["swappiness"] == 60
    assert "vm.swappiness" not in make_plan(facts, load_profile())["sysctl"]  # default: left alone
    prof, pinned = apply_overrides(load_profile(), {"sysctl": {"vm.swappiness": 10}})
    plan = make_plan(facts, prof, pinned, host="h")
    assert plan["sysctl"]["vm.swappiness"] == 10
    adopted = adopt_mod.adopt(str(root))
    assert "/proc/sys/vm/swappiness" in adopted["values"]

    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        "h": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": sys.executable,
                            "hostkit_sysroot": str(root),
                        }
                    }
                }
            }
        )
    )
    run = run_playbook(
        "apply.yml",
        str(inventory),
        tags="numa_sysctl",
        run_id="20250101T000000Z-swap",
        extravars={"hostkit_plans": {"h": plan}, "hostkit_run_id": "20250101T000000Z-swap"},
    )
    assert run.status == "successful", (run.error, {h: (r.status, r.msg) for h, r in run.hosts.items()})
    assert (root / "proc/sys/vm/swappiness").read_text() == "10\n"
    assert "vm.swappiness = 10\n" in (root / "etc/sysctl.d/61-hostkit-numa.conf").read_text()
    # --tags numa_sysctl ran that role alone: the plan's kernel arguments (isolcpus) were not written
    assert plan["cmdline_set"] and not (root / "etc/default/grub.d/hostkit.cfg").exists()
    ran = {(t.role, t.task) for t in run.hosts["h"].tasks if t.status != "skipped"}
    # every included role validates its arguments (Ansible tags that task always); nothing else of theirs ran
    assert {r for r, task in ran if not task.startswith("Validating arguments")} <= {"tune", "numa_sysctl", ""}, ran
    after = gather(str(root))
    assert {f["check"]: f["status"] for f in check_sysctls(after, plan)}["sysctl vm.swappiness"] == "pass"

    rolled = rollback_mod.rollback(str(root), run_id="20250101T000000Z-swap")
    assert rolled["verify"]["ok"] and (root / "proc/sys/vm/swappiness").read_text() == "60\n"
    assert not (root / "etc/sysctl.d/61-hostkit-numa.conf").exists()
