"""Package versions and the microcode revision in the facts (hostkit.facts.packages), read from a
sysroot whose dpkg status holds stanzas copied from real Debian 12 hosts (this project's lab guest
image and its CI machine; long fields such as Description and Depends left out) and one held
package reduced to the fields read (kubelet, pinned with ``apt-mark hold`` as the Kubernetes
install guide does: dpkg's Status ``hold ok installed``), and what drift makes of an upgrade:
noted beside the drift it may explain, never drift of its own."""

from __future__ import annotations

import json

import pytest

from hostkit.drift import state, verdict
from hostkit.facts import gather
from hostkit.lab.fixtures import materialize

STATUS = """\
Package: irqbalance
Status: install ok installed
Priority: optional
Section: utils
Installed-Size: 157
Maintainer: Paride Legovini <paride@debian.org>
Architecture: amd64
Version: 1.9.2-1
Pre-Depends: init-system-helpers (>= 1.54~)
Conflicts: runit (<< 2.1.2-51~)

Package: containerd
Status: install ok installed
Priority: optional
Section: admin
Installed-Size: 98393
Maintainer: Debian Go Packaging Team <team+pkg-go@tracker.debian.org>
Architecture: amd64
Version: 1.6.20~ds1-1+deb12u3
Depends: runc (>= 0.1.0~), libc6 (>= 2.34)
Conffiles:
 /etc/containerd/config.toml 773cf1c5a249197a8ef37a08ac168414
Description: open and reliable container runtime
 Containerd is an industry-standard container runtime with an emphasis on
 simplicity, robustness and portability.

Package: kubelet
Status: hold ok installed
Version: 1.30.14-1.1

Package: linux-image-{release}
Status: install ok installed
Priority: optional
Section: kernel
Installed-Size: 400842
Maintainer: Debian Kernel Team <debian-kernel@lists.debian.org>
Architecture: amd64
Source: linux-signed-amd64 (6.1.192+3)
Version: 6.1.192-3

Package: tuned
Status: deinstall ok config-files
Priority: optional
Section: admin
Installed-Size: 710
Maintainer: Evgeni Golov <evgeni@debian.org>
Architecture: all
Version: 2.20.0-1
"""


@pytest.fixture
def root(tmp_path):
    return materialize("epyc-9634-nps1", tmp_path / "root")


def with_status(root, text: str) -> dict:
    release = (root / "proc/sys/kernel/osrelease").read_text().strip()
    (root / "var/lib/dpkg").mkdir(parents=True, exist_ok=True)
    (root / "var/lib/dpkg/status").write_text(text.format(release=release))
    return gather(str(root))


def test_dpkg_versions_of_what_hostkit_tunes_and_the_running_kernel_s_image(root):
    pk = with_status(root, STATUS)["packages"]
    assert pk["manager"] == "dpkg"
    # tuned removed with its configuration kept ("deinstall ok config-files") is not installed; kubelet
    # pinned with apt-mark hold ("hold ok installed") is
    assert pk["versions"] == {
        "containerd": "1.6.20~ds1-1+deb12u3",
        "irqbalance": "1.9.2-1",
        "kernel": "6.1.192-3",
        "kubelet": "1.30.14-1.1",
    }


def test_an_rpm_host_says_its_database_is_not_read_and_a_bare_sysroot_that_it_has_none(root):
    assert with_status(root, "")["packages"]["versions"] == {}  # dpkg, nothing of ours installed
    (root / "var/lib/dpkg/status").unlink()
    pk = gather(str(root))["packages"]
    assert (pk["manager"], pk["versions"]) == (None, None) and "no package database" in pk["reason"]
    (root / "var/lib/rpm").mkdir(parents=True)
    pk = gather(str(root))["packages"]
    assert (pk["manager"], pk["versions"]) == ("rpm", None)
    assert pk["reason"] == "/var/lib/rpm: hostkit does not read RPM databases yet"


def test_microcode_is_every_cpu_s_revision_once(root):
    cpuinfo = root / "proc/cpuinfo"
    text = cpuinfo.read_text()
    blocks = [b for b in text.split("\n\n") if b.strip()]
    assert len(blocks) > 2 and "microcode" not in text  # the fixture's cpuinfo has no microcode line

    def revised(revisions):
        cpuinfo.write_text("\n\n".join(f"{b}\nmicrocode\t: {r}" for b, r in zip(blocks, revisions)) + "\n")
        return gather(str(root))["packages"]["microcode"]

    assert revised(["0xa101148"] * len(blocks)) == "0xa101148"
    assert revised(["0xa101148"] + ["0xa101144"] * (len(blocks) - 1)) == "0xa101148,0xa101144"  # a partial load


def test_an_upgrade_is_noted_beside_the_drift_it_explains_never_drift_of_its_own(root):
    facts = with_status(root, STATUS)
    before = state.effective_state(facts)
    assert before["packages"] == {
        "containerd": "1.6.20~ds1-1+deb12u3",
        "irqbalance": "1.9.2-1",
        "kernel": "6.1.192-3",
        "kubelet": "1.30.14-1.1",
        "CPU microcode": None,
    }
    upgraded = json.loads(json.dumps(before))
    upgraded["packages"]["irqbalance"] = "1.9.4-1"
    diffs = state.differences(before, upgraded, None)
    assert [(d["layer"], d["key"], d["before"], d["now"], d["plan"]) for d in diffs] == [
        ("packages", "irqbalance", "1.9.2-1", "1.9.4-1", "not planned")
    ]
    counted = verdict.counted_differences(diffs)
    doc = verdict.verdict("accepted", diffs, counted, None)
    assert doc["verdict"] == "same" and doc["noted_only"] == diffs

    undone = json.loads(json.dumps(upgraded))
    undone["kernel"]["kernel.sched_rt_runtime_us"] = 500000  # what the upgrade's maintainer script left
    plan = {"sysctl": {"kernel.sched_rt_runtime_us": -1}}
    diffs = state.differences(before, undone, plan)
    counted = verdict.counted_differences(diffs)
    doc = verdict.verdict("accepted", diffs, counted, None)
    assert doc["verdict"] == "state drifted"
    assert [d["key"] for d in doc["differences"]] == ["kernel.sched_rt_runtime_us", "irqbalance"]  # the cause first


def test_a_kernel_upgrade_booted_is_noted_and_its_missing_arguments_are_the_drift(root):
    facts = with_status(root, STATUS)
    before = state.effective_state(facts)
    before["boot"]["cmdline isolcpus"] = "managed_irq,2-83"  # a tuned host, booted with its arguments
    upgraded = json.loads(json.dumps(before))
    upgraded["kernel"]["release"] = "6.1.0-58-amd64"
    upgraded["packages"]["kernel"] = "6.1.193-1"
    diffs = state.differences(before, upgraded, None)
    assert verdict.counted_differences(diffs) == [] and len(diffs) == 2  # an upgrade, noted
    upgraded["boot"]["cmdline isolcpus"] = None  # ... booted without hostkit's arguments
    plan = {"cmdline_set": {"isolcpus": "managed_irq,2-83"}}
    counted = verdict.counted_differences(state.differences(before, upgraded, plan))
    assert [(d["layer"], d["key"], d["plan"]) for d in counted] == [
        ("boot", "cmdline isolcpus", "undoing a planned value")
    ], counted


def test_a_baseline_taken_before_packages_were_read_compares_none_of_them(root):
    facts = with_status(root, STATUS)
    old = state.effective_state(facts)
    del old["packages"]
    assert state.differences(old, state.effective_state(facts), None) == []
