"""The real-kernel lab's controller-side logic, without booting anything: VM specs, the QEMU
command line, the image cache's integrity checks, and bad input refused before QEMU starts."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hostkit.errors import BadInput, LabError
from hostkit.lab import qemu, vm
from hostkit.lab.lab import Lab
from hostkit.lab.vm_image import Image


@pytest.mark.parametrize(
    "text, needle",
    [
        ("sockets=2,cores=2,threads=1", "nodes= is required"),
        ("sockets=2,cores=2,threads=1,nodes=2,gpus=1", "unknown key 'gpus'"),
        ("sockets=0,cores=2,threads=1,nodes=1", "sockets must be at least 1"),
        ("sockets=2,cores=two,threads=1,nodes=1", "cores='two' is not a whole number"),
        ("sockets=64,cores=4,threads=1,nodes=1", "256 vCPUs; QEMU's pc machine accepts at most 255"),
        ("sockets=1,cores=2,threads=1,nodes=4", "4 NUMA nodes for 2 vCPUs"),
        ("sockets=3,cores=1,threads=1,nodes=2", "do not split"),
        ("sockets=2,cores=2,threads=1,nodes=2,mem=64", "mem=64 MiB is outside"),
        ("sockets=2,cores=2,threads=1,nodes=2,vendor=xen", "vendor must be one of"),
        ("sockets=2,cores=2,threads=1,nodes=2,nic_queues=4", "one queue pair"),
        ("sockets=2,cores=2,threads=1,nodes=2,nodes=1", "nodes given twice"),
        ("numa3", "is not KEY=VALUE"),
        ("sockets=1,cores=2,threads=1,nodes=1,setup=k8s", "setup must be one of tuned-cpu-partitioning, got 'k8s'"),
    ],
)
def test_bad_specs_name_the_problem(text, needle):
    with pytest.raises(BadInput, match=None) as exc:
        vm.parse_spec(text)
    assert needle in str(exc.value), str(exc.value)


@pytest.mark.parametrize(
    "preset, shape",
    [
        ("numa2", (2, 2, 1, 2)),
        ("smt", (1, 2, 2, 1)),
        ("vmware-like", (4, 1, 1, 1)),
        ("small", (1, 2, 1, 1)),
        ("small-tuned", (1, 2, 1, 1)),
    ],
)
def test_presets(preset, shape):
    s = vm.parse_spec(preset)
    assert (s.sockets, s.cores, s.threads, s.nodes) == shape
    assert vm.parse_spec(s.to_text()) == s  # the text form stored in lab.json round-trips


def test_qemu_argv_carries_topology_numa_smbios_and_a_restricted_network(tmp_path):
    guest = vm.Guest("g", tmp_path, vm.parse_spec("numa2"))
    image = Image(root=tmp_path, key="0" * 16)
    argv = guest.argv(image, "127.0.0.9", 2600, ["-accel", "tcg", "-cpu", "max"])
    joined = " ".join(argv)
    assert "-smp 4,sockets=2,cores=2,threads=1" in joined
    assert "node,nodeid=0,cpus=0-1,memdev=mem0" in joined and "node,nodeid=1,cpus=2-3,memdev=mem1" in joined
    assert "virtio-blk-pci,drive=root,num-queues=4" in joined
    assert "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.9:2600-:22" in joined
    assert f"-cdrom {image.iso} -boot d" in joined  # GRUB from the rescue ISO, never -kernel/-append
    assert "-kernel" not in argv and "-append" not in argv
    vmw = vm.Guest("w", tmp_path, vm.parse_spec("vmware-like")).argv(image, "127.0.0.9", 2600, [])
    assert "type=1,manufacturer=VMware,, Inc.,product=VMware Virtual Platform" in vmw  # QEMU's comma escape


def _fake_entry(root, key="f" * 16):
    img = Image(root=root, key=key)
    img.dir.mkdir(parents=True)
    for name, data in (("base.qcow2", b"qcow2 bytes"), ("boot.iso", b"iso"), ("vmlinuz", b"kernel")):
        (img.dir / name).write_bytes(data)
    import hashlib

    img.manifest.write_text(
        json.dumps(
            {
                "sizes": {"base.qcow2": 11, "boot.iso": 3, "vmlinuz": 6},
                "sha256": hashlib.sha256(b"qcow2 bytes").hexdigest(),
            }
        )
    )
    return img


def test_image_cache_entry_checks(tmp_path):
    img = _fake_entry(tmp_path)
    assert img.problem() is None
    (img.dir / "base.qcow2").write_bytes(b"qcow2 bytez")  # same size, other content: corrupt
    assert img.problem() == "base.qcow2 does not match its recorded sha256"
    (img.dir / "boot.iso").write_bytes(b"is")  # truncated
    assert img.problem() == "boot.iso has the wrong size"
    img.manifest.unlink()  # a build cut off before its last step
    assert img.problem() == "no manifest (never built, or a build was cut off)"
    assert Image(root=tmp_path, key="e" * 16).problem() == "no manifest (never built, or a build was cut off)"


def test_prune_removes_old_recipes_and_partial_builds_only(tmp_path):
    current = _fake_entry(tmp_path, "a" * 16)
    old = _fake_entry(tmp_path, "b" * 16)
    partial = tmp_path / ("c" * 16 + ".partial-xyz")
    partial.mkdir()
    unrelated = tmp_path / "notes"
    unrelated.mkdir()
    current._prune_others()
    assert current.dir.exists() and unrelated.exists()
    assert not old.dir.exists() and not partial.exists()


def test_missing_qemu_is_a_clear_error_and_nothing_is_started(tmp_path, monkeypatch):
    monkeypatch.setattr(
        "hostkit.lab.vm_image.shutil.which", lambda tool: None if tool.startswith("qemu") else "/usr/bin/" + tool
    )
    lab = Lab(tmp_path / "lab")
    with pytest.raises(LabError) as exc:
        lab.up(vm_specs=[("g", "small")], port=2611)
    assert "qemu-system-x86_64 (qemu-system-x86)" in str(exc.value) and "make setup" in str(exc.value)
    assert lab.hosts() == []


def test_port_in_use_refused_before_anything_starts(tmp_path):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.2", 2612))
        s.listen()
        with pytest.raises(LabError) as exc:
            Lab(tmp_path / "lab").up(vm_specs=[("g", "small")], port=2612)
    assert "127.0.0.2:2612" in str(exc.value)
    assert not (tmp_path / "lab" / "lab.json").exists()


@pytest.mark.parametrize("spec", ["g=sockets=0,cores=1,threads=1,nodes=1", "g=numa3", "nospec", "g=smt,extra"])
def test_cli_bad_vm_spec_exit_2_one_line(tmp_path, spec):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hostkit.cli",
            "lab",
            "up",
            "--dir",
            str(tmp_path / "lab"),
            "--vm",
            spec,
            "--port",
            "2613",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "lab").exists()
    assert subprocess.run(["pgrep", "-f", str(tmp_path / "lab")], capture_output=True).returncode == 1


# ---------------------------------------------------------------------------- the accelerator
def test_the_accelerator_is_probed_once_per_qemu_build_and_cached(tmp_path, monkeypatch):
    """KVM or TCG: forced by HOSTKIT_VM_ACCEL; else the cached answer for this QEMU build; else a
    probe with a guest kernel, whose answer is cached; TCG without a kernel to probe with (nothing
    cached, so a later call with one probes)."""
    monkeypatch.setenv("HOSTKIT_VM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HOSTKIT_VM_ACCEL", raising=False)
    build = ["QEMU emulator version 7.2.22"]
    probes: list = []
    monkeypatch.setattr(qemu, "version", lambda: build[0])
    monkeypatch.setattr(qemu, "kvm_runs_guests", lambda kernel: probes.append(kernel) or True)
    cache = tmp_path / "cache" / qemu.ACCEL_FILE
    kernel = tmp_path / "vmlinuz"

    assert qemu.accel_args() == qemu.TCG and qemu.accel_args(kernel) == qemu.TCG  # no kernel (yet)
    assert probes == [] and not cache.exists()
    kernel.write_bytes(b"kernel")
    assert qemu.accel_args(kernel) == qemu.KVM and probes == [kernel]
    assert json.loads(cache.read_text()) == {"qemu": build[0], "kvm": True}
    assert qemu.accel_args() == qemu.KVM and probes == [kernel]  # cached: no second probe
    build[0] = "QEMU emulator version 8.2.0"  # another build probes again
    monkeypatch.setattr(qemu, "kvm_runs_guests", lambda kernel: probes.append(kernel) and False)
    assert qemu.accel_args(kernel) == qemu.TCG and len(probes) == 2
    assert qemu.accel_name(qemu.accel_args()) == "tcg"
    monkeypatch.setenv("HOSTKIT_VM_ACCEL", "kvm")
    assert qemu.accel_args() == qemu.KVM and len(probes) == 2
    cache.write_text("[1]")  # a damaged cache is probed over, not a traceback
    monkeypatch.delenv("HOSTKIT_VM_ACCEL")
    assert qemu.accel_args(kernel) == qemu.TCG and len(probes) == 3


# ---------------------------------------------------------------------------- saved states
TCG = ["-accel", "tcg,thread=multi", "-cpu", "max"]


def _fake_state(root, monkeypatch, preset="small"):
    """A preset's saved state that verifies: the manifest of its two files and of this machine's shape."""
    from hostkit.lab import vm_state

    monkeypatch.setattr(qemu, "version", lambda: "QEMU emulator version 7.2.22")
    img = _fake_entry(root)
    state = vm_state.SavedState(img, preset, TCG)
    state.dir.mkdir(parents=True)
    files = {}
    for path, data in ((state.disk, b"disk"), (state.stream, b"ram and devices")):
        path.write_bytes(data)
        files[path.name] = {"size": len(data), "sha256": vm_state.file_sha256(path)}
    state.manifest.write_text(
        json.dumps(
            {"shape": vm_state.shape(img, state.spec, TCG), "files": files, "qemu": "QEMU emulator version 7.2.22"}
        )
    )
    return state


def test_a_saved_state_verifies_and_each_damage_is_named_in_one_line(tmp_path, monkeypatch):
    state = _fake_state(tmp_path, monkeypatch)
    assert state.problem() is None
    state.stream.write_bytes(b"ram and devicez")  # same size, other bytes
    assert state.problem() == "state.bin does not match its recorded sha256"
    state.disk.write_bytes(b"dis")
    assert state.problem() == "disk.qcow2 has the wrong size"
    state.disk.unlink()
    assert state.problem() == "disk.qcow2 is missing"
    state.manifest.write_text("{not json")
    assert state.problem() == "its manifest is unreadable"
    state.manifest.write_text("[1, 2]")
    assert state.problem() == "its manifest is unreadable"
    state.manifest.unlink()
    assert state.problem() == "none saved yet"


def test_a_state_of_another_qemu_build_or_machine_shape_is_not_resumed(tmp_path, monkeypatch):
    from hostkit.lab import vm_state

    state = _fake_state(tmp_path, monkeypatch)
    monkeypatch.setattr(qemu, "version", lambda: "QEMU emulator version 8.2.0")
    assert state.problem().startswith(
        "saved for another machine shape or QEMU build (QEMU emulator version "
        "7.2.22; this is QEMU emulator version 8.2.0)"
    )
    monkeypatch.setattr(qemu, "version", lambda: "QEMU emulator version 7.2.22")
    assert state.problem() is None
    # the same preset under KVM is another machine: a TCG state is not loaded there
    assert (
        vm_state.SavedState(state.image, "small", ["-accel", "kvm", "-cpu", "host"])
        .problem()
        .startswith("saved for another machine shape")
    )
    # the shape leaves out what differs between guests of one preset: paths, addresses, ports, names
    a = vm.Guest("a", tmp_path / "a", state.spec).argv(state.image, "127.0.0.2", 2522, TCG)
    b = vm.Guest("b", tmp_path / "b", state.spec).argv(state.image, "127.0.0.3", 2600, TCG)
    norm = lambda argv, d, addr, port: [  # noqa: E731
        x.replace(str(d), "DIR")
        .replace(f"{addr}:{port}", "ADDR")
        .replace("hostkit-lab-a", "NAME")
        .replace("hostkit-lab-b", "NAME")
        for x in argv
    ]
    assert a != b and norm(a, tmp_path / "a", "127.0.0.2", 2522) == norm(b, tmp_path / "b", "127.0.0.3", 2600)
    assert vm_state.shape(state.image, vm.parse_spec("numa2"), TCG) != vm_state.shape(state.image, state.spec, TCG)


def test_a_setup_is_part_of_a_presets_identity_and_of_its_states_shape(tmp_path, monkeypatch):
    """small-tuned is small's machine booted into tuned's setup: the same QEMU command line, another
    preset, another saved state (a state of plain small is never resumed as small-tuned), and a
    state saved before the setup's script or check changed is not resumed either."""
    from hostkit.lab import vm_setup, vm_state

    state = _fake_state(tmp_path, monkeypatch)
    small, tuned = vm.parse_spec("small"), vm.parse_spec("small-tuned")
    assert small.to_text() == "sockets=1,cores=2,threads=1,nodes=1,mem=1024,vendor=kvm,nic_queues=1,disk_queues=1"
    assert (vm.preset_of(small), vm.preset_of(tuned)) == ("small", "small-tuned")
    g = tmp_path / "g"
    assert vm.Guest("g", g, small).argv(state.image, "A", 1, TCG) == vm.Guest("g", g, tuned).argv(
        state.image, "A", 1, TCG
    )
    before = vm_state.shape(state.image, tuned, TCG)
    assert before != vm_state.shape(state.image, small, TCG)
    setup = vm_setup.SETUPS["tuned-cpu-partitioning"]
    monkeypatch.setitem(
        vm_setup.SETUPS, "tuned-cpu-partitioning", vm_setup.Setup(setup.about, setup.script + " && true", setup.check)
    )
    assert vm_state.shape(state.image, tuned, TCG) != before


