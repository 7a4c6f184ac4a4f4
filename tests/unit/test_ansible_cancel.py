"""A canceled Ansible run leaves no ansible-playbook worker behind (hostkit/ansible/run.py).

ansible-core's workers call ``setsid``; ansible-runner's cancel kills only the playbook's own
process group, so a worker survived a Ctrl-C and went on with its task after hostkit had reported
the run canceled (seen in CI: ``test_sigint_during_apply_leaves_a_consistent_journal``). These run
a real ansible-playbook (local connection) and real processes, no lab needed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from hostkit.ansible.run import stop_leftover_playbooks

pytestmark = pytest.mark.measures  # bounded waits on real processes: make test runs it alone


def _alive(pattern: str) -> str:
    return subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True).stdout.strip()


def test_sigint_during_a_task_stops_the_worker_before_run_playbook_returns(tmp_path):
    token = str(7000 + uuid.uuid4().int % 1000) + ".5"  # a sleep no other process runs
    (tmp_path / "p.yml").write_text(
        textwrap.dedent(f"""\
        - hosts: all
          gather_facts: false
          tasks:
            - ansible.builtin.command: sleep {token}
        """)
    )
    (tmp_path / "hosts").write_text(f"here ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    script = textwrap.dedent(f"""\
        import os, signal, subprocess, threading, time
        from hostkit.ansible.run import run_playbook

        def interrupt_once_the_task_runs():
            while subprocess.run(["pgrep", "-f", "^sleep {token}"], capture_output=True).returncode:
                time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=interrupt_once_the_task_runs, daemon=True).start()
        r = run_playbook({str(tmp_path / "p.yml")!r}, {str(tmp_path / "hosts")!r}, timeout=600)
        print({{h: (x.status, x.msg) for h, x in r.hosts.items()}}, r.error)
        print(r.status)
        """)
    env = dict(os.environ, HOSTKIT_STATE_DIR=str(tmp_path / "state"))
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
        left = _alive(f"^sleep {token}")  # at once: run_playbook has returned, the process has exited
        assert done.stdout.strip().splitlines()[-1:] == ["canceled"], (done.stdout, done.stderr[-2000:])
        assert left == "", f"the worker's task outlived the canceled run: {left}"
    finally:
        subprocess.run(["pkill", "-f", f"^sleep {token}"])


def test_a_leftover_ignoring_sigterm_is_killed_after_the_grace(tmp_path):
    control_dir = str(tmp_path / "hk-cp-test")
    # argv[0] "ansible-playbook", SIGTERM ignored (kept across exec), a session of its own like a worker.
    proc = subprocess.Popen(
        ["bash", "-c", "trap '' TERM; exec -a ansible-playbook sleep 300"],
        env=dict(os.environ, ANSIBLE_SSH_CONTROL_PATH_DIR=control_dir),
        start_new_session=True,
    )
    other = subprocess.Popen(
        ["bash", "-c", "exec -a ansible-playbook sleep 300"],
        env=dict(os.environ, ANSIBLE_SSH_CONTROL_PATH_DIR=control_dir + "-another-run"),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        while "ansible-playbook" not in _alive("^ansible-playbook") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stop_leftover_playbooks(control_dir, grace=0.5) == [proc.pid]
        assert proc.wait(timeout=10) == -signal.SIGKILL
        assert other.poll() is None  # another run's playbook is not touched
    finally:
        for p in (proc, other):
            p.kill()
            p.wait()
