"""hostkit's Ansible settings layered on the operator's (hostkit/ansible/settings.py): where the
operator's ansible.cfg is found, what hostkit adds to it, and how the audit's connection follows
it. No host is contacted; Ansible's own ConfigManager reads the files."""

from __future__ import annotations

import configparser
import os
import shlex
from pathlib import Path

import pytest

from hostkit.ansible import settings as st
from hostkit.errors import BadInput

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def operator_env(tmp_path, monkeypatch):
    """A clean environment: no ANSIBLE_* variable, HOME and the working directory in tmp_path."""
    for k in list(os.environ):
        if k.startswith("ANSIBLE_"):
            monkeypatch.delenv(k)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return home, work


def cfg(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_lookup_order_env_then_cwd_then_home(operator_env, tmp_path, monkeypatch):
    home, work = operator_env
    assert st.operator_config_file() in (None, Path("/etc/ansible/ansible.cfg"))
    h = cfg(home / ".ansible.cfg", "[defaults]\n")
    assert st.operator_config_file() == h
    c = cfg(work / "ansible.cfg", "[defaults]\n")
    assert st.operator_config_file() == c
    e = cfg(tmp_path / "elsewhere.cfg", "[defaults]\n")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(e))
    assert st.operator_config_file() == e


def test_world_writable_cwd_is_skipped_as_ansible_does(operator_env):
    home, work = operator_env
    cfg(work / "ansible.cfg", "[defaults]\n")
    h = cfg(home / ".ansible.cfg", "[defaults]\n")
    work.chmod(0o777)
    assert st.operator_config_file() == h


def test_the_projects_ansible_cfg_is_not_an_operators(operator_env, monkeypatch):
    home, _ = operator_env
    monkeypatch.chdir(REPO)
    assert (REPO / "ansible.cfg").exists()
    h = cfg(home / ".ansible.cfg", "[defaults]\n")
    assert st.operator_config_file() == h


def test_ansible_config_naming_a_missing_file_is_bad_input(operator_env, tmp_path, monkeypatch):
    monkeypatch.setenv("ANSIBLE_CONFIG", str(tmp_path / "nope.cfg"))
    with pytest.raises(BadInput, match="ANSIBLE_CONFIG=.*nope.cfg"):
        st.operator_config_file()


def test_no_operator_file_gives_hostkits_defaults_and_strict_host_keys(operator_env):
    s = st.OperatorSettings(None)
    env = st.runner_env(REPO, "/tmp/cp", operator=s)
    assert env["ANSIBLE_SSH_ARGS"] == "-o ControlMaster=auto -o ControlPersist=60s -o StrictHostKeyChecking=yes"
    assert "ANSIBLE_CONFIG" not in env
    for forced in ("ANSIBLE_TIMEOUT", "ANSIBLE_HOST_KEY_CHECKING", "ANSIBLE_REMOTE_USER"):
        assert forced not in env  # the operator's (or Ansible's default) stands


def test_operator_settings_come_first_and_hostkit_appends(operator_env):
    _, work = operator_env
    c = cfg(
        work / "ansible.cfg",
        "[defaults]\nremote_user = op\ntimeout = 33\nroles_path = theirs\n"
        "[ssh_connection]\nssh_args = -o ProxyJump=bastion -o ControlPersist=5m\npipelining = False\n",
    )
    s = st.settings()
    assert s.path == c
    env = st.runner_env(REPO, "/tmp/cp", operator=s)
    assert env["ANSIBLE_CONFIG"] == str(c)
    assert shlex.split(env["ANSIBLE_SSH_ARGS"]) == [
        "-o",
        "ProxyJump=bastion",
        "-o",
        "ControlPersist=5m",
        "-o",
        "ControlMaster=auto",
        "-o",
        "ControlPersist=60s",
        "-o",
        "StrictHostKeyChecking=yes",
    ]
    assert env["ANSIBLE_ROLES_PATH"].split(os.pathsep) == [str(REPO / "roles"), str(work / "theirs")]
    assert "ANSIBLE_PIPELINING" not in env  # they set it
    assert "ANSIBLE_TIMEOUT" not in env and "ANSIBLE_REMOTE_USER" not in env


