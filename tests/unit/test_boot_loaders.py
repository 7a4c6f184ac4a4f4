"""The boot loader readers and the edit (hostkit.core.boot_loader): GRUB shell quoting and grub.d
order, the grubenv block's size and padding, BLS variable expansion and the default entry,
systemd-boot's default glob, and on each boot fixture: the edit puts every managed argument exactly
once into every entry, replaces another tool's value, and a second edit changes nothing."""

from __future__ import annotations

import pytest

from hostkit.core import boot_loader as bl
from hostkit.core.kernel_args import arg_name, cmdline_words, edit_words
from hostkit.facts import gather

WANT = {
    "isolcpus": "managed_irq,domain,2-7",
    "nohz_full": "2-7",
    "rcu_nocbs": "2-7",
    "irqaffinity": "0-1",
    "nosoftlockup": None,
}
BOOT_FIXTURES = ["boot-rhel8-tuned", "boot-rhel9", "boot-ubuntu2204-cloud", "boot-debian12", "boot-sdboot"]


def grub_cfg(files: dict[str, str]) -> dict:
    return {
        "backend": "grub-debian",
        "files": bl.grub_order(list(files)),
        "texts": dict(files),
        "found": [],
        "esp": None,
    }


# ----------------------------------------------------------------------------- GRUB (Debian)


@pytest.mark.parametrize(
    "line, value",
    [
        ('GRUB_CMDLINE_LINUX="quiet isolcpus=2-3"', "quiet isolcpus=2-3"),
        ("GRUB_CMDLINE_LINUX='quiet $NOT_EXPANDED'", "quiet $NOT_EXPANDED"),
        ("GRUB_CMDLINE_LINUX=bare", "bare"),
        ("GRUB_CMDLINE_LINUX=bare # a comment", "bare"),
        ('export GRUB_CMDLINE_LINUX="a"\'b c\'"d"', "ab cd"),
        ('GRUB_CMDLINE_LINUX="dyndbg=\\"module foo +p\\" x=\\$y"', 'dyndbg="module foo +p" x=$y'),
        ('GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX_DEFAULT} more"', "d more"),
        ('GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX_DEFAULT more"', "d more"),
    ],
)
def test_grub_values_are_read_as_the_shell_assigns_them(line, value):
    assert bl.grub_effective(['GRUB_CMDLINE_LINUX_DEFAULT="d"\n' + line + "\n"])["GRUB_CMDLINE_LINUX"] == value


def test_grub_d_files_are_sourced_after_grub_in_name_order_and_a_later_assignment_wins():
    paths = [
        "/etc/default/grub.d/hostkit.cfg",
        "/etc/default/grub.d/50-cloudimg-settings.cfg",
        "/etc/default/grub",
        "/etc/default/grub.d/40-force-partuuid.cfg",
        "/etc/default/grub.d/notes.txt",
    ]
    assert bl.grub_order(paths) == [
        "/etc/default/grub",
        "/etc/default/grub.d/40-force-partuuid.cfg",
        "/etc/default/grub.d/50-cloudimg-settings.cfg",
        "/etc/default/grub.d/hostkit.cfg",
    ]
    files = {
        "/etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nGRUB_CMDLINE_LINUX=""\n',
        "/etc/default/grub.d/50-cloudimg-settings.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0"\n',
        "/etc/default/grub.d/hostkit.cfg": bl.dropin_text({"isolcpus": "2-3"}),
    }
    line, _ = bl.next_boot(grub_cfg(files), "BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro quiet splash")
    # The cloud image's value replaces Ubuntu's "quiet splash"; hostkit's drop-in appends to it.
    assert line == "BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro console=tty1 console=ttyS0 isolcpus=2-3"


def test_grub_edit_replaces_a_foreign_value_in_any_grub_d_file_and_keeps_its_quotes():
    files = {
        "/etc/default/grub": "GRUB_CMDLINE_LINUX='isolcpus=1 mitigations=off'\n",
        "/etc/default/grub.d/50-cloudimg-settings.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0 nohz_full=1"\n',
    }
    new = bl.edit(grub_cfg(files), {"isolcpus": "2-3", "nohz_full": "2-3"})
    assert new == {
        "/etc/default/grub": "GRUB_CMDLINE_LINUX='mitigations=off'\n",
        "/etc/default/grub.d/50-cloudimg-settings.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0"\n',
        "/etc/default/grub.d/hostkit.cfg": bl.dropin_text({"isolcpus": "2-3", "nohz_full": "2-3"}),
    }


