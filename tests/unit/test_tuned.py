"""tuned coexistence: the facts reader (tuned's own file layouts, tests/tuned_v2.21.0 profiles), the
plan's tuned decision and the pieces it is computed with (tuned's cpulist2hex, bootloader cmdline
merge, add_modify_option_in_file), rollback's follow-up, and a property test: drive is never chosen
where tuned is not installed."""

from __future__ import annotations

import copy
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostkit.core.kernel_args import arg_name, cmdline_words
from hostkit.facts import Sysroot, gather
from hostkit.facts.tuned import read_tuned
from hostkit.plan import build_plan
from hostkit.plan.tuned import bootcmdline_text, cpulist2hex, effective_cmdline, filter_cmdline
from hostkit.profiles import apply_overrides, load_profile
from hostkit.tunables import TUNED_FOLLOW_UP, resolve_follow_up
from tests.tuned_util import install_debian_tuned, install_tuned

RHEL8 = "boot-rhel8-tuned"
DEBIAN12 = "boot-debian12"
# tuned 2.20 (Debian) cpu-partitioning with isolated_cores=no_balance_cores=2-7 of 8 CPUs: network-latency's
# cmdline_network_latency, then cmdline_cpu_part with ${cmd_isolcpus} = " isolcpus=2-7".
DEBIAN_BOOT_CMDLINE = (
    "skew_tick=1 nohz=on isolcpus=2-7 nohz_full=2-7 rcu_nocbs=2-7 tuned.non_isolcpus=00000003 "
    "intel_pstate=disable nosoftlockup"
)
FIXTURE_BOOT_CMDLINE = (
    "skew_tick=1 tsc=reliable rcupdate.rcu_normal_after_boot=1 nohz=on isolcpus=2-7 "
    "nohz_full=2-7 rcu_nocbs=2-7 tuned.non_isolcpus=00000003 intel_pstate=disable nosoftlockup"
)


def plan(facts, overrides=None):
    prof, pinned = apply_overrides(load_profile("bare-metal-inference"), overrides)
    return build_plan(facts, prof, pinned).to_dict()


def test_the_rhel8_fixture_without_the_package_reads_tuned_s_files_but_is_not_active(sysroot_copy):
    t = read_tuned(Sysroot(sysroot_copy(RHEL8)))
    assert (t["installed"], t["running"], t["enabled"], t["active"]) == (False, False, False, False)
    assert (t["active_profile"], t["profile_mode"]) == ("cpu-partitioning", "manual")
    assert t["bootcmdline"] == {
        "TUNED_BOOT_CMDLINE": FIXTURE_BOOT_CMDLINE,
        "TUNED_BOOT_INITRD_ADD": "/boot/tuned-initrd.img",
    }
    assert t["profiles"] == [] and t["base_profiles"] == {}


def test_installed_tuned_s_profile_chain_variables_and_bootloader_options(sysroot_copy):
    root = sysroot_copy(RHEL8)
    install_tuned(root)
    t = read_tuned(Sysroot(root))
    assert (t["installed"], t["running"], t["enabled"], t["active"]) == (True, True, True, True)
    assert t["profile_dirs"] == {"system": "/usr/lib/tuned", "user": "/etc/tuned"}
    assert [p["path"] for p in t["profiles"]] == [
        "/usr/lib/tuned/latency-performance/tuned.conf",
        "/usr/lib/tuned/network-latency/tuned.conf",
        "/usr/lib/tuned/cpu-partitioning/tuned.conf",
    ]
    # from /etc/tuned/cpu-partitioning-variables.conf, through cpu-partitioning's [variables] include=
    assert t["isolated_cores"] == "2-7" and t["variables"]["no_balance_cores"] == "2-7"
    assert t["bootloader_cmdline"] == {
        "cmdline_network_latency": "skew_tick=1 tsc=reliable rcupdate.rcu_normal_after_boot=1",
        "cmdline_cpu_part": "+nohz=on${cmd_isolcpus} nohz_full=${isolated_cores} rcu_nocbs=${isolated_cores} "
        "tuned.non_isolcpus=${not_isolated_cpumask} intel_pstate=disable nosoftlockup",
    }
    assert t["base_profiles"]["cpu-partitioning"]["found"] and t["base_profiles"]["cpu-partitioning"]["initrd"]
    assert t["base_profiles"]["latency-performance"]["bootloader_cmdline"] == {}


def test_stopped_and_disabled_tuned_is_installed_but_not_active(sysroot_copy):
    root = sysroot_copy(RHEL8)
    install_tuned(root, running=False, enabled=False)
    t = read_tuned(Sysroot(root))
    assert (t["installed"], t["active"]) == (True, False)
    assert plan(gather(str(root)))["tuned"]["mode"] == "ignore"