def test_a_damaged_state_is_removed_and_not_rebuilt_in_its_place(tmp_path, monkeypatch):
    state = _fake_state(tmp_path, monkeypatch)
    state.stream.write_bytes(b"ram and devicez")
    built = []
    monkeypatch.setattr(type(state), "build", lambda self, say=None: built.append(self.preset))
    why = state.ensure()
    assert why == (
        "saved state of small: state.bin does not match its recorded sha256 (removed: the next start saves a new one)"
    )
    assert not state.dir.exists() and built == []
    state.ensure()  # the next start: none saved -> saved now
    assert built == ["small"]


class _FakeGuest(vm.Guest):
    """A guest whose QEMU is not started: what the lab asks of it is recorded."""

    calls: list = []

    def prepare(self, backing, client_pub, hostname=None):
        self.calls.append(("prepare", backing.name))

    def launch(self, image, address, port, accel, incoming=False):
        self.calls.append(("launch", incoming))
        return 4242


@pytest.mark.parametrize(
    "resume, spec, outcome, needle",
    [
        (True, "small", "resumed", "resumed from the saved state of small"),
        (True, "sockets=1,cores=3,threads=1,nodes=1", "booted", "a custom spec has no saved state"),
        (False, "small", "booted", "saved state not used: --boot"),
        (True, "smt-refused", "booted", "QEMU did not load the state: bad header (removed: the next start saves"),
    ],
)
def test_the_lab_resumes_a_preset_and_boots_anything_else_saying_why(
    tmp_path, monkeypatch, resume, spec, outcome, needle
):
    from hostkit.lab import vm_state

    state = _fake_state(tmp_path, monkeypatch, "smt" if spec.startswith("smt") else "small")
    monkeypatch.setattr(vm_state.SavedState, "ensure", lambda self, say=None: None)

    def resume_state(self, guest, address, port):
        if spec == "smt-refused":
            raise vm_state.ResumeFailed("QEMU did not load the state: bad header")
        guest.calls.append(("resume", self.preset))
        return 4343

    monkeypatch.setattr(vm_state.SavedState, "resume", resume_state)
    _FakeGuest.calls = []
    said = []
    lab = Lab(tmp_path / "lab")
    lab.client_key.parent.mkdir(parents=True)
    guest = _FakeGuest("g", tmp_path / "g", vm.parse_spec(spec.replace("-refused", "")))
    pid, how = lab._start_guest(guest, state.image, TCG, "127.0.0.2", 2614, resume, said.append)
    assert how == outcome and len(said) == 1 and needle in said[0], said
    if outcome == "resumed":
        assert (pid, _FakeGuest.calls) == (4343, [("prepare", "disk.qcow2"), ("resume", "small")])
    else:  # a boot from the base image, never from a state's disk
        assert (pid, _FakeGuest.calls[-2:]) == (4242, [("prepare", "base.qcow2"), ("launch", False)])
    if spec == "smt-refused":
        assert not state.dir.exists()  # a state QEMU refused is not tried again


