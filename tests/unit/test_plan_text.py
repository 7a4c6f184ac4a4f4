"""The text tells the whole document: every refusal, refused part and warning a command's JSON holds
is in its text output too, in full. ``hostkit plan`` for every fixture x shipped profile (the real
command, in-process); apply's and audit's text from results shaped as the api returns them."""

from __future__ import annotations

import json

import pytest

from hostkit import api
from hostkit.ansible.apply import HostApply
from hostkit.ansible.run import RunResult
from hostkit.cli import apply as apply_cli
from hostkit.cli import audit as audit_cli
from hostkit.cli.main import main
from hostkit.lab.fixtures import fixture_names
from hostkit.profiles import shipped

NOTES = ("refused", "refused_parts", "warnings")


def _plan(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["plan", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("fixture", fixture_names())
def test_the_text_plan_says_every_refusal_and_warning_of_its_json(sysroots, capsys, fixture):
    told = 0
    for profile in shipped():
        args = ("--sysroot", str(sysroots[fixture]), "--profile", profile)
        rc_json, out, err = _plan(capsys, *args, "--json")
        assert rc_json in (0, 3), err
        doc = json.loads(out)
        rc_text, text, err = _plan(capsys, *args)
        assert rc_text == rc_json, err
        for key in NOTES:
            for entry in doc[key]:
                assert entry in text, f"{fixture} / {profile}: {key} entry missing from the text plan: {entry}"
                told += 1
        if doc["refused"]:
            assert f"profile {profile} (REFUSED)" in text
    assert told or fixture not in ("vmware-88vcpu", "boot-arch-uki", "boot-none")  # these must have some


def test_the_uki_text_plan_says_its_kernel_arguments_are_refused(sysroots, capsys):
    rc, text, _ = _plan(capsys, "--sysroot", str(sysroots["boot-arch-uki"]))
    assert rc == 0
    assert "REFUSED (this part only, the rest applies): kernel arguments refused: booted from a unified" in text
    kernel = [line for line in text.splitlines() if line.startswith("why:") and "isolcpus/nohz_full" in line]
    assert kernel and all(line.startswith("why: not set (kernel arguments refused): ") for line in kernel), kernel
    assert not any(line.startswith("kernel cmdline:") for line in text.splitlines())


def test_a_guest_s_refusal_names_its_profile_in_the_text(sysroots, capsys):
    rc, text, _ = _plan(capsys, "--sysroot", str(sysroots["kvm-small"]))
    assert rc == 3
    assert "REFUSED: isolation asked on a virtual machine (kvm)" in text and "(use the virtual-guest profile" in text


# ----------------------------------------------------------------------------- apply, audit

RUN = RunResult("r1", "successful", 0, {}, {}, "/nonexistent", 1.0)


def test_the_apply_text_says_every_refusal_of_its_json(capsys):
    hosts = {
        "vm": HostApply("vm", "refused", refused=["isolation asked on a virtual machine (kvm): " + "x" * 150]),
        "uki": HostApply(
            "uki",
            "changed",
            changed=3,
            refused_parts=[
                "kernel arguments refused: booted from a unified kernel image; the rest of the plan applies"
            ],
            irq_refused=[{"path": "/proc/irq/24/smp_affinity_list", "error": "Input/output error"}],
        ),
    }
    result = api.ApplyResult("r1", False, hosts, RUN)
    apply_cli.print_result(result)
    text = capsys.readouterr().out
    doc = result.to_dict()
    for h in doc["hosts"].values():
        for entry in h["refused"] + h["refused_parts"]:
            assert entry in text, entry
        for r in h["irq_refused"]:
            assert f"{r['path']}: {r['error']}" in text, r


def test_the_audit_text_says_every_refusal_and_tolerated_finding_of_its_json(capsys):
    tolerated = {
        "check": "irq 24",
        "status": "tolerated",
        "expected": "0-1",
        "actual": "0-3",
        "source": "/proc/irq/24/smp_affinity_list",
        "note": "a managed IRQ: the kernel refuses to move it",
    }
    pending = dict(tolerated, check="cmdline isolcpus", status="pending_reboot", note="")
    result = api.AuditResult(
        {
            "vm": {
                "status": "refused",
                "error": "isolation asked on a virtual machine (kvm): vCPUs are not physical cores " + "y" * 100,
                "findings": [],
            },
            "bm": {
                "status": "pending_reboot",
                "counts": {"pass": 3, "pending_reboot": 1, "tolerated": 1},
                "findings": [tolerated, pending],
            },
        },
        strict=False,
    )
    audit_cli.print_result(result, strict=False)
    out = capsys.readouterr()
    text = out.out + out.err
    assert result.hosts["vm"]["error"] in text
    for f in (tolerated, pending):
        assert f"{f['check']}: expected {f['expected']}, got {f['actual']} ({f['source']})" in text
    assert tolerated["note"] in text and "TOLERATED irq 24" in text
    assert "WARNING: reboot pending" in out.err