def test_hostkits_collection_comes_first_and_the_operators_collections_stay(operator_env, tmp_path):
    """hostkit's playbooks call hostkit.tuning.* by FQCN: its collections root goes first (a
    checkout's view, or the installed collection's root), then the operator's collections_path, or
    Ansible's default when they set none (never replaced)."""
    home, work = operator_env
    view = str(REPO / "build" / "collections")
    env = st.runner_env(REPO, "/tmp/cp", operator=st.OperatorSettings(None))
    assert env["ANSIBLE_COLLECTIONS_PATH"].split(os.pathsep) == [
        view,
        str(home / ".ansible/collections"),
        "/usr/share/ansible/collections",
    ]
    assert env["ANSIBLE_MODULE_UTILS"] == str(REPO / "module_utils")
    assert (REPO / "build/collections/ansible_collections/hostkit/tuning/plugins/modules").resolve() == REPO / "library"
    c = cfg(work / "ansible.cfg", "[defaults]\ncollections_path = theirs:/opt/collections\n")
    env = st.runner_env(REPO, "/tmp/cp", operator=st.settings())
    assert env["ANSIBLE_CONFIG"] == str(c)
    assert env["ANSIBLE_COLLECTIONS_PATH"].split(os.pathsep) == [view, str(work / "theirs"), "/opt/collections"]
    installed = tmp_path / "site" / "ansible_collections" / "hostkit" / "tuning"
    for d in ("playbooks", "roles", "plugins/modules"):
        (installed / d).mkdir(parents=True)
    env = st.runner_env(installed, "/tmp/cp", operator=st.settings())
    assert env["ANSIBLE_COLLECTIONS_PATH"].split(os.pathsep) == [
        str(tmp_path / "site"),
        str(work / "theirs"),
        "/opt/collections",
    ]
    assert "ANSIBLE_MODULE_UTILS" not in env and "ANSIBLE_LIBRARY" not in env


@pytest.mark.parametrize(
    "weakening",
    [
        "[defaults]\nhost_key_checking = False\n",
        "[ssh_connection]\nssh_args = -o StrictHostKeyChecking=accept-new\n",
    ],
    ids=["host_key_checking", "their-ssh-args"],
)
def test_only_an_explicit_operator_setting_weakens_host_key_checking(operator_env, weakening):
    _, work = operator_env
    cfg(work / "ansible.cfg", weakening)
    args = st.settings().ssh_args()
    assert "StrictHostKeyChecking=yes" not in args


def test_environment_variables_are_operator_settings_too(operator_env, monkeypatch):
    monkeypatch.setenv("ANSIBLE_SSH_ARGS", "-F /etc/ssh/fleet_config")
    assert st.settings().ssh_args().startswith("-F /etc/ssh/fleet_config -o ControlMaster=auto")


def test_audit_connection_follows_ansible(operator_env):
    _, work = operator_env
    cfg(
        work / "ansible.cfg",
        "[defaults]\nremote_user = op\nprivate_key_file = keys/id\n[ssh_connection]\nssh_args = -o ProxyJump=bastion\n",
    )
    s = st.settings()
    c = st.host_connection(
        "web1",
        {"ansible_host": "10.0.0.5", "ansible_port": 2200, "ansible_ssh_common_args": "-o UserKnownHostsFile=/k"},
        s,
    )
    assert (c.connection, c.address, c.port, c.user, c.key) == ("ssh", "10.0.0.5", 2200, "op", str(work / "keys/id"))
    assert c.ssh_args == [
        "-o",
        "ProxyJump=bastion",
        "-o",
        "ControlMaster=auto",
        "-o",
        "ControlPersist=60s",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "UserKnownHostsFile=/k",
    ]
    # Inventory variables win over the operator's settings, as in Ansible.
    assert st.host_connection("web1", {"ansible_user": "admin"}, s).user == "admin"
    local = st.host_connection("me", {"ansible_connection": "local", "ansible_become": True}, s)
    assert (local.connection, local.become, local.become_user) == ("local", True, "root")


@pytest.mark.parametrize(
    "hv,message",
    [
        ({"ansible_connection": "winrm"}, "ansible_connection 'winrm'"),
        ({"ansible_become": True, "ansible_become_method": "su"}, "become method 'su'"),
    ],
)
def test_audit_refuses_connections_it_cannot_reproduce(operator_env, hv, message):
    with pytest.raises(BadInput, match=message):
        st.host_connection("h", hv, st.OperatorSettings(None))


def test_projects_ansible_cfg_agrees_with_hostkits_layer(operator_env):
    """The project's ansible.cfg (ansible-lint, hand runs) names what hostkit layers itself."""
    c = configparser.ConfigParser()
    c.read(REPO / "ansible.cfg")
    d = c["defaults"]
    env = st.runner_env(REPO, "/tmp/cp", operator=st.OperatorSettings(None))
    assert str(REPO / d["roles_path"]) == env["ANSIBLE_ROLES_PATH"]
    assert str(REPO / d["collections_path"]) == env["ANSIBLE_COLLECTIONS_PATH"].split(os.pathsep)[0]
    assert str(REPO / d["module_utils"]) == env["ANSIBLE_MODULE_UTILS"]
    assert "library" not in d and "ANSIBLE_LIBRARY" not in env  # hostkit's modules are called by FQCN
    assert d.getboolean("host_key_checking") and "StrictHostKeyChecking=yes" in env["ANSIBLE_SSH_ARGS"]
    assert d["interpreter_python"] == env["ANSIBLE_PYTHON_INTERPRETER"]
    assert d.getboolean("retry_files_enabled") is False and env["ANSIBLE_RETRY_FILES_ENABLED"] == "False"