def test_grub_edit_refuses_when_a_later_file_would_drop_hostkits_arguments():
    files = {
        "/etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
        "/etc/default/grub.d/zz-vendor.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
    }
    with pytest.raises(bl.BootConfigError, match="isolcpus appears as nothing"):
        bl.edit(grub_cfg(files), {"isolcpus": "2-3"})


# ----------------------------------------------------------------------------- grubenv


def test_grubenv_keeps_its_1024_bytes_and_padding():
    block = bl.format_grubenv([("saved_entry", "abc-4.18.0"), ("kernelopts", "root=/dev/sda1 ro")], 1024)
    assert len(block.encode()) == 1024 and not block.endswith("\n")
    assert block.startswith("# GRUB Environment Block\nsaved_entry=abc-4.18.0\nkernelopts=root=/dev/sda1 ro\n###")
    assert set(block[len("# GRUB Environment Block\nsaved_entry=abc-4.18.0\nkernelopts=root=/dev/sda1 ro\n") :]) == {
        "#"
    }
    assert bl.parse_grubenv(block) == [("saved_entry", "abc-4.18.0"), ("kernelopts", "root=/dev/sda1 ro")]


def test_grubenv_escapes_round_trip_and_an_overfull_block_is_refused():
    pairs = [("x", "a\\b\nc")]
    block = bl.format_grubenv(pairs, 1024)
    assert "x=a\\\\b\\nc\n" in block and bl.parse_grubenv(block) == pairs
    with pytest.raises(bl.BootConfigError, match="more than the block's 1024"):
        bl.format_grubenv([("kernelopts", "x" * 1100)], 1024)


# ----------------------------------------------------------------------------- BLS


def bls_cfg(entries: dict[str, str], env: list[tuple[str, str]] | None = None, cmdline: str | None = None) -> dict:
    texts = {f"/boot/loader/entries/{n}.conf": t for n, t in entries.items()}
    if env is not None:
        texts[bl.GRUBENV] = bl.format_grubenv(env, 1024)
    if cmdline is not None:
        texts[bl.KERNEL_CMDLINE] = cmdline
    return {"backend": "bls", "files": sorted(texts), "texts": texts, "found": [], "esp": None}


def test_bls_options_expand_grub_variables_of_the_default_entry():
    cfg = bls_cfg(
        {
            "m-4.18.0-80.el8": "version 4.18.0-80.el8\noptions $kernelopts ${tuned_params}\n",
            "m-4.18.0-513.el8": "version 4.18.0-513.el8\noptions $kernelopts $tuned_params extra\n",
        },
        [
            ("saved_entry", "m-4.18.0-80.el8"),
            ("kernelopts", "root=/dev/sda1 ro"),
            ("tuned_params", "isolcpus=2-7 nohz=on"),
        ],
    )
    assert bl.next_boot(cfg) == ("root=/dev/sda1 ro isolcpus=2-7 nohz=on", "/boot/loader/entries/m-4.18.0-80.el8.conf")
    # No saved_entry: the newest kernel by version (513 > 80, numbers compare as numbers).
    cfg["texts"][bl.GRUBENV] = bl.format_grubenv([("kernelopts", "root=/dev/sda1 ro")], 1024)
    assert bl.next_boot(cfg) == ("root=/dev/sda1 ro extra", "/boot/loader/entries/m-4.18.0-513.el8.conf")


