"""The real-kernel lab's own promises, on real QEMU guests: guests resumed from one saved state are
machines of their own (host key, hostname, machine-id, clock), a state QEMU refuses falls back to a
boot in one line, and ``lab down`` leaves nothing of the lab behind.

The saved states are the cache's (``hostkit.lab.vm_state``), made once per image by the first start
of each preset; the refused state is a damaged copy in a cache of this test's own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from hostkit.lab import qemu, vm_state
from hostkit.lab.vm_image import Image
from tests.vmutil import ssh, start_vm_lab, stop_vm_lab


def qemu_processes(path) -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"qemu-system.*{path}"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def sockets(lab) -> list:
    """The UNIX sockets of the lab's guests' QEMUs (in their directories, or /tmp for long paths)."""
    return [s for h in lab.hosts() if h.kind == "vm" for s in (lab._guest(h).qmp_socket, lab._guest(h).agent_socket)]


def left_behind(lab, socks: list) -> dict:
    """What of a stopped lab still exists: QEMU processes, its directory, its guests' sockets."""
    return {"qemu": qemu_processes(lab.dir), "dir": lab.dir.exists(), "sockets": [s for s in socks if s.exists()]}


def test_two_guests_resumed_from_one_state_are_two_machines(tmp_path):
    names = ["r1", "r2"]
    t0 = time.time()
    lab = start_vm_lab(tmp_path / "lab", [(n, "small") for n in names])
    socks = sockets(lab)
    try:
        hosts = {h.name: h for h in lab.hosts()}
        assert {n: hosts[n].started for n in names} == {"r1": "resumed", "r2": "resumed"}
        known = {line.split()[0]: line.split()[2] for line in lab.known_hosts.read_text().splitlines()}
        seen = {}
        for n in names:
            h = hosts[n]
            scan = subprocess.run(
                ["ssh-keyscan", "-t", "ed25519", "-p", str(h.port), h.address],
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout.split()
            seen[n] = scan[2]  # the key the guest's sshd serves
            assert seen[n] == known[f"[{h.address}]:{h.port}"], n  # its own, the one the lab trusts
            out = ssh(lab, n, "hostname; cat /etc/machine-id; date +%s").split()
            assert out[0] == n
            assert out[1] == (lab.host_dir(n) / "machine-id").read_text().strip()
            assert abs(int(out[2]) - time.time()) < 30, "the restored clock was not set"  # stale by the state's age
            seen[n + "-id"] = out[1]
        assert seen["r1"] != seen["r2"] and seen["r1-id"] != seen["r2-id"]
        assert lab.guest_boots() == {"r1": 0, "r2": 0}  # resumed: no kernel booted
        # strict host-key checking stays: r2 presented with r1's key is refused
        wrong = tmp_path / "known_hosts"
        wrong.write_text(f"[{hosts['r2'].address}]:{hosts['r2'].port} ssh-ed25519 {seen['r1']}\n")
        proc = subprocess.run(
            ["ssh", "-F", str(lab.ssh_config), "-o", f"UserKnownHostsFile={wrong}", "r2", "true"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 255 and "REMOTE HOST IDENTIFICATION HAS CHANGED" in proc.stderr, proc.stderr
        print(f"\ntwo guests resumed and checked in {time.time() - t0:.0f} s")
    finally:
        stop_vm_lab(lab, "vm-lab-resume")
    assert left_behind(lab, socks) == {"qemu": [], "dir": False, "sockets": []}
    image = Image()
    assert vm_state.SavedState(image, "small", []).stream.exists()  # the cache's state stays for the next lab


@pytest.fixture
def damaged_cache(tmp_path, monkeypatch):
    """A cache of this test's own: the real image (linked) and a copy of small's saved state whose
    stream was cut short and whose manifest was rewritten to match it, so only QEMU can tell."""
    real = Image()
    state = vm_state.SavedState(real, "small", qemu.accel_args(real.kernel))
    if state.ensure(print) is not None:
        pytest.skip(f"no saved state of small to damage: {state.problem()}")
    root = tmp_path / "cache"
    img = Image(root=root)
    img.dir.mkdir(parents=True)
    for name in ("base.qcow2", "boot.iso", "vmlinuz", "manifest.json"):
        os.symlink(real.dir / name, img.dir / name)
    shutil.copy(qemu.cache_dir() / qemu.ACCEL_FILE, root / qemu.ACCEL_FILE)
    copy = vm_state.SavedState(img, "small", state.accel)
    copy.dir.mkdir(parents=True)
    shutil.copy(state.disk, copy.disk)
    with open(state.stream, "rb") as src, open(copy.stream, "wb") as dst:
        dst.write(src.read(state.stream.stat().st_size // 2))
    manifest = json.loads(state.manifest.read_text())
    manifest["files"]["state.bin"] = {"size": copy.stream.stat().st_size, "sha256": vm_state.file_sha256(copy.stream)}
    copy.manifest.write_text(json.dumps(manifest))
    assert copy.problem() is None  # the checksums agree: the damage is for QEMU to find
    monkeypatch.setenv("HOSTKIT_VM_CACHE", str(root))
    return copy


def test_a_state_qemu_refuses_boots_the_guest_instead_saying_why_in_one_line(tmp_path, damaged_cache, capsys):
    lab = start_vm_lab(tmp_path / "lab", [("b1", "small")])
    socks = sockets(lab)
    try:
        out = capsys.readouterr().out
        said = [line for line in out.splitlines() if "saved state not used" in line]
        assert len(said) == 1 and "QEMU" in said[0] and "removed: the next start saves a new one" in said[0], out
        assert [h.started for h in lab.hosts()] == ["booted"]
        assert ssh(lab, "b1", "hostname").strip() == "b1"
        assert not damaged_cache.dir.exists()
        assert lab.guest_boots() == {"b1": 1}
    finally:
        stop_vm_lab(lab, "vm-lab-refused")
    assert left_behind(lab, socks) == {"qemu": [], "dir": False, "sockets": []}
