"""hostkit's own connections to inventory hosts (the audit's), made the way Ansible makes them.

:func:`open_testinfra_host` turns an inventory host into a testinfra ``Host`` with the settings
Ansible would use for it (:func:`hostkit.ansible.settings.host_connection`): its
``ansible_connection`` (``ssh`` or ``local``), address, port, user (``ansible_user`` or the
operator's ``remote_user``), key, the operator's ``ssh_args`` (ProxyJump, ``-F``, ...) with
hostkit's appended, ``ansible_ssh_common_args``/``ansible_ssh_extra_args``, and become (sudo).
The connection is OpenSSH's own ``ssh`` (testinfra's ``ssh`` backend): ``~/.ssh/config``,
ssh-agent and ProxyJump work as they do for Ansible.

Host keys: ``StrictHostKeyChecking=yes`` (hostkit's layer) and ``BatchMode=yes`` (never a
prompt), so an unknown or changed key is refused unless the operator weakened host-key
checking explicitly in their Ansible settings. testinfra's ``ansible`` backend would add
neither: an unknown key there depends on ssh's default (``ask``) and ``~/.ssh/config``.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from testinfra.backend.base import CommandResult
from testinfra.backend.local import LocalBackend
from testinfra.backend.ssh import SshBackend
from testinfra.host import Host

from hostkit.ansible.inventory import InventoryHost
from hostkit.ansible.run import summarize_error
from hostkit.ansible.settings import HostConnection, OperatorSettings, host_connection
from hostkit.errors import HostkitError


class HostKeyError(HostkitError):
    """The host presented a key that is not in known_hosts (unknown or changed)."""


class Unreachable(HostkitError):
    """SSH could not reach or log into the host."""


class StrictSshBackend(SshBackend):
    """testinfra's ssh backend; a connection failure (ssh's exit 255) raises :class:`HostKeyError`
    or :class:`Unreachable` with one plain line instead of testinfra's RuntimeError."""

    NAME = "hostkit-ssh"

    def run_ssh(self, command: str) -> CommandResult:
        cmd, cmd_args = self._build_ssh_command(command)
        out = self.run_local(" ".join(cmd), *cmd_args)
        out.command = self.encode(command)
        if out.rc == 255:
            raise connection_error(self.host.name, out.stderr)
        return out

    def run_input(self, data: bytes, command: str, *args: str) -> CommandResult:
        """``run`` with ``data`` on the remote command's stdin (become included), in the same session:
        how the audit sends the agent to a host that does not hold it yet."""
        cmd, cmd_args = self._build_ssh_command(self.get_command(command, *args))
        line = self.encode(self.quote(" ".join(cmd), *cmd_args))
        proc = subprocess.run(line, shell=True, input=data, capture_output=True, check=False)
        out = self.result(proc.returncode, line, proc.stdout, proc.stderr)
        out.command = self.encode(command)
        if out.rc == 255:
            raise connection_error(self.host.name, out.stderr)
        return out


def connection_error(name: str, stderr: str) -> HostkitError:
    text = summarize_error(stderr or "ssh failed (exit 255)")
    if text.startswith("host key"):
        return HostKeyError(f"{name}: {text}")
    return Unreachable(f"{name}: {text}")


def ssh_command_args(conn: HostConnection, control_dir: str | None = None) -> list[str]:
    """Every ssh option of a connection, in Ansible's order, plus BatchMode and a ControlPath."""
    args = list(conn.ssh_args) + ["-o", "BatchMode=yes"]
    if control_dir:
        args += ["-o", f"ControlPath={control_dir}/%C"]
    return args


def open_testinfra_host(
    host: InventoryHost, timeout: int = 10, control_dir: str | None = None, operator: OperatorSettings | None = None
) -> Host:
    """A testinfra Host for an inventory host, connected as Ansible connects to it."""
    conn = host_connection(host.name, host.vars, operator)
    become = {"sudo": conn.become, "sudo_user": conn.become_user if conn.become_user != "root" else None}
    if conn.connection == "local":
        return Host(LocalBackend(**become))
    spec = f"{conn.user}@{conn.address}" if conn.user else conn.address
    if ":" in conn.address:
        spec = f"{conn.user + '@' if conn.user else ''}[{conn.address}]"
    if conn.port:
        spec += f":{conn.port}"
    backend = StrictSshBackend(
        spec,
        ssh_identity_file=conn.key,
        timeout=timeout,
        controlpath=None,
        controlpersist=0,
        ssh_extra_args=shlex.join(ssh_command_args(conn, control_dir)),
        **become,
    )
    return Host(backend)


def put_file(host: Host, local: str | Path, remote: str, chunk: int = 60000) -> None:
    """Copy a file to ``remote`` (mode 0600) through ``host.run`` alone, so it works over any
    testinfra backend (ssh, local, docker, ansible, ...): base64 in chunks small enough for one
    command-line argument (Linux caps one at 128 KiB), into a temporary name renamed at the end
    (a reader never sees half a file)."""
    import base64

    data = base64.b64encode(Path(local).read_bytes()).decode()
    if isinstance(host.backend, LocalBackend) and not host.backend.sudo:
        tmp = Path(f"{remote}.part")
        shutil.copyfile(local, tmp)
        tmp.chmod(0o600)
        tmp.replace(remote)
        return
    first = True
    for i in range(0, len(data), chunk) or [0]:
        op = ">" if first else ">>"
        cmd = host.run(f"umask 077 && printf %%s %s | base64 -d {op} %s", data[i : i + chunk], f"{remote}.part")
        if cmd.rc != 0:
            raise HostkitError(f"copying {Path(local).name} to {remote} failed: {cmd.stderr.strip()[-200:]}")
        first = False
    cmd = host.run("mv -f %s %s", f"{remote}.part", remote)
    if cmd.rc != 0:
        raise HostkitError(f"copying {Path(local).name} to {remote} failed: {cmd.stderr.strip()[-200:]}")
