"""The lab's BMCs: one Redfish service (sushy-tools' emulator, :mod:`.server`) on loopback with TLS
and basic authentication, one system per lab host, each serving a vendor fixture's BIOS
(``fixtures/*.yml``, copied from real BMCs' mockups) through :mod:`.driver`.

:func:`start` returns a :class:`LabBmc`: its URL, its CA file (the self-signed certificate) and the
``hostkit_bmc`` value of each system; :meth:`LabBmc.stop` ends it.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from hostkit.errors import LabError
from hostkit.yamlfile import parse_yaml

START_TIMEOUT = 30


def fixture_names() -> list[str]:
    d = resources.files("hostkit.lab.bmc").joinpath("fixtures")
    return sorted(p.name[:-4] for p in d.iterdir() if p.name.endswith(".yml"))


def load_fixture(name: str) -> dict:
    if name not in fixture_names():
        raise LabError(f"no BMC fixture {name!r} (known: {', '.join(fixture_names())})")
    text = resources.files("hostkit.lab.bmc").joinpath("fixtures", f"{name}.yml").read_text()
    return parse_yaml(text, f"BMC fixture {name}")


@dataclass
class LabBmc:
    url: str
    ca_file: str
    username: str
    password: str
    systems: dict[str, str]  # lab host -> system id
    proc: subprocess.Popen
    workdir: Path
    log: Path
    extra: dict = field(default_factory=dict)

    def host_var(self, host: str, **over) -> dict:
        """The ``hostkit_bmc`` of one lab host."""
        return {
            "address": self.url,
            "username": self.username,
            "password": self.password,
            "ca_file": self.ca_file,
            "system": self.systems[host],
            **over,
        }

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _certificate(workdir: Path) -> tuple[str, str]:
    cert, key = workdir / "bmc.crt", workdir / "bmc.key"
    proc = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise LabError(f"openssl could not make the lab BMC's certificate: {proc.stderr.strip()[-300:]}")
    return str(cert), str(key)


def _auth_file(workdir: Path, username: str, password: str) -> str:
    import bcrypt

    p = workdir / "htpasswd"
    p.write_text(f"{username}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()}\n")
    return str(p)


def start(
    hosts: dict[str, str],
    workdir: str | os.PathLike,
    *,
    applies_settings: dict[str, bool] | None = None,
    delay_s: float = 0,
    username: str = "hostkit",
    guests: dict[str, dict] | None = None,
) -> LabBmc:
    """One lab BMC serving a system per ``hosts`` entry (lab host -> fixture name), powered on.
    ``guests``: lab host -> {"dir": the lab's directory, "vm": the guest's spec} for the hosts that
    are QEMU guests of a lab: the BMC powers them, and their BIOS follows their topology."""
    from hostkit.lab.bmc.topology import attributes_for_guest

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(12)
    cert, key = _certificate(workdir)
    systems, ids = [], {}
    for host, fixture in hosts.items():
        sid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"hostkit-lab-bmc/{host}"))
        ids[host] = sid
        fx = load_fixture(fixture)
        guest = (guests or {}).get(host)
        if guest:
            if not fx.get("lab_topology"):
                raise LabError(f"BMC fixture {fixture} has no lab_topology: it cannot stand in front of guest {host}")
            fx["attributes"].update(attributes_for_guest(guest["vm"], fx))
        systems.append(
            {
                "uuid": sid,
                "name": host,
                "power_state": "On",
                "nics": [],
                "fixture": fx,
                "applies_settings": (applies_settings or {}).get(host, True),
                **({"lab": {"dir": str(guest["dir"]), "host": host}} if guest else {}),
            }
        )
    registries: dict[str, str] = {}
    for fixture in hosts.values():
        reg = load_fixture(fixture)["registry"]["id"]
        if registries.setdefault(reg, fixture) != fixture:
            raise LabError(
                f"one lab BMC cannot serve {fixture} beside {registries[reg]}: both name the attribute "
                f"registry {reg} (start one BMC for each)"
            )
    port = _free_port()
    config = {
        "systems": systems,
        "port": port,
        "cert": cert,
        "key": key,
        "auth_file": _auth_file(workdir, username, password),
        "state_dir": str(workdir / "state"),
        "delay_s": delay_s,
    }
    (workdir / "config.json").write_text(json.dumps(config))
    log = workdir / "bmc.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hostkit.lab.bmc.server", str(workdir / "config.json")],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    bmc = LabBmc(f"https://127.0.0.1:{port}", cert, username, password, ids, proc, workdir, log)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError(f"the lab BMC exited ({proc.returncode}): {log.read_text()[-500:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return bmc
        except OSError:
            time.sleep(0.2)
    bmc.stop()
    raise LabError(f"the lab BMC did not listen on 127.0.0.1:{port} within {START_TIMEOUT} s")
