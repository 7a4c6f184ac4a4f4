"""Saved states of booted lab guests: a guest that resumes in seconds instead of booting in minutes.

Beside the cached base image (:mod:`hostkit.lab.vm_image`), each preset topology that a lab
asked for keeps ``states/<preset>/``:

* ``disk.qcow2`` — a copy-on-write overlay of the base image holding what the template guest's
  first boot wrote, never changed afterwards (every resumed guest's overlay stacks on it);
* ``state.bin`` — the booted, idle template's RAM and device state, a QEMU migration stream
  written by ``migrate "exec:cat > FILE"`` (the documented way to save a VM to a file);
* ``manifest.json`` — sizes and sha256 of both, the QEMU build, and the *shape*: the guest's
  QEMU command line with its per-guest paths and ports left out. QEMU loads a state only into a
  machine of the same shape, so a state of another shape or QEMU build is not used.

The template boots with a throwaway identity; before saving, its sshd is stopped, so a resumed
guest answers nobody until it has its own identity. A resume (:meth:`SavedState.resume`) starts
QEMU with ``-incoming defer``, loads the stream (``migrate-incoming``), continues the guest,
sets its wall clock (``guest-set-time``; a restored clock is as old as the state) and runs
``hostkit-reseed`` through the guest agent: the same fw_cfg seed as at boot gives the guest its
own host key, client key, hostname and machine-id, then sshd starts. The VM generation ID changes
with every QEMU start, so the guest kernel reseeds its random number generator too.

A state that is missing, damaged or of another shape is reported in one line and the guest boots
the slow way (:meth:`Lab.up`): nothing is ever resumed from a state that did not verify.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import tempfile
import time
from pathlib import Path

from hostkit.errors import LabError
from hostkit.lab import qemu, vm_setup
from hostkit.lab import vm as vmlab
from hostkit.lab.vm_image import file_sha256

STATE_VERSION = "1"
TEMPLATE = "template"
SAVE_TIMEOUT = 300.0  # seconds to write the migration stream
LOAD_TIMEOUT = 300.0  # seconds to read it back
AGENT_TIMEOUT = 120.0  # seconds for the resumed guest's agent to answer and its reseed to finish


class ResumeFailed(LabError):
    """The saved state could not be used for this guest (the lab boots it instead)."""


def shape(image, spec: vmlab.VmSpec, accel: list[str]) -> str:
    """What a saved state must match to be loaded: the QEMU build, the image, and the guest's QEMU
    command line with the per-guest paths and ports replaced by placeholders."""
    canonical = vmlab.Guest("GUEST", Path("/GUEST"), spec)
    argv = canonical.argv(image, "ADDRESS", 0, accel)
    argv = [a.replace(str(image.dir), "/IMAGE") for a in argv]
    doc = {"qemu": qemu.version(), "image": image.key, "argv": argv, "version": STATE_VERSION}
    if spec.setup:  # booted into a setup: its script and check are part of what was saved
        doc["setup"] = {"name": spec.setup, "fingerprint": vm_setup.SETUPS[spec.setup].fingerprint()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


class SavedState:
    """``<image>/states/<preset>/``: one preset's saved state (see the module docstring)."""

    def __init__(self, image, preset: str, accel: list[str]) -> None:
        self.image = image
        self.preset = preset
        self.spec = vmlab.parse_spec(vmlab.PRESETS[preset])
        self.accel = accel
        self.dir = image.dir / "states" / preset
        self.disk = self.dir / "disk.qcow2"
        self.stream = self.dir / "state.bin"
        self.manifest = self.dir / "manifest.json"

    # ------------------------------------------------------------------ checks
    def problem(self) -> str | None:
        """Why this state cannot be resumed (None when it is complete, intact and of this shape)."""
        try:
            m = json.loads(self.manifest.read_text())
        except FileNotFoundError:
            return "none saved yet"
        except (OSError, ValueError):
            return "its manifest is unreadable"
        if not isinstance(m, dict):
            return "its manifest is unreadable"
        if m.get("shape") != shape(self.image, self.spec, self.accel):
            return f"saved for another machine shape or QEMU build ({m.get('qemu', '?')}; this is {qemu.version()})"
        for path in (self.disk, self.stream):
            want = m.get("files", {}).get(path.name, {})
            if not path.exists():
                return f"{path.name} is missing"
            if path.stat().st_size != want.get("size"):
                return f"{path.name} has the wrong size"
            if file_sha256(path) != want.get("sha256"):
                return f"{path.name} does not match its recorded sha256"
        return None

    def ensure(self, say=None) -> str | None:
        """None when the state is ready to resume, else why not (the caller boots the guest instead).

        A state never saved for this image is saved now (a boot; one build at a time per cache).
        One that exists but does not verify (damaged, or of another shape or QEMU build) is not
        used and is removed, so the next start saves a new one."""
        problem = self.problem()
        if problem is None:
            return None
        self.dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.image.dir.parent / ".build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            problem = self.problem()
            if problem is None:
                return None
            if self.dir.exists():
                self.discard()
                return f"saved state of {self.preset}: {problem} (removed: the next start saves a new one)"
            if say:
                say(f"saved state of {self.preset}: {problem}; saving one (a boot, once per image)")
            try:
                self.build(say)
            except LabError as exc:
                return f"saving the state of {self.preset} failed: {exc}"
        return self.problem()

    def discard(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------------ build
    def build(self, say=None) -> None:
        """Boot the template guest cold, wait until its boot is over (with a ``setup``: run it and
        reboot into it, :mod:`hostkit.lab.vm_setup`), stop its sshd, save the state."""
        work = Path(tempfile.mkdtemp(prefix=f"{self.preset}.partial-", dir=self.dir.parent))
        guest = vmlab.Guest(TEMPLATE, work, self.spec)
        pid = None
        try:
            t0 = time.monotonic()
            guest.prepare(self.image.base, None, hostname="hostkit-template")
            pid = guest.launch(self.image, "127.0.0.1", 0, self.accel)  # port 0: no forward anyone uses
            if self.spec.setup:  # run it, and reboot into it, before the state is saved (its run waits for that boot)
                vm_setup.run(guest, self.spec.setup, vmlab.BOOT_TIMEOUT, say)
            with guest.agent(timeout=10) as agent:
                if not self.spec.setup:
                    vm_setup.wait_booted(agent, vmlab.BOOT_TIMEOUT)
                for argv in (["/bin/systemctl", "stop", "ssh.service"], ["/bin/sync"]):
                    rc, out, err = agent.exec(argv, 120)
                    if rc != 0:
                        raise LabError(f"{' '.join(argv)} in the template: exit {rc}: {err.strip()[-200:]}")
            with guest.qmp() as qmp:
                qmp.call("stop", 30)
                qmp.call("migrate", 30, uri="exec:cat > " + shlex.quote(str(work / "state.bin")))
                status = _wait_migration(qmp, SAVE_TIMEOUT, guest)
                if status.get("status") != "completed":
                    raise LabError(f"saving the template's state: {status.get('error-desc', status.get('status'))}")
                qmp.call("quit", 30)
            for _ in range(200):
                if not guest.is_ours(pid):
                    break
                time.sleep(0.05)
            guest.stop(pid)
            files = {}
            for name in ("disk.qcow2", "state.bin"):
                path = work / name
                files[name] = {"size": path.stat().st_size, "sha256": file_sha256(path)}
            manifest = {
                "preset": self.preset,
                "spec": self.spec.to_text(),
                "shape": shape(self.image, self.spec, self.accel),
                "qemu": qemu.version(),
                "accel": qemu.accel_name(self.accel),
                "files": files,
                "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_seconds": round(time.monotonic() - t0, 1),
            }
            for stale in (
                "qemu.pid",
                "console.log",
                "qemu.argv",
                "qemu.log",
                "hostname",
                "machine-id",
                "authorized_keys",
                "ssh_host_ed25519_key",
                "ssh_host_ed25519_key.pub",
            ):
                (work / stale).unlink(missing_ok=True)  # the template's: no guest's'
            (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
            if self.dir.exists():
                shutil.rmtree(self.dir)
            os.rename(work, self.dir)  # atomic: a cut-off build never looks complete
            if say:
                say(
                    f"saved state of {self.preset} ready in {manifest['build_seconds']} s "
                    f"({files['state.bin']['size'] >> 20} MiB)"
                )
        except BaseException:
            guest.stop(pid)
            raise
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)

    # ------------------------------------------------------------------ resume
    def resume(self, guest: vmlab.Guest, address: str, port: int) -> int:
        """Start ``guest`` from this state with its own identity; QEMU's pid. ResumeFailed (QEMU
        stopped, nothing left running) when QEMU refuses the state or the guest does not take its
        identity."""
        pid = qemu = None
        try:
            pid = guest.launch(self.image, address, port, self.accel, incoming=True)
            qemu = guest.qemu_pid()
            with guest.qmp() as qmp:
                qmp.call("migrate-incoming", 30, uri="exec:cat " + shlex.quote(str(self.stream)))
                status = _wait_migration(qmp, LOAD_TIMEOUT, guest)
                if status.get("status") != "completed":
                    raise ResumeFailed(f"QEMU did not load the state: {status.get('error-desc', status)}")
                qmp.call("cont", 30)
            with guest.agent(timeout=10) as agent:
                agent.sync(AGENT_TIMEOUT)
                agent.call("guest-set-time", 30, time=time.time_ns())
                rc, out, err = agent.exec(["/usr/local/sbin/hostkit-reseed"], AGENT_TIMEOUT)
                if rc != 0:
                    raise ResumeFailed(f"hostkit-reseed in the guest: exit {rc}: {(err or out).strip()[-200:]}")
            return pid
        except LabError as exc:
            # QEMU exits when it refuses a state; QMP may see the broken pipe before that exit is done
            gone = qemu is not None and guest.ended(qemu, within=5.0)
            guest.stop(pid)
            if isinstance(exc, ResumeFailed):
                raise
            why = f"QEMU exited: {guest.log_tail()}" if gone else str(exc)
            raise ResumeFailed(why) from None


def _wait_migration(qmp, timeout: float, guest: vmlab.Guest) -> dict:
    """``query-migrate`` until the migration ended (QEMU exits when an incoming one fails)."""
    deadline = time.monotonic() + timeout
    while True:
        status = qmp.call("query-migrate", 30)
        if status.get("status") in ("completed", "failed", "cancelled"):
            return status
        if time.monotonic() >= deadline:
            return {"status": "failed", "error-desc": f"not done after {timeout:.0f} s"}
        time.sleep(0.05)