def test_bls_el8_edit_goes_to_kernelopts_and_takes_managed_names_out_of_tuned_params():
    entry = "version 4.18.0-513.el8\noptions $kernelopts $tuned_params\n"
    cfg = bls_cfg(
        {"m-4.18.0-513.el8": entry},
        [
            ("saved_entry", "m-4.18.0-513.el8"),
            ("kernelopts", "root=/dev/sda1 ro quiet"),
            ("tuned_params", "skew_tick=1 nohz=on isolcpus=2-7 nohz_full=2-7 nosoftlockup"),
        ],
    )
    new = bl.edit(cfg, {"isolcpus": "managed_irq,2-7", "nohz_full": "2-7"})
    assert list(new) == [bl.GRUBENV]  # the entry keeps `options $kernelopts $tuned_params`
    assert len(new[bl.GRUBENV]) == 1024
    assert dict(bl.parse_grubenv(new[bl.GRUBENV])) == {
        "saved_entry": "m-4.18.0-513.el8",
        "kernelopts": "root=/dev/sda1 ro quiet isolcpus=managed_irq,2-7 nohz_full=2-7",
        "tuned_params": "skew_tick=1 nohz=on nosoftlockup",
    }


def test_bls_inline_options_are_edited_as_grubby_does_in_place_and_duplicates_go():
    cfg = bls_cfg(
        {
            "m-5.14.0-427.el9": "version 5.14.0-427.el9\noptions root=/dev/sda1 ro isolcpus=4-7 quiet "
            "isolcpus=5 $tuned_params\n"
        },
        cmdline="root=/dev/sda1 ro isolcpus=4-7\n",
    )
    new = bl.edit(cfg, {"isolcpus": "2-7", "rcu_nocbs": "2-7"}, remove=["quiet"])
    assert new["/boot/loader/entries/m-5.14.0-427.el9.conf"] == (
        "version 5.14.0-427.el9\noptions root=/dev/sda1 ro isolcpus=2-7 $tuned_params rcu_nocbs=2-7\n"
    )
    assert new[bl.KERNEL_CMDLINE] == "root=/dev/sda1 ro isolcpus=2-7 rcu_nocbs=2-7\n"


def test_edit_words_is_what_grubby_args_and_remove_args_give():
    words = cmdline_words('root=/dev/sda1 ro isolcpus=4-7 dyndbg="module x +p" isolcpus=1 $tuned_params')
    assert edit_words(words, {"isolcpus": "2-3", "bare": None}, {"ro"}) == [
        "root=/dev/sda1",
        "isolcpus=2-3",
        'dyndbg="module x +p"',
        "$tuned_params",
        "bare",
    ]


# ----------------------------------------------------------------------------- systemd-boot


def test_systemd_boot_default_glob_picks_the_entry():
    texts = {
        "/efi/loader/loader.conf": "timeout 3\ndefault other-*\n",
        "/efi/loader/entries/m-6.1.0-28.conf": "version 6.1.0-28\noptions root=/dev/sda1 new\n",
        "/efi/loader/entries/other-6.1.0-1.conf": "version 6.1.0-1\noptions root=/dev/sda2 old\n",
    }
    cfg = {"backend": "systemd-boot", "files": sorted(texts), "texts": texts, "found": [], "esp": "/efi"}
    assert bl.next_boot(cfg) == ("root=/dev/sda2 old", "/efi/loader/entries/other-6.1.0-1.conf")
    texts["/efi/loader/loader.conf"] = "timeout 3\n"
    assert bl.next_boot(cfg) == ("root=/dev/sda1 new", "/efi/loader/entries/m-6.1.0-28.conf")


# ----------------------------------------------------------------------------- on the fixtures


@pytest.mark.parametrize(
    "name, backend",
    [
        ("boot-rhel8-tuned", "bls"),
        ("boot-rhel9", "bls"),
        ("boot-ubuntu2204-cloud", "grub-debian"),
        ("boot-debian12", "grub-debian"),
        ("boot-sdboot", "systemd-boot"),
        ("boot-none", "none"),
        ("boot-arch-uki", "uki"),
        ("epyc-9634-nps1", "grub-debian"),
        ("this-machine", "none"),
    ],
)
def test_each_fixture_is_read_as_its_boot_loader(sysroots, name, backend):
    kernel = gather(str(sysroots[name]))["kernel"]
    assert kernel["boot_loader"]["backend"] == backend
    assert (kernel["next_boot_cmdline"] is None) == (backend in ("none", "uki"))