def test_the_newer_layout_and_a_user_profile_that_overrides_the_system_one(sysroot_copy):
    root = sysroot_copy(RHEL8)
    install_tuned(root)
    system = root / "usr/lib/tuned"
    (system / "profiles").mkdir()
    for name in ("cpu-partitioning", "network-latency", "latency-performance"):
        shutil.move(str(system / name), str(system / "profiles" / name))
    user = root / "etc/tuned/profiles/cpu-partitioning"
    user.mkdir(parents=True)
    (user / "tuned.conf").write_text("[main]\ninclude=network-latency\n[variables]\nisolated_cores=3-7\n")
    t = read_tuned(Sysroot(root))
    assert t["profile_dirs"] == {"system": "/usr/lib/tuned/profiles", "user": "/etc/tuned/profiles"}
    assert [p["path"] for p in t["profiles"]] == [
        "/usr/lib/tuned/profiles/latency-performance/tuned.conf",
        "/usr/lib/tuned/profiles/network-latency/tuned.conf",
        "/etc/tuned/profiles/cpu-partitioning/tuned.conf",
    ]
    assert t["isolated_cores"] == "3-7"
    assert plan(gather(str(root)))["tuned"]["profile_dir"] == "/etc/tuned/profiles/hostkit"


def test_a_missing_included_profile_is_named(sysroot_copy):
    root = sysroot_copy(RHEL8)
    install_tuned(root)
    shutil.rmtree(root / "usr/lib/tuned/network-latency")
    t = read_tuned(Sysroot(root))
    assert t["missing_profiles"] == ["network-latency"]
    assert [p["name"] for p in t["profiles"]] == ["cpu-partitioning"]


def test_tuned_s_cpulist2hex_format():
    assert cpulist2hex({0, 1}) == "00000003"  # the fixture's tuned.non_isolcpus for isolated 2-7 of 8
    assert cpulist2hex(range(40)) == "000000ff,ffffffff"
    assert cpulist2hex({32}) == "00000001,00000000"


def test_filter_and_merge_cmdline_options_as_tuned_s_bootloader_plugin():
    defs = {"cmd_isolcpus": r"${f:regex_search_ternary:${no_balance_cores}:\s*[0-9]: isolcpus=${no_balance_cores}:}"}
    value = "+nohz=on${cmd_isolcpus} nohz_full=${isolated_cores} tuned.non_isolcpus=${m} intel_pstate=disable"
    assert (
        filter_cmdline(value, {"isolcpus", "nohz_full"}, defs)
        == "+nohz=on tuned.non_isolcpus=${m} intel_pstate=disable"
    )
    assert filter_cmdline(value, {"rcu_nocbs"}, defs) == value  # nothing managed named there
    assert effective_cmdline({"a": "x=1 y", "b": "+z", "c": "-y", "d": ""}) == "x=1 z"


def test_bootcmdline_lines_are_written_as_tuned_does():
    assert (
        bootcmdline_text({"TUNED_BOOT_CMDLINE": "c", "TUNED_BOOT_INITRD_ADD": "/boot/tuned-initrd.img"})
        == 'TUNED_BOOT_CMDLINE="c"\nTUNED_BOOT_INITRD_ADD="/boot/tuned-initrd.img"\n'
    )
    assert (
        bootcmdline_text({"TUNED_BOOT_CMDLINE": "", "TUNED_BOOT_INITRD_ADD": ""})
        == 'TUNED_BOOT_CMDLINE=""\nTUNED_BOOT_INITRD_ADD=""\n'
    )


def test_drive_plan_on_the_rhel8_host(sysroot_copy):
    root = sysroot_copy(RHEL8)
    install_tuned(root)
    p = plan(gather(str(root)))
    t = p["tuned"]
    assert (t["mode"], t["profile"], t["previous_profile"]) == ("drive", "hostkit", "cpu-partitioning")
    conf = t["conf"].splitlines()
    assert "include=cpu-partitioning" in conf and f"isolated_cores={p['isolated']}" in conf
    assert "cmdline_network_latency=rcupdate.rcu_normal_after_boot=1" in conf
    assert "cmdline_cpu_part=+nohz=on tuned.non_isolcpus=${not_isolated_cpumask} intel_pstate=disable" in conf
    assert "kernel.timer_migration=1" in conf  # hostkit's (kubelet) value, not network-latency's 0
    # what tuned will compute is tuned's previous line without hostkit's arguments
    assert t["boot_cmdline"] == " ".join(
        w for w in cmdline_words(FIXTURE_BOOT_CMDLINE) if arg_name(w) not in p["cmdline_set"]
    )
    assert t["bootcmdline"] == (
        f'TUNED_BOOT_CMDLINE="{t["boot_cmdline"]}"\nTUNED_BOOT_INITRD_ADD="/boot/tuned-initrd.img"\n'
    )
    assert any(r.startswith("tuned: drive (default where tuned is active") for r in p["reasons"])


