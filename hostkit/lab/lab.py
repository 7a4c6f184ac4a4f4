"""The lab: real ``sshd`` hosts on loopback addresses, each with its own sysroot.

``Lab(dir).up(...)`` starts one sshd per host on ``127.0.0.2``, ``127.0.0.3``,
... with generated host keys and a generated client key, writes a
``known_hosts`` (strict host-key checking stays on), an ``ssh_config`` and an
Ansible inventory whose hosts carry ``hostkit_sysroot``. ``down()`` stops
exactly the sshd processes it started (by pid, checked against their command
line) and removes the lab directory.

Lab hosts share this machine's kernel and boot loader; only their sysroot
trees are their own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import yaml

from hostkit.core.sysroot import excerpt
from hostkit.errors import BadInput, LabError
from hostkit.jsonfile import check_name, check_shape, read_json
from hostkit.lab import fixtures, qemu, vm_setup
from hostkit.lab import vm as vmlab
from hostkit.lab.ssh_keys import keygen, write_private
from hostkit.lab.vm_image import Image, ensure_image, missing_tools
from hostkit.lab.vm_state import ResumeFailed, SavedState

SSHD = "/usr/sbin/sshd"
DEFAULT_DIR = ".hostkit/lab"
DEFAULT_PORT = 2222
STATE_FILE = "lab.json"
MAX_HOSTS = 200  # 127.0.0.2 .. 127.0.0.201
# SSH connect timeout (seconds) for QEMU guests, set in the lab inventory (``ansible_ssh_timeout``)
# and ssh_config (``ConnectTimeout``, which covers the key exchange too). A TCG guest answers a
# login in 3-4 s at load 3.4 on this 2-core machine, slower beside make test's three suites or
# while it boots. Ansible's default is 10 s, after which its reboot task retries: in a clean-clone
# run of make test, a guest's reboot task took 16 min (9 min for the next guest) where the 8-vCPU
# guest booted in 2 min 16 s. With 60 s, an attempt that reaches a slow guest finishes instead of
# timing out and starting over.
VM_SSH_TIMEOUT = 60
# Keepalives on SSH connections to QEMU guests: QEMU's user networking keeps the host side of a
# connection open when the guest reboots under it (no reset ever comes), and an ssh waiting on it
# waits forever: a reboot task hung so for 9 minutes with the guest long back up. With these, a
# dead connection is given up after 60 s and the reboot task's next attempt reaches the new boot.
VM_SSH_KEEPALIVE = "-o ServerAliveInterval=10 -o ServerAliveCountMax=6"
# How long one probe of a rebooting QEMU guest waits (``hostkit_reboot_connect_timeout``, the
# reboot tasks' ``connect_timeout``). While a guest boots, QEMU's hostfwd accepts every connection
# and nothing answers it, so each probe of Ansible's reboot task waits its whole connect timeout:
# with VM_SSH_TIMEOUT's 60 s a reboot task took 138 s for a small guest that boots in 20-55 s, 52-66 s
# with 15 s (same guest, same hour, alone on this machine).
VM_REBOOT_PROBE_TIMEOUT = 15
# Ansible's reconnection retries for QEMU guests (``ansible_ssh_retries``: a connection that fails
# is tried once more). Under TCG a guest on a saturated host can stall past any one
# connect timeout: in a CI run of make test (the lab suite and two VM lanes on 2 cores, the guest's
# QEMU waiting for a host CPU 70% of the time) a smoke run's first connection to a guest that had
# answered every command before timed out in its banner exchange after 60 s, and the run reported
# the guest unreachable. A guest that is really gone still fails, after the retry.
VM_SSH_RETRIES = 1


@dataclass
class LabHost:
    name: str
    address: str
    port: int
    sysroot: str
    source: str  # fixture name, the directory it was copied from, or the VM spec
    pid: int | None = None  # sshd's, or QEMU's for a VM guest
    kind: str = "sshd"  # "sshd": a sysroot served by sshd on this machine; "vm": a QEMU guest
    vm: str | None = None  # the guest's VmSpec as text (kind "vm")
    started: str | None = None  # a guest's start: "resumed" (from its preset's saved state) or "booted"


HOST_FIELDS = tuple(f.name for f in fields(LabHost))
# What the lab reads of each host in its state file (lab.json), and the type of each.
HOST_SHAPE = {
    "name": str,
    "address": lambda v: None if _is_ipv4(v) else "must be an IPv4 address",
    "port": lambda v: None if _int_in(v, 1, 65535) else "must be a port number (1-65535)",
    "sysroot": str,
    "source": str,
    "pid?": lambda v: None if v is None or _int_in(v, 1, 2**22) else "must be null or a process id (1-4194304)",
    "kind?": lambda v: None if v in ("sshd", "vm") else "must be sshd or vm",
    "vm?": (str, type(None)),
    "started?": (str, type(None)),
}


def _is_ipv4(value) -> bool:
    import ipaddress

    try:
        return isinstance(value, str) and isinstance(ipaddress.ip_address(value), ipaddress.IPv4Address)
    except ValueError:
        return False


def _int_in(value, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _check_free(address: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError as exc:
            raise LabError(
                f"cannot start a lab host on {address}:{port}: {exc.strerror}; "
                f"is another lab running? (hostkit lab status / --port)"
            ) from None


def _wait_port(address: str, port: int, timeout: float, banner_timeout: float = 0.5) -> bool:
    """Until ``timeout``: does an SSH server answer with its banner? (A QEMU hostfwd accepts at
    once and the guest's sshd answers seconds later under TCG: give it ``banner_timeout``.)"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=banner_timeout) as s:
                if s.recv(4).startswith(b"SSH-"):
                    return True
        except OSError:
            time.sleep(0.05)
    return False


def pid_alive(pid: int) -> bool:
    """A live process (not gone, not a zombie waiting for a reaper that never comes)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _pid_is_ours(pid: int, config: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    # sshd rewrites its title ("sshd: /usr/sbin/sshd -f CONFIG [listener] ..."): search the whole line.
    return config.encode() in b" ".join(cmdline)


class Lab:
    def __init__(self, directory: str | os.PathLike = DEFAULT_DIR) -> None:
        self.dir = Path(check_name(Path(directory).absolute(), "lab directory"))

    # ------------------------------------------------------------------ paths
    @property
    def state_file(self) -> Path:
        return self.dir / STATE_FILE

    @property
    def inventory(self) -> Path:
        return self.dir / "inventory.yml"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.dir / "ssh_config"

    @property
    def client_key(self) -> Path:
        return self.dir / "keys" / "client_ed25519"

    def host_dir(self, name: str) -> Path:
        return self.dir / "hosts" / name

    # ------------------------------------------------------------------ state
    def hosts(self) -> list[LabHost]:
        """The hosts the lab's state file records; a damaged file is a LabError naming it (the lab
        cannot tell which processes are its own then: `lab down` says so rather than guess)."""
        if not self.state_file.exists():
            return []
        try:
            data = check_shape(read_json(self.state_file), {"hosts": [HOST_SHAPE]}, "lab.json")
            out = [LabHost(**{k: v for k, v in h.items() if k in HOST_FIELDS}) for h in data["hosts"]]
            for h in out:
                if h.kind == "vm" and not isinstance(h.vm, str):
                    raise BadInput(f"host {excerpt(h.name)}: a vm host without its spec")
        except BadInput as exc:
            raise LabError(
                f"the lab's state file {self.state_file} is damaged ({excerpt(str(exc), 300)}); "
                f"remove {self.dir} after stopping its sshd and QEMU processes by hand"
            ) from None
        return out

    def _save(self, hosts: list[LabHost], port: int) -> None:
        data = {"port": port, "hosts": [asdict(h) for h in hosts]}
        write_private(self.state_file, json.dumps(data, indent=2) + "\n")

    # ------------------------------------------------------------------ up
    def up(
        self,
        n_hosts: int | None = None,
        host_specs: list[tuple[str, str]] | None = None,
        port: int = DEFAULT_PORT,
        progress=None,
        vm_specs: list[tuple[str, str]] | None = None,
        say=None,
        boot_timeout: float | None = None,
        resume: bool = True,
        bmc: bool = False,
    ) -> list[LabHost]:
        """Start the lab. ``host_specs``: (name, fixture-name-or-directory) pairs; ``vm_specs``:
        (name, VM spec or preset) pairs for real-kernel QEMU guests (see :mod:`hostkit.lab.vm`).
        A guest of a preset topology resumes from its saved state (:mod:`hostkit.lab.vm_state`)
        unless ``resume`` is false; any other guest, or one whose state is not usable, boots.
        ``bmc``: one lab BMC (:mod:`hostkit.lab.bmc`) in front of every host, its ``hostkit_bmc`` in
        the inventory; a guest's BMC powers it and reshapes it to its BIOS's topology."""
        if shutil.which(SSHD) is None and not Path(SSHD).exists():
            raise LabError(f"{SSHD} not found: install openssh-server (make setup does)")
        if self.hosts():
            raise LabError(f"a lab is already up in {self.dir} (hostkit lab down --dir {self.dir})")
        guests = [(name, vmlab.parse_spec(text)) for name, text in (vm_specs or [])]
        specs = self._sshd_specs(n_hosts, list(host_specs or []), bool(guests))
        self._validate_specs(specs + [(name, "") for name, _ in guests])
        if not 1 <= port <= 65535:
            raise BadInput(f"--port must be 1-65535, got {port}")
        for i in range(len(specs) + len(guests)):
            _check_free(f"127.0.0.{i + 2}", port)
        image = accel = None
        if guests:
            missing = missing_tools()
            if missing:
                raise LabError("--vm needs " + ", ".join(missing) + ": `make setup` installs them")
            image = ensure_image(progress=say)
            accel = qemu.accel_args(image.kernel)
        authorized = self._prepare_dir()
        hosts: list[LabHost] = []
        try:
            for i, (name, source) in enumerate(specs):
                hosts.append(self._up_sshd_host(name, source, f"127.0.0.{i + 2}", port, authorized))
                self._save(hosts, port)
                if progress:
                    progress(hosts[-1])
            for j, (name, spec) in enumerate(guests):
                address = f"127.0.0.{len(specs) + j + 2}"
                host = LabHost(
                    name=name,
                    address=address,
                    port=port,
                    sysroot="",
                    source=spec.to_text(),
                    kind="vm",
                    vm=spec.to_text(),
                )
                host.pid, host.started = self._start_guest(
                    vmlab.Guest(name, self.host_dir(name), spec),
                    image,
                    accel,
                    address,
                    port,
                    resume,
                    say,
                    boot_timeout=boot_timeout or vmlab.BOOT_TIMEOUT,
                )
                hosts.append(host)
                self._save(hosts, port)
            for h in hosts:
                if h.kind == "vm":
                    self.wait_ssh(h, timeout=boot_timeout or vmlab.BOOT_TIMEOUT, say=say)
                    if progress:
                        progress(h)
            self._write_client_files(hosts, self._start_bmc(hosts) if bmc else {})
        except BaseException:
            self._stop(hosts)
            self._stop_bmc()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        return hosts

    @staticmethod
    def _sshd_specs(n_hosts: int | None, given: list[tuple[str, str]], guests: bool) -> list[tuple[str, str]]:
        """The sshd hosts: the named ones, then ``n_hosts`` fixture hosts ``lab-N`` (every fixture once
        when neither hosts nor guests are named; none when only guests are)."""
        specs = list(given)
        if guests and n_hosts is None and not specs:
            return specs  # VMs only
        if n_hosts is None and specs:
            return specs
        names = fixtures.fixture_names()
        count = len(names) if n_hosts is None else n_hosts
        if count < 1 or count > MAX_HOSTS:
            raise BadInput(f"--hosts must be between 1 and {MAX_HOSTS}, got {count}")
        taken = {n for n, _ in given}
        i = 1
        while len(specs) < count + len(given):
            name = f"lab-{i}"
            i += 1
            if name not in taken:
                specs.append((name, names[(len(specs) - len(given)) % len(names)]))
        return specs

    def _prepare_dir(self) -> Path:
        """The lab directory (0700), sshd's privilege separation directory, the client key; the
        authorized_keys file every host gets."""
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        (self.dir / "keys").mkdir(mode=0o700, exist_ok=True)
        if not self.client_key.exists():
            keygen(self.client_key, "hostkit-lab-client")
        authorized = self.dir / "authorized_keys"
        write_private(authorized, self.client_key.with_suffix(".pub").read_text())
        return authorized

    def _up_sshd_host(self, name: str, source: str, address: str, port: int, authorized: Path) -> LabHost:
        """One sshd host: its sysroot (a fixture, or a copy of a directory) and its sshd, started."""
        root = self.host_dir(name) / "root"
        root.parent.mkdir(parents=True, exist_ok=True)
        if Path(source).is_dir():
            shutil.copytree(source, root, symlinks=True)
        else:
            fixtures.materialize(source, root)
        host = LabHost(name=name, address=address, port=port, sysroot=str(root), source=source)
        host.pid = self._start_sshd(host, authorized)
        return host

    def _start_guest(
        self, guest, image, accel, address: str, port: int, resume: bool, say, *, boot_timeout: float | None = None
    ) -> tuple[int, str]:
        """Resume the guest from its preset's saved state, or boot it (saying why); (pid, how). A guest
        that boots runs its spec's setup, each of its boots bounded by ``boot_timeout`` (``--boot-timeout``)."""
        client_pub = self.client_key.with_suffix(".pub")
        spec = guest.spec
        shape = (
            f"{spec.cpus} vCPUs ({spec.sockets}s/{spec.cores}c/{spec.threads}t), "
            f"{spec.nodes} NUMA node(s), {qemu.accel_name(accel)}"
        )
        preset = vmlab.preset_of(spec)
        if not resume:
            why = "--boot"
        elif preset is None:
            why = "a custom spec has no saved state (presets do: " + ", ".join(vmlab.PRESETS) + ")"
        else:
            state = SavedState(image, preset, accel)
            why = state.ensure(say)
            if why is None:
                t0 = time.monotonic()
                guest.prepare(state.disk, client_pub)
                try:
                    pid = state.resume(guest, address, port)
                except ResumeFailed as exc:
                    state.discard()  # QEMU refused it, or the guest did not take its identity
                    why = f"{exc} (removed: the next start saves a new one)"
                else:
                    if say:
                        say(
                            f"{guest.name}: resumed from the saved state of {preset} in "
                            f"{time.monotonic() - t0:.1f} s, {shape}"
                        )
                    return pid, "resumed"
        if say:
            say(f"{guest.name}: booting, {shape} (saved state not used: {why})")
        guest.prepare(image.base, client_pub)
        pid = guest.launch(image, address, port, accel)
        if spec.setup:  # what the saved state would have held: the setup, and a reboot into it
            try:
                vm_setup.run(guest, spec.setup, boot_timeout or vmlab.BOOT_TIMEOUT, say)
            except BaseException:
                guest.stop(pid)
                raise
        return pid, "booted"

    @staticmethod
    def _validate_specs(specs: list[tuple[str, str]]) -> None:
        seen = set()
        known = set(fixtures.fixture_names())
        for name, source in specs:
            if not name or not all(c.isalnum() or c in "-_." for c in name):
                raise BadInput(f"invalid lab host name {name!r}: use letters, digits, '-', '_' and '.'")
            if name in seen:
                raise BadInput(f"lab host {name!r} given twice")
            seen.add(name)
            if source == "":  # a VM guest: its spec was parsed already
                continue
            if Path(source).is_dir():
                if not (Path(source) / "sys/devices/system/cpu").is_dir():
                    raise BadInput(f"sysroot {source} for lab host {name!r} has no sys/devices/system/cpu")
            elif source not in known:
                raise BadInput(
                    f"lab host {name!r}: {source!r} is neither a directory nor a fixture "
                    f"(fixtures: {', '.join(sorted(known))})"
                )
        if len(specs) > MAX_HOSTS:
            raise BadInput(f"at most {MAX_HOSTS} lab hosts, got {len(specs)}")

    def _start_sshd(self, host: LabHost, authorized: Path) -> int:
        hd = self.host_dir(host.name)
        key = hd / "ssh_host_ed25519_key"
        keygen(key, f"hostkit-lab-{host.name}")
        config = hd / "sshd_config"
        pidfile = hd / "sshd.pid"
        config.write_text(
            "\n".join(
                [
                    "# hostkit lab host " + host.name,
                    f"ListenAddress {host.address}:{host.port}",
                    f"HostKey {key}",
                    f"PidFile {pidfile}",
                    f"AuthorizedKeysFile {authorized}",
                    "PermitRootLogin prohibit-password",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    # The lab directory may live under /tmp (pytest), which StrictModes refuses as a
                    # parent; the lab's own directory is 0700 and authorized_keys 0600 (written here).
                    "StrictModes no",
                    "PrintMotd no",
                    "MaxStartups 64:30:128",
                    "MaxSessions 64",
                    "Subsystem sftp internal-sftp",
                    f"SetEnv HOSTKIT_LAB_HOST={host.name}",
                    "",
                ]
            )
        )
        test = subprocess.run([SSHD, "-t", "-f", str(config)], stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if test.returncode != 0:
            raise LabError(f"sshd rejected the config of {host.name}: {test.stderr.strip()}")
        log = hd / "sshd.log"
        proc = subprocess.run(
            [SSHD, "-f", str(config), "-E", str(log)], stdin=subprocess.DEVNULL, capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise LabError(f"sshd for {host.name} did not start: {proc.stderr.strip() or _tail(log)}")
        if not _wait_port(host.address, host.port, 10):
            raise LabError(f"sshd for {host.name} is not answering on {host.address}:{host.port}: {_tail(log)}")
        for _ in range(100):
            if pidfile.exists() and pidfile.read_text().strip():
                return int(pidfile.read_text().strip())
            time.sleep(0.05)
        raise LabError(f"sshd for {host.name} wrote no pid file {pidfile}")

    def _write_client_files(self, hosts: list[LabHost], host_vars: dict[str, dict] | None = None) -> None:
        """known_hosts, ssh_config and the inventory; ``host_vars``: more variables per host (its
        ``hostkit_bmc``)."""
        kh_lines, cfg_lines = [], []
        for h in hosts:
            pub = (self.host_dir(h.name) / "ssh_host_ed25519_key.pub").read_text().split()
            kh_lines.append(f"[{h.address}]:{h.port} {pub[0]} {pub[1]}")
            cfg_lines += [
                f"Host {h.name}",
                f"  HostName {h.address}",
                f"  Port {h.port}",
                "  User root",
                f"  IdentityFile {self.client_key}",
                "  IdentitiesOnly yes",
                f"  UserKnownHostsFile {self.known_hosts}",
                "  StrictHostKeyChecking yes",
                "  BatchMode yes",
                *(
                    [f"  ConnectTimeout {VM_SSH_TIMEOUT}", "  ServerAliveInterval 10", "  ServerAliveCountMax 6"]
                    if h.kind == "vm"
                    else []
                ),
                "",
            ]
        write_private(self.known_hosts, "\n".join(kh_lines) + "\n")
        write_private(self.ssh_config, "\n".join(cfg_lines))
        inventory = {
            "all": {
                "vars": {
                    "ansible_user": "root",
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "ansible_ssh_private_key_file": str(self.client_key),
                    "ansible_ssh_common_args": (
                        f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes "
                        "-o IdentitiesOnly=yes -o BatchMode=yes"
                    ),
                    "hostkit_known_hosts": str(self.known_hosts),
                    "hostkit_lab": True,
                },
                "children": {
                    "lab": {
                        "hosts": {
                            h.name: {
                                "ansible_host": h.address,
                                "ansible_port": h.port,
                                "hostkit_sysroot": h.sysroot,
                                "hostkit_fixture": h.source,
                                "hostkit_lab_kind": h.kind,
                                **(
                                    {
                                        "ansible_ssh_timeout": VM_SSH_TIMEOUT,
                                        "ansible_ssh_retries": VM_SSH_RETRIES,
                                        "ansible_ssh_extra_args": VM_SSH_KEEPALIVE,
                                        "hostkit_reboot_connect_timeout": VM_REBOOT_PROBE_TIMEOUT,
                                    }
                                    if h.kind == "vm"
                                    else {}
                                ),
                                **(host_vars or {}).get(h.name, {}),
                            }
                            for h in hosts
                        }
                    }
                },
            }
        }
        header = "# Generated by `hostkit lab up`; strict host-key checking against known_hosts stays on.\n"
        write_private(self.inventory, header + yaml.safe_dump(inventory, sort_keys=False))

    # ------------------------------------------------------------------ status / down
    def _guest(self, h: LabHost) -> vmlab.Guest:
        return vmlab.Guest(h.name, self.host_dir(h.name), vmlab.parse_spec(h.vm))

    def _alive(self, h: LabHost) -> bool:
        if h.kind == "vm":
            return self._guest(h).is_ours(h.pid)
        return h.pid is not None and _pid_is_ours(h.pid, str(self.host_dir(h.name) / "sshd_config"))

    def status(self) -> list[dict]:
        out = []
        for h in self.hosts():
            alive = self._alive(h)
            answering = alive and _wait_port(h.address, h.port, 1.0)
            out.append({**asdict(h), "running": alive, "answering": answering})
        return out

    def wait_ssh(self, h: LabHost, timeout: float, say=None) -> float:
        """Wait (bounded) until a guest's sshd answers; seconds waited. Fails fast if QEMU died."""
        t0 = time.monotonic()
        last = t0
        guest = self._guest(h) if h.kind == "vm" else None
        while time.monotonic() - t0 < timeout:
            if guest is not None and not guest.is_ours(h.pid):
                raise LabError(f"{h.name}: QEMU exited while booting: {guest.console_tail()}")
            if _wait_port(h.address, h.port, 10.0, banner_timeout=10.0):
                if say:
                    say(f"{h.name}: sshd answers after {time.monotonic() - t0:.0f} s")
                return time.monotonic() - t0
            if say and time.monotonic() - last >= 30:
                last = time.monotonic()
                say(f"{h.name}: still booting ({last - t0:.0f} s): {guest.console_tail(1) if guest else ''}")
        raise LabError(
            f"{h.name}: sshd did not answer on {h.address}:{h.port} within {timeout:.0f} s"
            + (f"; console: {guest.console_tail()}" if guest else "")
        )

    def _stop(self, hosts: list[LabHost]) -> list[str]:
        stopped = []
        for h in hosts:
            if h.kind == "vm":
                if self._guest(h).stop(h.pid):
                    stopped.append(h.name)
                continue
            config = str(self.host_dir(h.name) / "sshd_config")
            if h.pid and _pid_is_ours(h.pid, config):
                os.kill(h.pid, signal.SIGTERM)
                for _ in range(100):
                    if not _pid_is_ours(h.pid, config):
                        break
                    time.sleep(0.05)
                else:
                    os.kill(h.pid, signal.SIGKILL)
                stopped.append(h.name)
        return stopped

    def kill_host(self, name: str) -> None:
        """Drop a host off the network mid-run (fault tests): SIGKILL its sshd listener and every
        session it serves, so even multiplexed (ControlPersist) connections break."""
        for h in self.hosts():
            if h.name != name or not h.pid:
                continue
            victims = [h.pid] + _children(h.pid)
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def console_log(self, name: str) -> Path:
        """A QEMU guest's serial console, as QEMU writes it (every boot and shutdown of the guest)."""
        host = next((h for h in self.hosts() if h.name == name), None)
        if host is None or host.kind != "vm":
            raise LabError(f"{name}: no QEMU guest of this lab, so no serial console")
        return self._guest(host).console

    def guest_boots(self) -> dict[str, int]:
        """Kernel boots per QEMU guest so far (a resumed start is none; each reboot is one)."""
        return {h.name: self._guest(h).boots() for h in self.hosts() if h.kind == "vm"}

    def stop_host(self, name: str) -> None:
        """Stop one host's sshd (fault tests); ``start_host`` brings it back."""
        self._stop([h for h in self.hosts() if h.name == name])

    def start_host(self, name: str, wait: bool = True) -> None:
        """Start a stopped host again: sshd, or QEMU on the guest's existing disk (a cold boot)."""
        hosts = self.hosts()
        for h in hosts:
            if h.name == name and h.kind == "vm":
                image = Image()
                h.pid = self._guest(h).launch(image, h.address, h.port, qemu.accel_args(image.kernel))
                self._save(hosts, h.port)
                if wait:
                    self.wait_ssh(h, vmlab.BOOT_TIMEOUT)
                return
            if h.name == name:
                config = self.host_dir(name) / "sshd_config"
                log = self.host_dir(name) / "sshd.log"
                subprocess.run([SSHD, "-f", str(config), "-E", str(log)], stdin=subprocess.DEVNULL, check=True)
                if not _wait_port(h.address, h.port, 10):
                    raise LabError(f"sshd for {name} did not come back")
                h.pid = int((self.host_dir(name) / "sshd.pid").read_text().strip())
        self._save(hosts, hosts[0].port if hosts else DEFAULT_PORT)

    def reshape(self, name: str, spec_text: str) -> None:
        """A stopped guest's topology from its next start on (its BMC's BIOS changed NPS or SMT): the
        same disk, a new QEMU -smp/-numa. A spec that no saved state holds cold-boots."""
        spec = vmlab.parse_spec(spec_text)
        hosts = self.hosts()
        for h in hosts:
            if h.name == name and h.kind == "vm":
                if self._alive(h):
                    raise LabError(f"{name}: reshaping a running guest")
                h.vm = h.source = spec.to_text()
                self._save(hosts, h.port)
                return
        raise LabError(f"{name}: no QEMU guest of this lab")

    def qemu_pid(self, name: str) -> int | None:
        """The pid of a guest's QEMU now (a reboot starts a new one; the host's ``pid`` is its supervisor's)."""
        host = next((h for h in self.hosts() if h.name == name and h.kind == "vm"), None)
        if host is None:
            raise LabError(f"{name}: no QEMU guest of this lab")
        return self._guest(host).qemu_pid()

    def guest_running(self, name: str) -> bool:
        return any(h.name == name and self._alive(h) for h in self.hosts())

    def powerdown(self, name: str) -> None:
        """ACPI power button: the guest shuts down and its QEMU exits (a graceful shutdown)."""
        for h in self.hosts():
            if h.name == name and h.kind == "vm" and self._alive(h):
                with self._guest(h).qmp() as qmp:
                    qmp.call("system_powerdown", 30)

    # ------------------------------------------------------------------ the BMC
    BMC_FIXTURE = "hpe-dl385-gen10plus-v2"  # AMD: NPS through NumaMemoryDomainsPerSocket, SMT through ProcSMT

    @property
    def bmc_file(self) -> Path:
        return self.dir / "bmc" / "bmc.json"

    def _start_bmc(self, hosts: list[LabHost]) -> dict[str, dict]:
        """The lab's BMC, started and recorded; each host's ``hostkit_bmc`` for the inventory."""
        from hostkit.lab import bmc as lab_bmc

        b = lab_bmc.start(
            {h.name: self.BMC_FIXTURE for h in hosts},
            self.dir / "bmc",
            guests={h.name: {"dir": str(self.dir), "vm": h.vm} for h in hosts if h.kind == "vm"},
        )
        write_private(self.bmc_file, json.dumps({"pid": b.proc.pid, "url": b.url}) + "\n")
        return {h.name: {"hostkit_bmc": b.host_var(h.name)} for h in hosts}

    def _stop_bmc(self) -> bool:
        try:
            pid = int(json.loads(self.bmc_file.read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return False
        if not _pid_is_ours(pid, str(self.dir / "bmc" / "config.json")):
            return False
        os.kill(pid, signal.SIGTERM)
        return True

    def down(self) -> list[str]:
        if not self.dir.exists():
            return []
        self._stop_bmc()  # the BMC first: nothing may start a guest while the lab goes down
        stopped = self._stop(self.hosts())
        shutil.rmtree(self.dir, ignore_errors=True)
        return stopped


def _children(pid: int) -> list[int]:
    """Descendants of ``pid`` (the sshd sessions under a listener)."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _tail(path: Path, n: int = 5) -> str:
    try:
        return " | ".join(path.read_text().strip().splitlines()[-n:])
    except OSError:
        return "(no log)"