def test_a_guest_with_a_setup_booted_the_slow_way_runs_it_and_is_stopped_when_it_fails(tmp_path, monkeypatch):
    from hostkit.lab import vm_setup

    state = _fake_state(tmp_path, monkeypatch)
    ran = []
    monkeypatch.setattr(vm_setup, "run", lambda guest, name, timeout, say=None: ran.append((guest.name, name, timeout)))
    _FakeGuest.calls = []
    lab = Lab(tmp_path / "lab")
    lab.client_key.parent.mkdir(parents=True)
    guest = _FakeGuest("t", tmp_path / "t", vm.parse_spec("small-tuned"))
    assert lab._start_guest(guest, state.image, TCG, "127.0.0.2", 2614, False, None) == (4242, "booted")
    assert lab._start_guest(guest, state.image, TCG, "127.0.0.2", 2614, False, None, boot_timeout=90) == (
        4242,
        "booted",
    )
    # --boot: the setup, which the state would have held; each boot bounded by --boot-timeout
    assert ran == [("t", "tuned-cpu-partitioning", vm.BOOT_TIMEOUT), ("t", "tuned-cpu-partitioning", 90)]

    def fail(guest, name, timeout, say=None):
        raise LabError("setup tuned-cpu-partitioning: t did not boot into it")

    stopped = []
    monkeypatch.setattr(vm_setup, "run", fail)
    monkeypatch.setattr(_FakeGuest, "stop", lambda self, pid: stopped.append(pid), raising=False)
    with pytest.raises(LabError, match="did not boot into it"):
        lab._start_guest(guest, state.image, TCG, "127.0.0.2", 2614, False, None)
    assert stopped == [4242]  # no QEMU left running for a guest the lab could not set up