def test_no_isolation_includes_latency_performance_and_neutralize_has_no_plugins(sysroot_copy):
    root = sysroot_copy(RHEL8)
    install_tuned(root)
    f = gather(str(root))
    t = plan(f, {"isolation": False})["tuned"]
    assert "include=latency-performance" in t["conf"].splitlines() and "[variables]" not in t["conf"]
    n = plan(f, {"tuned": "neutralize"})["tuned"]
    assert (n["mode"], n["profile"], n["boot_cmdline"]) == ("neutralize", "hostkit-neutral", "")
    assert [line for line in n["conf"].splitlines() if line.startswith("[")] == ["[main]"]
    assert plan(f, {"tuned": "ignore"})["tuned"] == {
        "mode": "ignore",
        "previous_profile": "cpu-partitioning",
        "previous_mode": "manual",
    }


def test_rollback_follow_up_resolves_tuned_s_previous_profile():
    files = {"/etc/tuned/active_profile": "cpu-partitioning\n", "/etc/tuned/profile_mode": "manual\n"}
    assert resolve_follow_up(list(TUNED_FOLLOW_UP), files.get) == ["tuned-adm", "profile", "cpu-partitioning"]
    assert resolve_follow_up(list(TUNED_FOLLOW_UP), {"/etc/tuned/active_profile": "a b\n"}.get) == [
        "tuned-adm",
        "profile",
        "a",
        "b",
    ]
    assert resolve_follow_up(list(TUNED_FOLLOW_UP), {"/etc/tuned/profile_mode": "auto\n"}.get) == [
        "tuned-adm",
        "auto_profile",
    ]
    assert resolve_follow_up(list(TUNED_FOLLOW_UP), {}.get) == ["tuned-adm", "off"]
    assert resolve_follow_up(["update-grub"], {}.get) == ["update-grub"]


@pytest.fixture(scope="module")
def tuned_facts(sysroots):
    return {name: gather(str(sysroots[name])) for name in ("epyc-9634-nps1", RHEL8, "boot-rhel9", "vmware-88vcpu")}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(["epyc-9634-nps1", RHEL8, "boot-rhel9", "vmware-88vcpu"]),
    asked=st.sampled_from([None, "drive", "neutralize", "ignore"]),
    installed=st.booleans(),
    active=st.booleans(),
    isolation=st.booleans(),
)
def test_drive_is_never_chosen_where_tuned_is_not_installed_property(
    tuned_facts, name, asked, installed, active, isolation
):
    f = copy.deepcopy(tuned_facts[name])
    f["tuned"].update(installed=installed, active=installed and active)
    overrides = {"isolation": isolation, "allow_virtual": True}
    if asked is not None:
        overrides["tuned"] = asked
    t = build_plan(f, apply_overrides(load_profile("bare-metal-inference"), overrides)[0]).to_dict()["tuned"]
    if not installed:
        assert t["mode"] == "ignore"
    elif asked is None:
        assert t["mode"] == ("drive" if active else "ignore")
    else:
        assert t["mode"] == asked
    if t["mode"] == "drive":  # hostkit's profile never hands tuned an argument hostkit sets
        p = build_plan(f, apply_overrides(load_profile("bare-metal-inference"), overrides)[0])
        assert not {arg_name(w) for w in cmdline_words(t["boot_cmdline"])} & set(p.cmdline_set)


def test_a_post_loaded_profile_is_warned_about(sysroot_copy):
    root = sysroot_copy(RHEL8)
    install_tuned(root)
    (root / "etc/tuned/post_loaded_profile").write_text("my-tweaks\n")
    p = plan(gather(str(root)))
    assert p["tuned"]["mode"] == "drive"
    assert (
        "tuned: post-loaded profile my-tweaks (/etc/tuned/post_loaded_profile) is applied after hostkit's and "
        "its values win where both set one"
    ) in p["warnings"]


def test_a_partition_tuned_did_not_have_is_named_until_tuned_runs(sysroot_copy):
    root = sysroot_copy(RHEL8)
    install_tuned(root)
    f = gather(str(root))
    assert not [w for w in plan(f)["warnings"] if "grubenv tuned_params" in w]  # same partition as tuned's
    p = plan(f, {"isolated": "4-7"})
    assert (
        p["tuned"]["boot_cmdline"] == "rcupdate.rcu_normal_after_boot=1 nohz=on tuned.non_isolcpus=0000000f "
        "intel_pstate=disable"
    )
    assert (
        "tuned: grubenv tuned_params keeps rcupdate.rcu_normal_after_boot=1 nohz=on tuned.non_isolcpus=00000003 "
        "intel_pstate=disable until `tuned-adm profile hostkit` runs (at once on a live host) and writes "
        "rcupdate.rcu_normal_after_boot=1 nohz=on tuned.non_isolcpus=0000000f intel_pstate=disable; none of "
        "hostkit's arguments either way"
    ) in p["warnings"]


