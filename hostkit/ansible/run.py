"""Run hostkit's playbooks through ansible-runner and turn its events into results.

The shape follows ansible-runner's own API: one keyword entry point
(:func:`run_playbook`) returning a result object with ``.status``, ``.rc``,
``.stats`` and per-host results. A failed play is a status, not an exception.
The runner's private data dir is kept under ``.hostkit/runs/<run-id>/`` as the
audit trail of what ran.

Results a playbook hands back to hostkit are found by a fixed key, never by a task's
human name: a task publishes them with ``set_fact`` (e.g. ``hostkit_agent_output`` in
``playbooks/agent.yml``), and :class:`EventCollector` keeps every ``ansible_facts`` key a
task returns as :attr:`HostResult.published`.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hostkit.ansible.settings import OperatorSettings, runner_env, settings
from hostkit.paths import playbook_path, project_root, runs_dir

# ansible_facts keys kept from task results: the ones hostkit's playbooks and roles publish.
PUBLISHED_SUFFIX = "_agent_output"

HOST_EVENTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_unreachable": "unreachable",
    "runner_on_skipped": "skipped",
}


@dataclass(frozen=True)
class RunOptions:
    """How much of Ansible's own output a command shows, and where its log goes.

    ``verbosity``: ansible-playbook's ``-v`` count (0-4), passed through; with it, ``echo``
    receives Ansible's output of every event (the full task log) and each run's artifacts path.
    ``log``: Ansible's log file (``log_path``) for every run of the command; by default each run
    logs to ``ansible.log`` in its run directory, unless the operator's settings name a
    ``log_path`` of their own."""

    verbosity: int = 0
    log: str | None = None
    echo: Callable[[str], None] | None = None

    def log_for(self, run_dir: Path, operator: OperatorSettings) -> str | None:
        if self.log:
            return str(Path(self.log).absolute())
        return None if operator.is_set("DEFAULT_LOG_PATH") else str(run_dir / "ansible.log")


_OPTIONS: contextvars.ContextVar[RunOptions] = contextvars.ContextVar("hostkit_run_options", default=RunOptions())  # noqa: B039 (frozen)


def current_options() -> RunOptions:
    return _OPTIONS.get()


@contextlib.contextmanager
def run_options(options: RunOptions):
    """Every Ansible run inside the block uses ``options`` (the CLI sets them once per command)."""
    token = _OPTIONS.set(options)
    try:
        yield options
    finally:
        _OPTIONS.reset(token)


@dataclass
class TaskResult:
    task: str
    status: str  # ok | failed | unreachable | skipped
    changed: bool
    res: dict
    role: str = ""
    action: str = ""  # the module, as the task names it (hostkit.tuning.audit, ansible.builtin.debug, ...)


@dataclass
class HostResult:
    name: str
    status: str = "ok"  # ok | failed | unreachable
    changed: int = 0
    tasks: list[TaskResult] = field(default_factory=list)
    msg: str | None = None
    published: dict = field(default_factory=dict)  # ansible_facts key -> value, from set_fact


@dataclass
class RunResult:
    run_id: str
    status: str  # successful | failed | timeout | canceled
    rc: int
    stats: dict
    hosts: dict[str, HostResult]
    private_data_dir: str
    seconds: float
    error: str | None = None  # the playbook failed as a whole (syntax, missing role, ...)


def _path_with_our_ansible() -> str:
    """PATH with the bin/ of the Python running hostkit first (a venv need not be activated)."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")])


def summarize_error(msg) -> str:
    """One line for a host's failure; SSH's host-key banners become a plain statement."""
    text = " ".join(str(msg or "").replace("@", " ").split())
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text:
        return "host key CHANGED: the key offered is not the one in known_hosts; refusing to connect"
    if "Host key verification failed" in text or "No ED25519 host key is known" in text:
        return "host key unknown: the host's key is not in known_hosts (verification failed); refusing to connect"
    return text[:400]