def test_the_next_boot_of_the_rhel8_tuned_fixture_holds_tuneds_isolation(sysroots):
    kernel = gather(str(sysroots["boot-rhel8-tuned"]))["kernel"]
    words = cmdline_words(kernel["next_boot_cmdline"])
    assert [w for w in words if arg_name(w) in ("isolcpus", "nohz_full")] == ["isolcpus=2-7", "nohz_full=2-7"]
    assert kernel["boot_loader"]["next_boot_source"].endswith("-4.18.0-513.5.1.el8_9.x86_64.conf")


@pytest.mark.parametrize("name", BOOT_FIXTURES)
def test_edit_puts_each_argument_once_in_every_entry_and_a_second_edit_changes_nothing(sysroots, name):
    cfg = bl.detect(str(sysroots[name]))
    new = bl.edit(cfg, WANT)
    assert new
    after = dict(cfg, texts={**cfg["texts"], **{p: t for p, t in new.items() if t is not None}})
    for path, line in bl.every_boot_cmdline(after, "root=/dev/sda1 ro").items():
        words = cmdline_words(line)
        for name_, value in WANT.items():
            assert [w for w in words if arg_name(w) == name_] == [name_ if value is None else f"{name_}={value}"], path
    assert bl.edit(after, WANT) == {}
    if bl.GRUBENV in new:
        assert len(new[bl.GRUBENV].encode()) == len(cfg["texts"][bl.GRUBENV].encode()) == 1024


def test_no_boot_configuration_names_what_is_supported(sysroots):
    cfg = bl.detect(str(sysroots["boot-none"]))
    with pytest.raises(bl.BootConfigError, match=r"^no supported boot configuration \(found: none of"):
        bl.edit(cfg, WANT)


def test_unsupported_boot_files_are_named(tmp_path):
    (tmp_path / "boot/extlinux").mkdir(parents=True)
    (tmp_path / "boot/extlinux/extlinux.conf").write_text("LABEL linux\n")
    (tmp_path / "boot/loader/entries").mkdir(parents=True)
    (tmp_path / "boot/loader/entries/x.conf").write_text("options ro\n")  # BLS without GRUB's /boot/grub2
    cfg = bl.detect(str(tmp_path))
    assert cfg["backend"] == "none"
    assert bl.describe_none(cfg).startswith(
        "no supported boot configuration (found: /boot/extlinux/extlinux.conf, /boot/loader/entries/x.conf; "
    )


def test_a_unified_kernel_image_is_named_and_its_arguments_are_never_edited(sysroots, tmp_path):
    """systemd-stub's StubInfo EFI variable says the kernel came from a UKI: the command line is the
    image's own. detect names the images; edit refuses; the bootargs module refuses a change with the
    same line and is not applicable (changes nothing) when asked for none."""
    from tests.modules.runner import run_inprocess

    cfg = bl.detect(str(sysroots["boot-arch-uki"]))
    assert cfg["backend"] == "uki" and cfg["found"] == [
        bl.STUB_INFO,
        "/efi/EFI/Linux/arch-linux-fallback.efi",
        "/efi/EFI/Linux/arch-linux.efi",
    ]
    with pytest.raises(bl.BootConfigError, match=r"^booted from a unified kernel image \(systemd-stub's StubInfo"):
        bl.edit(cfg, WANT)
    from hostkit.lab.fixtures import materialize

    root = materialize("boot-arch-uki", tmp_path / "uki")
    out, rc = run_inprocess("hostkit_bootargs", {"sysroot": str(root), "run_id": "t-uki", "set": {"isolcpus": "2-7"}})
    assert (
        rc
        and out["failed"]
        and out["msg"].startswith("booted from a unified kernel image")
        and out["msg"].endswith(": the kernel arguments isolcpus cannot be set here")
    ), out
    out, rc = run_inprocess("hostkit_bootargs", {"sysroot": str(root), "run_id": "t-uki", "set": {}})
    assert rc == 0 and not out.get("failed") and out["changed"] is False and out["not_applicable"] is True, out


