"""The operator's Ansible settings, with hostkit's needs layered on top (never replacing them).

The operator's ``ansible.cfg`` is found as Ansible finds it (:func:`operator_config_file`):
``ANSIBLE_CONFIG``, then ``./ansible.cfg`` of the directory hostkit was started in (skipped when
that directory is world-writable, as Ansible does), then ``~/.ansible.cfg``, then
``/etc/ansible/ansible.cfg``. The project's own ``ansible.cfg`` (in a hostkit checkout, for
ansible-lint and hand runs of the playbooks) is not an operator's: found in the working
directory, it is passed over and the lookup goes on, so a checkout and an installed hostkit read
the same operator settings. Values are read with Ansible's own configuration machinery
(:class:`ansible.config.manager.ConfigManager`), environment variables (``ANSIBLE_*``) included.

hostkit then adds, through ansible-runner's environment, only what it needs
(:func:`runner_env`):

* its collection ``hostkit.tuning`` (the playbooks and roles call its modules by FQCN) and its
  roles *before* the operator's paths (``collections_path``, ``roles_path``): hostkit's names win
  (an older ``hostkit.tuning`` the operator installed is not used by hostkit's runs), the
  operator's collections and roles stay reachable. In a checkout the collection is a view of it
  (:func:`hostkit.paths.checkout_collection_view`), whose modules' ``ansible.module_utils``
  imports need ``module_utils/`` before the operator's;
* its SSH arguments *after* the operator's ``ssh_args``: the operator's ProxyJump, ciphers,
  ``-F`` and the like come first, and OpenSSH takes the first value of an option;
* ``StrictHostKeyChecking=yes`` unless the operator weakened host-key checking explicitly
  (``host_key_checking = False``, ``ANSIBLE_HOST_KEY_CHECKING``, or their own
  ``StrictHostKeyChecking`` in ``ssh_args``); on the command line it wins over
  ``~/.ssh/config``;
* one SSH control-socket directory per run.

Everything else (``remote_user``, ``timeout``, ``private_key_file``, become, ``pipelining`` when
set, callbacks) is the operator's. The audit builds its SSH command lines from the same layer
(:func:`ssh_args_for_host`), so it reaches a host the way Ansible does.
"""

from __future__ import annotations

import functools
import os
import shlex
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hostkit.errors import BadInput

# hostkit's own SSH arguments when the operator set no ssh_args. No -C (Ansible's default):
# compression only burns CPU on the fast links (and loopback) hostkit runs over.
HOSTKIT_SSH_ARGS = "-o ControlMaster=auto -o ControlPersist=60s"
STRICT = "-o StrictHostKeyChecking=yes"


def project_config_file() -> Path:
    from hostkit.paths import PACKAGE_DIR

    return PACKAGE_DIR.parent / "ansible.cfg"


def _readable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.R_OK)


def operator_config_file(cwd: str | os.PathLike | None = None) -> Path | None:
    """The operator's ansible.cfg, looked up as Ansible does (see the module's docstring).

    ``ANSIBLE_CONFIG`` naming a file that does not exist is bad input (Ansible would silently
    fall back to another file)."""
    env = os.environ.get("ANSIBLE_CONFIG")
    if env:
        p = Path(env).expanduser().absolute()
        if p.is_dir():
            p = p / "ansible.cfg"
        if not _readable(p):
            raise BadInput(f"ANSIBLE_CONFIG={env}: no readable ansible.cfg there")
        return p
    candidates = []
    here = Path(cwd or os.getcwd()).absolute()
    try:
        if not here.stat().st_mode & stat.S_IWOTH:  # Ansible ignores ./ansible.cfg of a world-writable cwd
            candidates.append(here / "ansible.cfg")
    except OSError:
        pass
    candidates += [Path("~/.ansible.cfg").expanduser(), Path("/etc/ansible/ansible.cfg")]
    project = project_config_file().resolve()
    for c in candidates:
        if _readable(c) and c.resolve() != project:
            return c
    return None


