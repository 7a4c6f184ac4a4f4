"""SSH for hostkit's own connections (testinfra, paramiko), with host keys verified.

testinfra's paramiko backend sets ``WarningPolicy`` and never loads
``known_hosts``: it would talk to an impostor. :class:`StrictParamikoBackend`
loads the inventory's ``known_hosts`` and refuses unknown or changed keys.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import paramiko
from testinfra.backend.paramiko import ParamikoBackend
from testinfra.host import Host

from hostkit.ansible.inventory import InventoryHost
from hostkit.errors import HostkitError


class HostKeyError(HostkitError):
    """The host presented a key that is not in known_hosts (unknown or changed)."""


class StrictParamikoBackend(ParamikoBackend):
    NAME = "hostkit-paramiko"

    def __init__(self, hostspec: str, known_hosts: str | None = None, *args: Any, **kwargs: Any) -> None:
        self.known_hosts = known_hosts
        super().__init__(hostspec, *args, **kwargs)

    @functools.cached_property
    def client(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        if self.known_hosts:
            client.load_host_keys(self.known_hosts)
        else:
            client.load_system_host_keys()
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        cfg = {
            "hostname": self.host.name,
            "port": int(self.host.port) if self.host.port else 22,
            "username": self.host.user or "root",
            "timeout": self.timeout,
            "allow_agent": False,
            "look_for_keys": False,
        }
        if self.ssh_identity_file:
            cfg["key_filename"] = self.ssh_identity_file
        try:
            client.connect(**cfg)
        except paramiko.BadHostKeyException as exc:
            raise HostKeyError(f"{self.host.name}:{cfg['port']}: host key CHANGED "
                               f"(got {exc.key.get_name()} {exc.key.get_base64()[:16]}...); refusing to connect") from None
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise HostKeyError(f"{self.host.name}:{cfg['port']}: host key unknown to "
                                   f"{self.known_hosts or 'known_hosts'}; refusing to connect") from None
            raise
        return client


def open_testinfra_host(host: InventoryHost, timeout: int = 10) -> Host:
    """A testinfra Host for an inventory host, over SSH with verified host keys."""
    v = host.vars
    address = v.get("ansible_host", host.name)
    port = v.get("ansible_port", 22)
    user = v.get("ansible_user", "root")
    known_hosts = v.get("hostkit_known_hosts") or os.path.expanduser("~/.ssh/known_hosts")
    backend = StrictParamikoBackend(
        f"{user}@{address}:{port}",
        known_hosts=known_hosts,
        ssh_identity_file=v.get("ansible_ssh_private_key_file"),
        timeout=timeout,
    )
    return Host(backend)
