"""Pre- and post-batch hooks: shell commands from the inventory, run on the controller per host.

A host's ``hostkit_pre_batch`` / ``hostkit_post_batch`` (a host or group variable: one command or
a list of commands) is rendered with Jinja2 (``{{ inventory_hostname }}`` and the host's
``hostkit_*``/``ansible_*`` variables) when the rollout starts, so a template error is bad input
before anything runs. Each command runs with ``/bin/sh -c`` in its own process group, bounded by
the hook timeout (the whole group is killed when it runs out); the environment gets
``HOSTKIT_HOST``, ``HOSTKIT_ROLLOUT``, ``HOSTKIT_BATCH`` and ``HOSTKIT_HOOK``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass

from hostkit.errors import BadInput

HOOK_VARS = {"pre_batch": "hostkit_pre_batch", "post_batch": "hostkit_post_batch"}
DEFAULT_TIMEOUT = 600


def check_timeout(seconds: float) -> None:
    if not 1 <= seconds <= 86400:
        raise BadInput(f"--hook-timeout must be 1-86400 seconds, got {seconds:g}")


def render(host: str, hostvars: dict) -> dict[str, list[str]]:
    """The host's hooks, rendered: ``{"pre_batch": [cmd, ...], "post_batch": [...]}``."""
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    context = {**hostvars, "inventory_hostname": host}
    out = {}
    for hook, var in HOOK_VARS.items():
        value = hostvars.get(var)
        if value in (None, "", []):
            out[hook] = []
            continue
        commands = value if isinstance(value, list) else [value]
        rendered = []
        for cmd in commands:
            if not isinstance(cmd, str) or not cmd.strip():
                raise BadInput(f"{host}: {var} must be a command or a list of commands, got {cmd!r}")
            try:
                rendered.append(env.from_string(cmd).render(context))
            except jinja2.TemplateError as exc:
                raise BadInput(f"{host}: {var} {cmd!r}: {exc}") from None
        out[hook] = rendered
    return out


@dataclass
class HookRun:
    hook: str  # pre_batch | post_batch
    host: str
    command: str
    rc: int | None  # None: timed out (killed)
    seconds: float
    output: str  # the last lines of stdout+stderr

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def why(self) -> str:
        what = f"timed out after {self.seconds:.0f} s (killed)" if self.rc is None else f"exit {self.rc}"
        return f"{self.hook} hook `{self.command}` {what}" + (f": {self.output}" if self.output else "")

    def to_dict(self) -> dict:
        return {
            "hook": self.hook,
            "host": self.host,
            "command": self.command,
            "rc": self.rc,
            "seconds": round(self.seconds, 3),
            "output": self.output,
        }


def run_hook(hook: str, host: str, command: str, *, timeout: float, rollout_id: str, batch: int) -> HookRun:
    env = {
        **os.environ,
        "HOSTKIT_HOST": host,
        "HOSTKIT_ROLLOUT": rollout_id,
        "HOSTKIT_BATCH": str(batch),
        "HOSTKIT_HOOK": hook,
    }
    start = time.monotonic()
    proc = subprocess.Popen(
        ["/bin/sh", "-c", command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        rc = None
    except BaseException:  # Ctrl-C: the hook's process group goes with us
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    tail = " | ".join(line for line in (out or "").strip().splitlines()[-3:])[:300]
    return HookRun(hook, host, command, rc, time.monotonic() - start, tail)