@dataclass
class OperatorSettings:
    """The operator's effective Ansible settings: ``value(name)`` and whether they set it."""

    path: Path | None

    @functools.cached_property
    def _manager(self):
        from ansible.config.manager import ConfigManager

        if self.path is not None:
            return ConfigManager(conf_file=str(self.path))
        # No operator file: an empty one, so that Ansible's own lookup does not pick up the
        # project's ansible.cfg from the working directory.
        with tempfile.NamedTemporaryFile("w", suffix=".cfg") as empty:
            return ConfigManager(conf_file=empty.name)

    @functools.cached_property
    def _ssh_ready(self) -> bool:
        import ansible.constants as C
        from ansible.plugins.loader import connection_loader

        connection_loader.get("ssh", class_only=True)  # loads the plugin's option definitions
        self._manager.initialize_plugin_configuration_definitions(
            "connection", "ssh", C.config.get_configuration_definitions("connection", "ssh")
        )
        return True

    def value(self, name: str):
        # Defaults such as COLLECTIONS_PATHS' are templates of ANSIBLE_HOME, rendered as
        # ansible.constants renders them.
        home = {} if name == "ANSIBLE_HOME" else {"ANSIBLE_HOME": self.value("ANSIBLE_HOME")}
        return self._manager.get_config_value_and_origin(name, variables=home)[0]

    def is_set(self, name: str) -> bool:
        return self._manager.get_config_value_and_origin(name)[1] != "default"

    def ssh(self, name: str):
        """An option of the ssh connection plugin (``ssh_args``, ``host_key_checking``, ...)."""
        assert self._ssh_ready
        return self._manager.get_config_value_and_origin(name, plugin_type="connection", plugin_name="ssh")

    def ssh_set(self, name: str) -> bool:
        return self.ssh(name)[1] != "default"

    @property
    def host_key_checking(self) -> bool:
        """False only when the operator said so (Ansible's default is True)."""
        return bool(self.ssh("host_key_checking")[0])

    def ssh_args(self) -> str:
        """The ``ssh_args`` hostkit gives Ansible: the operator's first, then hostkit's
        (:data:`HOSTKIT_SSH_ARGS`), then strict host-key checking unless they weakened it explicitly."""
        theirs, origin = self.ssh("ssh_args")
        # OpenSSH takes the first value of an option: the operator's come first and win.
        args = f"{theirs or ''} {HOSTKIT_SSH_ARGS}".strip() if origin != "default" else HOSTKIT_SSH_ARGS
        if self.host_key_checking and "stricthostkeychecking" not in args.lower():
            args = f"{args} {STRICT}".strip()
        return args


def settings() -> OperatorSettings:
    """The operator's settings as of now (the working directory and environment of this process)."""
    return OperatorSettings(operator_config_file())


def _paths(ours: list[Path], settings: OperatorSettings, name: str) -> str:
    """hostkit's directories first, then the operator's when they set any."""
    out = [str(p) for p in ours]
    if settings.is_set(name):
        theirs = settings.value(name)
        out += [str(p) for p in (theirs if isinstance(theirs, list) else str(theirs).split(os.pathsep)) if p]
    return os.pathsep.join(dict.fromkeys(out))


def runner_env(
    root: Path, control_dir: str, *, log_path: str | None = None, operator: OperatorSettings | None = None
) -> dict[str, str]:
    """ansible-runner's ``envvars``: the operator's settings (``ANSIBLE_CONFIG``) plus hostkit's layer."""
    from hostkit.paths import checkout_collection_view, layout_of

    s = operator or settings()
    lay = layout_of(root)  # a checkout or the installed collection (hostkit/paths.py)
    collections = checkout_collection_view(lay.root) if lay.kind == "checkout" else lay.collections
    env = {
        # Ansible's default collections paths stay too (an operator's callback or connection
        # plugin may come from ~/.ansible/collections).
        "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(
            dict.fromkeys([str(collections)] + [str(p) for p in s.value("COLLECTIONS_PATHS") or []])
        ),
        "ANSIBLE_ROLES_PATH": _paths([lay.roles], s, "DEFAULT_ROLES_PATH"),
        "ANSIBLE_SSH_ARGS": s.ssh_args(),
        # One control-socket directory per run: a master connection from an earlier run
        # (another inventory, another known_hosts) must never skip this run's host-key check.
        "ANSIBLE_SSH_CONTROL_PATH_DIR": control_dir,
        # hostkit reads the task results, never Ansible's screen output: no colour, no retry files.
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "True",
    }
    if lay.module_utils is not None:  # a checkout's modules import ansible.module_utils.hostkit_*
        env["ANSIBLE_MODULE_UTILS"] = _paths([lay.module_utils], s, "DEFAULT_MODULE_UTILS_PATH")
    if s.path is not None:
        env["ANSIBLE_CONFIG"] = str(s.path)
    if not s.ssh_set("pipelining"):
        env["ANSIBLE_PIPELINING"] = "True"  # hostkit's default; an operator's setting stands
    if not s.is_set("DEPRECATION_WARNINGS"):
        env["ANSIBLE_DEPRECATION_WARNINGS"] = "False"
    if not s.is_set("INTERPRETER_PYTHON"):
        env["ANSIBLE_PYTHON_INTERPRETER"] = "auto_silent"
    if log_path:
        env["ANSIBLE_LOG_PATH"] = str(log_path)
    return env


