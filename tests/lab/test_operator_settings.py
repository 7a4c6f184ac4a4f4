"""The operator's Ansible settings on lab hosts: an ansible.cfg in the operator's working directory
with a non-default remote_user and ssh_args ProxyJump through a second lab host, an
``ansible_connection: local`` host, and the audit in testinfra's own pytest idiom.

The jump topology is real: the target's sshd runs in its own network namespace, where the
controller cannot reach it (a connect to its address is refused); the jump host's sshd is
started per connection in inetd mode (``sshd -i``, as Debian's ``ssh.socket`` does) inside that
namespace, on a listener in the controller's namespace. Only a connection through the jump host
reaches the target. The target's sshd also runs in its own mount namespace whose
``/etc/passwd`` names an extra uid-0 user, ``hkop``: the operator's ``remote_user`` (a login as
another name, with root's rights, without touching this machine's accounts or needing sudo).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, lab_port

SSHD = "/usr/sbin/sshd"
REMOTE_USER = "hkop"


def hostkit(*args, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}
    env["HOME"] = str(cwd)  # no ~/.ansible.cfg but the test's own
    return subprocess.run(
        [sys.executable, "-m", "hostkit.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**env, "PYTHONPATH": str(REPO)},
    )


def _pid_with(pidfile: Path, config: Path) -> int | None:
    try:
        pid = int(pidfile.read_text().strip())
        if str(config).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
    except (OSError, ValueError):
        pass
    return None


class JumpTopology:
    """The target's sshd in a network namespace; the jump host's sshd per connection (inetd mode)
    inside it, reachable from the controller through a listener on the jump host's address."""

    def __init__(self, lab, tmp: Path):
        self.lab = lab
        self.target, self.jump = (next(h for h in lab.hosts() if h.name == n) for n in ("t", "j"))
        self.tmp = tmp
        self.sessions: list[subprocess.Popen] = []
        self.listener: socket.socket | None = None
        self.holder: subprocess.Popen | None = None

    @property
    def target_log(self) -> Path:
        return self.lab.host_dir("t") / "sshd-netns.log"

    @property
    def jump_log(self) -> Path:
        return self.lab.host_dir("j") / "sshd-inetd.log"

    def up(self) -> None:
        if not shutil.which("nsenter") or not shutil.which("unshare"):
            pytest.fail("nsenter/unshare (util-linux) are needed for the jump-host topology")
        self.lab.stop_host("t")
        self.lab.stop_host("j")
        # Until unshare(2) has run, /proc/PID/ns/net is still the controller's namespace (where lo is
        # up too): a loaded machine once started the target's sshd there. The holder says "ready"
        # from inside its own namespace, after its loopback is up, and the namespace is checked.
        self.holder = subprocess.Popen(
            ["unshare", "-n", "sh", "-c", "ip link set lo up && echo ready && exec sleep 3600"],
            stdout=subprocess.PIPE,
            text=True,
        )
        ns = f"/proc/{self.holder.pid}/ns/net"
        # Bounded, as any wait of this fixture: 10 s for the holder to answer.
        if not select.select([self.holder.stdout], [], [], 10)[0]:
            pytest.fail("the network namespace's holder did not answer within 10 s")
        ready = self.holder.stdout.readline().strip()
        if ready != "ready":
            pytest.fail(f"the network namespace was not set up (unshare exited {self.holder.wait(timeout=5)})")
        assert os.readlink(ns) != os.readlink("/proc/self/ns/net"), "the holder is in the controller's namespace"
        passwd = self.tmp / "passwd"
        shadow = self.tmp / "shadow"
        passwd.write_text(Path("/etc/passwd").read_text() + f"{REMOTE_USER}:x:0:0:hostkit operator:/root:/bin/sh\n")
        shadow.write_text(Path("/etc/shadow").read_text() + f"{REMOTE_USER}:*:19000:0:99999:7:::\n")
        os.chmod(shadow, 0o600)
        config = self.lab.host_dir("t") / "sshd_config"
        subprocess.run(
            [
                "nsenter",
                f"--net={ns}",
                "unshare",
                "-m",
                "sh",
                "-c",
                f"mount --bind {passwd} /etc/passwd && mount --bind {shadow} /etc/shadow && "
                f"exec {SSHD} -f {config} -E {self.target_log}",
            ],
            check=True,
        )
        pidfile = self.lab.host_dir("t") / "sshd.pid"
        deadline = time.monotonic() + 10
        while _pid_with(pidfile, config) is None:
            assert time.monotonic() < deadline, f"the target's sshd did not start: {self.target_log.read_text()}"
            time.sleep(0.05)
        self.listener = socket.create_server((self.jump.address, self.jump.port))
        threading.Thread(target=self._serve, args=(ns,), daemon=True).start()

    def _serve(self, ns: str) -> None:
        config = self.lab.host_dir("j") / "sshd_config"
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                self.sessions.append(
                    subprocess.Popen(
                        ["nsenter", f"--net={ns}", SSHD, "-i", "-f", str(config), "-E", str(self.jump_log)],
                        stdin=conn.fileno(),
                        stdout=conn.fileno(),
                        stderr=subprocess.DEVNULL,
                    )
                )

    def down(self) -> None:
        if self.listener:
            self.listener.close()
        for p in self.sessions:
            if p.poll() is None:
                p.kill()
            p.wait()
        config = self.lab.host_dir("t") / "sshd_config"
        pid = _pid_with(self.lab.host_dir("t") / "sshd.pid", config)
        if pid:
            os.kill(pid, signal.SIGTERM)
        if self.holder:
            self.holder.kill()
            self.holder.wait()
            self.holder.stdout.close()