def close_masters(control_dir: str) -> None:
    """Stop the run's SSH master connections and remove their directory: nothing outlives a run.
    All at once: one after another, a fleet's masters cost a fleet's worth of ssh startups."""
    procs = [
        subprocess.Popen(
            ["ssh", "-O", "exit", "-o", f"ControlPath={sock}", "hostkit-run"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for sock in Path(control_dir).glob("*")
    ]
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    shutil.rmtree(control_dir, ignore_errors=True)


def _run_processes(control_dir: str) -> list[int]:
    """ansible-playbook processes of the run whose environment names ``control_dir`` (unique per
    run): the playbook itself and the workers it forked. Read from /proc (Linux controllers)."""
    marker = f"ANSIBLE_SSH_CONTROL_PATH_DIR={control_dir}".encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"ansible-playbook" in (proc / "cmdline").read_bytes() and marker in (
                proc / "environ"
            ).read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def stop_leftover_playbooks(control_dir: str, grace: float = 10.0) -> list[int]:
    """Stop what is left of a run's ansible-playbook once ansible-runner returns.

    A canceled run (SIGINT/SIGTERM) or a timeout ends with ansible-runner killing the playbook's
    process group, but ansible-core's workers call ``setsid``: each is the leader of a group of its
    own (with the ssh it runs), so they survive the kill and go on with their task. hostkit must not
    report a run over while a worker may still be talking to a host: each leftover's group gets
    SIGTERM, then SIGKILL after ``grace`` seconds. Returns the pids found."""
    import signal

    found = pids = _run_processes(control_dir)

    def signal_all(sig):
        for pid in pids:
            with contextlib.suppress(OSError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, sig)
                else:
                    os.kill(pid, sig)

    signal_all(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        alive = set(_run_processes(control_dir))
        pids = [p for p in pids if p in alive]
        if pids:
            time.sleep(0.1)
    signal_all(signal.SIGKILL)
    return found


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


class EventCollector:
    """ansible-runner's ``event_handler``: per-host task results, statuses and published facts.

    ``on_event(host, task, status)`` is called for every per-host task result as it arrives.
    """

    def __init__(
        self, on_event: Callable[[str, str, str], None] | None = None, echo: Callable[[str], None] | None = None
    ) -> None:
        self.hosts: dict[str, HostResult] = {}
        self.on_event = on_event
        self.echo = echo  # with -v: Ansible's own output of every event, as ansible-playbook prints it

    def __call__(self, event: dict) -> bool:
        kind = event.get("event")
        if self.echo and event.get("stdout"):
            self.echo(event["stdout"])
        if kind not in HOST_EVENTS:
            return True
        data = event.get("event_data", {})
        host = data.get("host")
        if not host:
            return True
        status = HOST_EVENTS[kind]
        res = data.get("res") or {}
        if kind == "runner_on_failed" and data.get("ignore_errors"):
            status = "ok"
        if status == "ok" and res.get("skipped_reason"):  # the module could not do its job here: says why
            status = "skipped"
        task = data.get("task", "")
        hr = self.hosts.setdefault(host, HostResult(name=host))
        changed = bool(res.get("changed"))
        hr.tasks.append(
            TaskResult(
                task=task,
                status=status,
                changed=changed,
                res=res,
                role=data.get("role") or "",
                action=data.get("resolved_action") or data.get("task_action") or "",
            )
        )
        hr.changed += int(changed)
        facts = res.get("ansible_facts")
        if isinstance(facts, dict):
            hr.published.update({k: v for k, v in facts.items() if k.endswith(PUBLISHED_SUFFIX)})
        if status in ("failed", "unreachable") and hr.status != "unreachable":
            hr.status = status
            hr.msg = summarize_error(res.get("msg") or res.get("stderr") or res.get("reason") or status)
        if self.on_event:
            self.on_event(host, (data.get("role") + ": " if data.get("role") else "") + task, status)
        return True


def run_playbook(
    playbook: str,
    inventory: str,
    *,
    limit: str | None = None,
    extravars: dict | None = None,
    forks: int | None = None,
    check: bool = False,
    diff: bool = False,
    tags: str | None = None,
    run_id: str | None = None,
    on_event: Callable[[str, str, str], None] | None = None,
    timeout: int | None = None,
) -> RunResult:
    """Run ``playbooks/<playbook>`` against ``inventory``.

    ``on_event(host, task, status)`` is called for every per-host task result
    as it arrives (the CLI uses it for live progress).
    """
    import ansible_runner

    run_id = run_id or new_run_id()
    pdd = runs_dir() / run_id
    pdd.mkdir(parents=True, exist_ok=True)
    os.chmod(pdd, 0o700)
    cmdline = []
    if check:
        cmdline.append("--check")
    if diff:
        cmdline.append("--diff")
    if tags:
        cmdline += ["--tags", tags]
    opts = current_options()
    events = EventCollector(on_event, echo=opts.echo if opts.verbosity else None)
    hosts = events.hosts

    root = project_root()
    control_dir = tempfile.mkdtemp(prefix="hk-cp-")  # short: unix socket paths are limited to 108 bytes
    operator = settings()
    envvars = runner_env(root, control_dir, log_path=opts.log_for(pdd, operator), operator=operator)
    envvars["PATH"] = _path_with_our_ansible()
    if opts.echo:
        opts.echo(f"ansible run {run_id} ({playbook}): artifacts {pdd}")
    start = time.monotonic()
    try:
        r = ansible_runner.run(
            private_data_dir=str(pdd),
            project_dir=str(playbook_path(playbook).parent),
            playbook=playbook_path(playbook).name,
            inventory=str(Path(inventory).absolute()),
            limit=limit,
            extravars=extravars or {},
            forks=forks,
            cmdline=" ".join(cmdline) or None,
            envvars=envvars,
            quiet=True,
            suppress_env_files=True,
            event_handler=events,
            timeout=timeout,
            ident="run",
            verbosity=opts.verbosity or None,
        )
    finally:
        stop_leftover_playbooks(control_dir)
        close_masters(control_dir)
    stats = r.stats or {}
    # Hosts the play never reached with a task event still appear in the stats.
    for key in ("ok", "changed", "failures", "dark", "skipped", "processed"):
        for host in stats.get(key) or {}:
            hr = hosts.setdefault(host, HostResult(name=host))
            if key == "dark":
                hr.status = "unreachable"
            elif key == "failures" and hr.status == "ok":
                hr.status = "failed"
    error = None
    if r.rc != 0 and not any(h.tasks for h in hosts.values()):
        error = _playbook_error(r.stdout.read() if hasattr(r.stdout, "read") else "")
    return RunResult(
        run_id=run_id,
        status=r.status,
        rc=r.rc,
        stats=stats,
        hosts=hosts,
        private_data_dir=str(pdd),
        seconds=time.monotonic() - start,
        error=error,
    )


def _playbook_error(stdout: str) -> str:
    """The first [ERROR] of an ansible-playbook that failed before running any task."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if "ERROR" in line:
            return " ".join(x.strip() for x in lines[i : i + 3] if x.strip())[:500]
    return "ansible-playbook failed before running any task (see the run's artifacts)"