def test_on_a_uki_host_the_plan_refuses_only_its_kernel_arguments(sysroots):
    from hostkit.plan import make_plan
    from hostkit.profiles import apply_overrides, load_profile

    facts = gather(str(sysroots["boot-arch-uki"]))
    profile, pinned = apply_overrides(load_profile("bare-metal-inference"), None)
    plan = make_plan(facts, profile, pinned, host="boot-arch-uki")
    assert plan["refused"] == [] and plan["cmdline_set"] == {} and plan["cmdline_remove"] == []
    refused = plan["refused_parts"]
    assert (
        len(refused) == 1
        and refused[0].startswith("kernel arguments refused: booted from a unified")
        and "not set: isolcpus=managed_irq,2-7 nohz_full=2-7" in refused[0]
    ), refused
    assert plan["isolated"] == "2-7" and plan["sysctl"] and plan["irq"]["affinity"]  # the rest of the plan
    # booted with what the plan wants already (a UKI built with the arguments): nothing to refuse
    want = make_plan(gather(str(sysroots["boot-sdboot"])), profile, pinned, host="x")["cmdline_set"]
    facts["kernel"]["cmdline_args"]["args"].update(want)
    again = make_plan(facts, profile, pinned, host="boot-arch-uki")
    assert again["refused_parts"] == [] and again["cmdline_set"] == {}


# ----------------------------------------------------------------------------- the plan's guard


def test_the_plan_is_refused_without_boot_configuration_even_with_force(sysroots):
    from hostkit.plan import make_plan
    from hostkit.profiles import apply_overrides, load_profile

    facts = gather(str(sysroots["boot-none"]))
    profile, pinned = apply_overrides(load_profile("bare-metal-inference"), None)
    for force in (False, True):
        plan = make_plan(facts, profile, pinned, force=force, host="boot-none")
        assert plan["refused"] == [facts["kernel"]["boot_loader"]["reason"]]
        assert plan["refused"][0].startswith("no supported boot configuration (found: none of /etc/default/grub")
    # Nothing to set and nothing booted to remove (a guest profile): no boot configuration is needed.
    guest, pinned = apply_overrides(load_profile("vmware-guest"), None)
    assert make_plan(facts, guest, pinned, host="boot-none")["refused"] == []
    # The same guest profile on a host booted with isolcpus= it must remove: refused.
    facts["kernel"]["cmdline_args"]["args"]["isolcpus"] = "2-7"
    assert make_plan(facts, guest, pinned, host="boot-none")["refused"] == [facts["kernel"]["boot_loader"]["reason"]]


def test_a_symlinked_grubenv_is_edited_at_its_target_never_over_the_link(tmp_path):
    """EL8 on UEFI: /boot/grub2/grubenv -> ../efi/EFI/redhat/grubenv. The module (run in-process on a
    sysroot) journals and writes the ESP's block, 1024 bytes, and leaves the link a link."""
    from tests.modules.runner import run_inprocess

    root = tmp_path / "root"
    entry = root / "boot/loader/entries/m-4.18.0-513.el8.conf"
    entry.parent.mkdir(parents=True)
    entry.write_text("version 4.18.0-513.el8\noptions $kernelopts $tuned_params\n")
    esp_env = root / "boot/efi/EFI/redhat/grubenv"
    esp_env.parent.mkdir(parents=True)
    esp_env.write_text(bl.format_grubenv([("kernelopts", "root=/dev/sda1 ro"), ("tuned_params", "isolcpus=1")], 1024))
    (root / "boot/grub2").mkdir()
    (root / "boot/grub2/grubenv").symlink_to("../efi/EFI/redhat/grubenv")
    (root / "proc").mkdir()
    (root / "proc/cmdline").write_text("root=/dev/sda1 ro isolcpus=1\n")
    result, rc = run_inprocess("hostkit_bootargs", {"sysroot": str(root), "run_id": "r1", "set": {"isolcpus": "2-3"}})
    assert rc == 0 and result["files"] == ["/boot/efi/EFI/redhat/grubenv"], result
    assert (root / "boot/grub2/grubenv").is_symlink()
    block = esp_env.read_text()
    assert len(block) == 1024
    assert dict(bl.parse_grubenv(block)) == {"kernelopts": "root=/dev/sda1 ro isolcpus=2-3", "tuned_params": ""}
    assert result["next_boot_cmdline"] == "root=/dev/sda1 ro isolcpus=2-3"