@pytest.fixture(scope="module")
def jumped(make_lab, tmp_path_factory):
    lab = make_lab([("t", "epyc-9634-nps1"), ("j", "kvm-small")], lab_port(12))
    work = tmp_path_factory.mktemp("operator")
    topo = JumpTopology(lab, work)
    try:
        topo.up()
    except BaseException:
        topo.down()  # a half-built topology leaves no namespace holder or sshd behind
        raise
    # The operator's ansible.cfg, in the directory hostkit is started from.
    (work / "ansible.cfg").write_text(
        f"[defaults]\nremote_user = {REMOTE_USER}\n\n[ssh_connection]\nssh_args = -F {lab.ssh_config} -o ProxyJump=j\n"
    )
    inv = yaml.safe_load(lab.inventory.read_text())
    del inv["all"]["vars"]["ansible_user"]  # the operator's remote_user decides
    del inv["all"]["children"]["lab"]["hosts"]["j"]  # the jump host is not a host to tune
    (work / "inventory.yml").write_text(yaml.safe_dump(inv, sort_keys=False))
    topo.work = work
    try:
        yield topo
    finally:
        topo.down()


def test_target_cannot_be_reached_directly(jumped):
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((jumped.target.address, jumped.target.port), timeout=5).close()


@pytest.fixture(scope="module")
def applied(jumped):
    proc = hostkit("apply", "-i", "inventory.yml", "--json", cwd=jumped.work)
    return proc


def test_apply_goes_through_the_jump_host_as_the_operators_remote_user(jumped, applied):
    import json

    assert applied.returncode == 0, applied.stderr[-3000:]
    doc = json.loads(applied.stdout)
    assert doc["hosts"]["t"]["status"] == "changed", doc["hosts"]["t"]
    assert f"Accepted publickey for {REMOTE_USER} from 127.0.0.1" in jumped.target_log.read_text()
    assert "Accepted publickey for root from 127.0.0.1" in jumped.jump_log.read_text()


def test_audit_goes_through_the_jump_host_as_the_operators_remote_user(jumped, applied):
    import json

    assert applied.returncode == 0
    logins = jumped.target_log.read_text().count(f"Accepted publickey for {REMOTE_USER}")
    jumps = jumped.jump_log.read_text().count("Accepted publickey for root")
    proc = hostkit("audit", "-i", "inventory.yml", "--json", cwd=jumped.work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    t = json.loads(proc.stdout)["hosts"]["t"]
    assert t["status"] == "pending_reboot" and t["counts"]["drift"] == 0 and t["counts"]["pass"] > 10, t
    assert jumped.target_log.read_text().count(f"Accepted publickey for {REMOTE_USER}") > logins
    assert jumped.jump_log.read_text().count("Accepted publickey for root") > jumps


def test_unknown_jumped_host_key_is_refused_not_accepted(jumped, tmp_path):
    """Strict host-key checking stays on through the operator's settings: the target's key removed
    from known_hosts, apply and audit refuse it (ssh's default would ask; ~/.ssh/config could accept)."""
    import json

    work = tmp_path / "w"
    work.mkdir()
    (work / "ansible.cfg").write_text((jumped.work / "ansible.cfg").read_text())
    known = tmp_path / "known_hosts"
    known.write_text(
        "".join(
            line + "\n"
            for line in jumped.lab.known_hosts.read_text().splitlines()
            if not line.startswith(f"[{jumped.target.address}]")
        )
    )
    (work / "inventory.yml").write_text(
        (jumped.work / "inventory.yml")
        .read_text()
        .replace(f"UserKnownHostsFile={jumped.lab.known_hosts}", f"UserKnownHostsFile={known}")
    )
    audit = hostkit("audit", "-i", "inventory.yml", "--json", cwd=work)
    assert audit.returncode == 1
    t = json.loads(audit.stdout)["hosts"]["t"]
    assert t["status"] == "unreachable" and "host key unknown" in t["error"] and "refusing to connect" in t["error"]


# ----------------------------------------------------------------------------- ansible_connection: local


@pytest.fixture(scope="module")
def local_host(tmp_path_factory):
    """An inventory whose one host is this machine through ``ansible_connection: local``, tuned in a sysroot."""
    from hostkit.lab import fixtures

    work = tmp_path_factory.mktemp("local")
    root = fixtures.materialize("epyc-9634-nps1", work / "root")
    (work / "inventory.yml").write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        "me": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": "/usr/bin/python3",
                            "hostkit_sysroot": str(root),
                        }
                    }
                }
            }
        )
    )
    proc = hostkit("apply", "-i", "inventory.yml", "--json", cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return work, root


def test_local_connection_host_audits(local_host):
    import json

    work, _ = local_host
    proc = hostkit("audit", "-i", "inventory.yml", "--json", cwd=work)
    assert proc.returncode == 0, proc.stdout[-3000:]
    me = json.loads(proc.stdout)["hosts"]["me"]
    assert me["status"] == "pending_reboot" and me["counts"]["drift"] == 0 and me["counts"]["pass"] > 10, me


def _pytest(*args, cwd: Path) -> subprocess.CompletedProcess:
    # testinfra's ansible backend runs ansible-inventory: the venv's bin/ on PATH.
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env=env,
    )