def _var(hv: dict, *names, default=None):
    for n in names:
        if hv.get(n) not in (None, ""):
            return hv[n]
    return default


def _truthy(value) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on", "y")


@dataclass
class HostConnection:
    """How Ansible reaches one inventory host, as hostkit's audit reproduces it."""

    connection: str  # ssh | local
    address: str
    port: int | None
    user: str | None
    key: str | None
    ssh_args: list[str]  # every option, in Ansible's order (ssh_args, hkc, common, extra)
    become: bool
    become_user: str | None


def host_connection(name: str, hv: dict, operator: OperatorSettings | None = None) -> HostConnection:
    """The connection of inventory host ``name`` with variables ``hv`` (Ansible's precedence:
    host variables, then the operator's settings). Raises :class:`BadInput` for a connection or a
    become method the audit cannot reproduce."""
    s = operator or settings()
    connection = str(_var(hv, "ansible_connection", default=s.value("DEFAULT_TRANSPORT") or "ssh"))
    connection = connection.removeprefix("ansible.builtin.")
    if connection == "smart":
        connection = "ssh"
    if connection not in ("ssh", "local"):
        raise BadInput(
            f"{name}: ansible_connection {connection!r}: hostkit's audit reaches hosts over ssh or local only"
        )
    become = _truthy(_var(hv, "ansible_become", default=s.value("DEFAULT_BECOME")))
    method = _var(hv, "ansible_become_method", default=s.value("DEFAULT_BECOME_METHOD"))
    if become and method not in ("sudo", "ansible.builtin.sudo"):
        raise BadInput(f"{name}: become method {method!r}: hostkit's audit can become another user with sudo only")
    become_user = _var(hv, "ansible_become_user", default=s.value("DEFAULT_BECOME_USER")) if become else None
    if connection == "local":
        return HostConnection("local", "localhost", None, None, None, [], become, become_user)
    ssh_args = str(_var(hv, "ansible_ssh_args", default=s.ssh_args()))
    hkc = _var(hv, "ansible_host_key_checking", "ansible_ssh_host_key_checking", default=s.host_key_checking)
    args = shlex.split(ssh_args)
    if not _truthy(hkc):
        args += ["-o", "StrictHostKeyChecking=no"]  # the operator's explicit choice, as Ansible passes it
    for extra in (
        _var(hv, "ansible_ssh_common_args", default=s.ssh("ssh_common_args")[0]),
        _var(hv, "ansible_ssh_extra_args", default=s.ssh("ssh_extra_args")[0]),
    ):
        args += shlex.split(str(extra or ""))
    port = _var(hv, "ansible_port", "ansible_ssh_port", default=s.value("DEFAULT_REMOTE_PORT"))
    return HostConnection(
        "ssh",
        str(_var(hv, "ansible_host", "ansible_ssh_host", default=name)),
        int(port) if port else None,
        _var(hv, "ansible_user", "ansible_ssh_user", default=s.value("DEFAULT_REMOTE_USER")),
        _var(
            hv, "ansible_ssh_private_key_file", "ansible_private_key_file", default=s.value("DEFAULT_PRIVATE_KEY_FILE")
        ),
        args,
        become,
        become_user,
    )