FAKE_QEMU = """#!/bin/sh
# A stand-in for QEMU under the guest's supervisor: records its arguments, writes its pid file, and
# ends the way the next line of $SCRIPT says: a guest reboot, a guest poweroff, or running until killed.
echo "$*" >> "$DIR/runs"
echo $$ > "$DIR/qemu.pid"
step=$(sed -n "$(wc -l < "$DIR/runs")p" "$DIR/script")
[ "$step" = "fail" ] && exit 1  # QEMU refusing to start: not a line on the console
echo "[    0.000000] Linux version 6.1.0 (fake)" >> "$DIR/console.log"
case "$step" in
  reboot) echo "[   60.0] reboot: Restarting system" >> "$DIR/console.log" ;;
  poweroff) echo "[   60.0] reboot: Power down" >> "$DIR/console.log" ;;
  run) exec sleep 300 ;;
esac
"""


def _supervised(tmp_path, steps: list[str], incoming: bool) -> subprocess.Popen:
    (tmp_path / "script").write_text("\n".join(steps) + "\n")
    qemu = tmp_path / "qemu"
    qemu.write_text(FAKE_QEMU)
    qemu.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "DIR": str(tmp_path),
        "HOSTKIT_SUPERVISOR_PID": str(tmp_path / "supervisor.pid"),
        "HOSTKIT_CONSOLE": str(tmp_path / "console.log"),
        "HOSTKIT_BOOT_MARK": vm.BOOT_MARK.decode(),
        "HOSTKIT_INCOMING": "1" if incoming else "",
    }
    return subprocess.Popen(["sh", "-c", vm.SUPERVISOR, "guest", str(qemu), "-no-reboot"], env=env)