def test_testinfra_idiom_runs_the_checks(local_host):
    work, _ = local_host
    proc = _pytest("--pyargs", "hostkit.audit", "--connection=ansible", "--ansible-inventory=inventory.yml", cwd=work)
    assert proc.returncode == 0, proc.stdout[-3000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary


def test_testinfra_idiom_fails_the_run_on_a_drifting_check(local_host):
    work, root = local_host
    stat_interval = root / "proc/sys/vm/stat_interval"
    applied = stat_interval.read_text()
    stat_interval.write_text("1\n")
    try:
        proc = _pytest(
            "--pyargs", "hostkit.audit", "--connection=ansible", "--ansible-inventory=inventory.yml", cwd=work
        )
    finally:
        stat_interval.write_text(applied)
    assert proc.returncode == 1, proc.stdout[-3000:]
    failed = [line for line in proc.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and "me::sysctl vm.stat_interval" in failed[0], failed


def test_hostkit_checks_from_a_users_own_testinfra_test(local_host):
    work, root = local_host
    (work / "test_mine.py").write_text(
        "from hostkit.audit.plugin import hostkit_drift\n\n\n"
        "def test_tuned(host, hostkit_audit):\n"
        "    result = hostkit_audit(host)\n"
        "    assert result['counts']['pass'] > 10\n"
        "    assert hostkit_drift(result) == []\n"
    )
    ok = _pytest("test_mine.py", "--hosts=ansible://me", "--ansible-inventory=inventory.yml", cwd=work)
    assert ok.returncode == 0, ok.stdout[-3000:]
    governor = root / "sys/devices/system/cpu/cpu5/cpufreq/scaling_governor"
    applied = governor.read_text()
    governor.write_text("powersave\n")
    try:
        drifted = _pytest("test_mine.py", "--hosts=ansible://me", "--ansible-inventory=inventory.yml", cwd=work)
    finally:
        governor.write_text(applied)
    assert drifted.returncode == 1 and "cpufreq governor: expected performance" in drifted.stdout, drifted.stdout[
        -3000:
    ]


# ----------------------------------------------------------------------------- -v and --log


def test_verbosity_passes_through_with_the_artifacts_path_and_a_log(local_host, tmp_path):
    import json

    work, _ = local_host
    log = tmp_path / "ansible.log"
    proc = hostkit("apply", "-i", "inventory.yml", "--check", "-vv", "--log", log, "--json", cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    run_dir = Path(doc["artifacts"])
    assert run_dir.name == doc["run_id"]
    assert f"ansible run {doc['run_id']} (apply.yml): artifacts {run_dir}" in proc.stderr
    assert "TASK [hostkit.tuning.isolcpus : " in proc.stderr  # Ansible's own task log (the role by its FQCN), on stderr
    assert "ansible-playbook [core " in proc.stderr  # printed from -v on: the verbosity reached ansible-playbook
    assert "TASK [hostkit.tuning.isolcpus : " in log.read_text()
    assert not (run_dir / "ansible.log").exists()  # --log replaces the run directory's log


def test_without_log_each_run_logs_in_its_run_directory(local_host):
    import json

    work, _ = local_host
    proc = hostkit("apply", "-i", "inventory.yml", "--check", "--json", cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (
        "TASK [hostkit.tuning.isolcpus : " in (Path(json.loads(proc.stdout)["artifacts"]) / "ansible.log").read_text()
    )
    assert "TASK [" not in proc.stderr  # without -v: no task log on the screen


def test_audit_verbosity_shows_each_hosts_steps_and_logs_its_commands(local_host, tmp_path):
    work, _ = local_host
    log = tmp_path / "audit.log"
    proc = hostkit("audit", "-i", "inventory.yml", "-v", "--log", log, cwd=work)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [line for line in proc.stderr.splitlines() if line.startswith("me: ")] == [
        "me: connect [ok]",
        "me: facts [ok]",
        "me: plan [ok]",
        "me: checks [ok]",
    ]
    assert "facts --sysroot" in log.read_text()  # the agent's command, as testinfra ran it