def test_a_malformed_profile_is_named_not_fatal(sysroot_copy):
    root = sysroot_copy(RHEL8)
    install_tuned(root)
    (root / "usr/lib/tuned/network-latency/tuned.conf").write_text("include=latency-performance\n")  # no [section]
    t = read_tuned(Sysroot(root))
    assert len(t["missing_profiles"]) == 1 and t["missing_profiles"][0].startswith(
        "network-latency (/usr/lib/tuned/network-latency/tuned.conf: File contains no section headers."
    )
    assert [p["name"] for p in t["profiles"]] == ["cpu-partitioning"]


def test_debian_grub_with_tuned_next_boot_expands_tuned_params_and_apply_takes_hostkit_s_names_out(sysroot_copy):
    """Debian's tuned 2.20 on GRUB: tuned appends `\\$tuned_params` to GRUB_CMDLINE_LINUX_DEFAULT in
    /etc/default/grub and 00_tuned sets it from /etc/tuned/bootcmdline; the next boot is computed
    with it, and the boot-loader edit takes hostkit's arguments out of TUNED_BOOT_CMDLINE there
    (comment header kept) so each appears once."""
    from hostkit.core import boot_loader

    root = sysroot_copy(DEBIAN12)
    install_debian_tuned(root, "isolated_cores=2-7\nno_balance_cores=2-7\n", DEBIAN_BOOT_CMDLINE)
    thp = root / "sys/kernel/mm/transparent_hugepage/enabled"  # as tuned's network-latency left it
    thp.parent.mkdir(parents=True, exist_ok=True)
    thp.write_text("always madvise [never]\n")
    facts = gather(str(root))
    assert facts["kernel"]["boot_loader"]["backend"] == "grub-debian"
    assert "/etc/tuned/bootcmdline" in facts["kernel"]["boot_loader"]["files"]
    assert facts["kernel"]["next_boot_cmdline"].split()[2:] == ["ro", "quiet"] + DEBIAN_BOOT_CMDLINE.split()
    t = facts["tuned"]
    assert (t["active"], t["active_profile"], t["isolated_cores"]) == (True, "cpu-partitioning", "2-7")

    p = plan(facts)
    assert p["tuned"]["mode"] == "drive"
    # network-latency's [vm] transparent_hugepages=never (seen undoing hostkit's THP in a real guest)
    assert "[vm]\ntransparent_hugepages=madvise\n" in p["tuned"]["conf"]
    want = dict(p["cmdline_set"])
    cfg = boot_loader.detect(str(root))
    new = boot_loader.edit(cfg, want, p.get("cmdline_remove") or ())
    text = new["/etc/tuned/bootcmdline"]
    assert text.startswith("# This file specifies additional parameters")  # the package's header kept
    kept = boot_loader.tuned_boot_cmdline(text).split()
    assert kept == [w for w in DEBIAN_BOOT_CMDLINE.split() if arg_name(w) not in want]
    after = dict(cfg, texts={**cfg["texts"], **{k: v for k, v in new.items() if v is not None}})
    words = cmdline_words(boot_loader.next_boot(after)[0])
    assert [w for w in words if arg_name(w) == "isolcpus"] == [f"isolcpus={want['isolcpus']}"]
    # what tuned's bootloader plugin will write for hostkit's profile is what the next boot already reads
    assert p["tuned"]["boot_cmdline"].split() == kept


def test_a_base_profile_the_host_lacks_is_named_in_the_warning():
    """hostkit's tuned profile includes cpu-partitioning optionally where the host has no such profile;
    the warning names it (it once printed the placeholder itself)."""
    from hostkit.plan.model import Notes
    from hostkit.plan.tuned import plan_tuned

    notes = Notes()
    facts = {"tuned": {"installed": True, "running": True, "active_profile": "balanced", "base_profiles": {}}}
    doc = plan_tuned(
        "drive",
        facts,
        notes,
        online=frozenset({0, 1, 2, 3}),
        isolated=frozenset({2, 3}),
        managed={"isolcpus"},
        sysctl={},
        governor=None,
    )
    assert doc["mode"] == "drive" and "include=-cpu-partitioning" in doc["conf"], doc
    assert any("optionally (-cpu-partitioning)" in w for w in notes.warnings), notes.warnings