def test_a_guest_reboot_starts_a_fresh_qemu_and_a_poweroff_ends_the_guest(tmp_path):
    """What QEMU's own reset would have done, a fresh QEMU does: each reboot a new process on the same
    arguments, only the first waiting for a saved state (-incoming defer); a poweroff ends it all."""
    proc = _supervised(tmp_path, ["reboot", "reboot", "poweroff"], incoming=True)
    assert proc.wait(timeout=30) == 0
    runs = (tmp_path / "runs").read_text().splitlines()
    assert runs == ["-no-reboot -incoming defer", "-no-reboot", "-no-reboot"], runs
    assert (tmp_path / "supervisor.pid").read_text().strip() == str(proc.pid)


def test_a_stopped_guest_stays_stopped(tmp_path):
    """SIGTERM to the supervisor (the lab's stop) stops its QEMU and starts none, even after the guest
    rebooted before (its console's last restart line is an old one)."""
    proc = _supervised(tmp_path, ["reboot", "run", "run"], incoming=False)
    qemu_pid = None
    for _ in range(200):
        runs = (tmp_path / "runs").read_text().splitlines() if (tmp_path / "runs").exists() else []
        if len(runs) == 2 and (tmp_path / "qemu.pid").exists():
            qemu_pid = int((tmp_path / "qemu.pid").read_text())
            break
        proc.poll()
        subprocess.run(["sleep", "0.05"])
    assert qemu_pid, "the second QEMU never started"
    proc.terminate()
    assert proc.wait(timeout=30) == 143
    assert not Path(f"/proc/{qemu_pid}").exists() or "Z" in Path(f"/proc/{qemu_pid}/stat").read_text().split()[2]
    assert len((tmp_path / "runs").read_text().splitlines()) == 2


def test_a_qemu_that_cannot_start_again_ends_the_guest(tmp_path):
    """After a reboot, a QEMU that exits having written nothing to the console (it could not start)
    is not started again and again: the guest ends, with the supervisor's exit 1."""
    proc = _supervised(tmp_path, ["reboot", "fail", "run"], incoming=False)
    assert proc.wait(timeout=30) == 1
    assert len((tmp_path / "runs").read_text().splitlines()) == 2
