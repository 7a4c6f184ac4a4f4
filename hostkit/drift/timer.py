"""``hostkit drift --timer CALENDAR``: each host judges itself against its baseline on a schedule,
with no controller (role ``drift_timer``, ``playbooks/drift_timer.yml``): a systemd timer runs the
host agent's ``drift`` (:mod:`hostkit.drift.on_host`) and node_exporter's textfile collector
exports its verdict, so an alert rule can page on drift between controller runs.

Every input is checked before a host is contacted: each host's baseline (the one ``--against``
names, else its newest; read and checked as ``hostkit drift`` reads it), the calendar expression,
the metrics path. ``--timer off`` removes the timer, its files and its last verdict.
"""

from __future__ import annotations

import re
import time

from hostkit.drift import store
from hostkit.errors import BadInput

OFF = "off"
# node_exporter's textfile collector directory on Debian (prometheus-node-exporter).
DEFAULT_TEXTFILE = "/var/lib/prometheus/node-exporter/hostkit_drift.prom"
# A systemd calendar expression (systemd.time(7): daily, Mon..Fri *-*-* 03:00:00, *:0/15): the
# characters it is made of; anything else would be read by the unit file's parser, not the timer's.
CALENDAR = re.compile(r"[A-Za-z0-9 ,.*:/~+-]{1,100}")


def check_calendar(value: str) -> str:
    if value != OFF and not CALENDAR.fullmatch(value) or not value.strip():
        raise BadInput(
            f"--timer {value!r}: a systemd calendar expression (daily, hourly, 'Mon..Fri *-*-* 03:00:00'), "
            "or off to remove the timer"
        )
    return value.strip()


def check_textfile(path: str) -> str:
    if not path.startswith("/") or not path.endswith(".prom") or "\n" in path or "%" in path:
        raise BadInput(
            f"--prom {path!r} with --timer: the metrics file on each host, an absolute path ending in .prom "
            "in node_exporter's textfile collector directory"
        )
    return path


def settings(inventory, limit, against, on_calendar, textfile, agent_args) -> dict[str, dict]:
    """Per host, the drift_timer role's settings; ``agent_args(host)``: the smoke run's options for
    the agent's ``drift`` (``['--no-smoke']`` for the state only). Bad input raises here."""
    from hostkit.ansible.inventory import load_inventory

    on_calendar = check_calendar(on_calendar)
    textfile = check_textfile(textfile)
    hosts = load_inventory(inventory, limit)
    if on_calendar == OFF:
        return {h.name: {"state": "absent", "textfile": textfile} for h in hosts}
    now = time.time()
    out = {}
    for h in hosts:
        base = store.read(h.name, against, None, now)
        out[h.name] = {
            "state": "present",
            "baseline_file": str(store.baseline_dir(h.name) / f"{base['name']}.json"),
            "against": base["name"],
            "latency": bool(base["latency"]),
            "agent_args": agent_args(h),
            "on_calendar": on_calendar,
            "textfile": textfile,
        }
    return out


def install(inventory, limit, per_host: dict[str, dict], forks=None, on_event=None) -> dict[str, dict]:
    """Run the drift_timer role with ``per_host``; each host's outcome."""
    from hostkit.ansible import agent_zipapp
    from hostkit.ansible.run import run_playbook
    from hostkit.paths import state_dir

    artifact = agent_zipapp.build(state_dir() / "agent")
    run = run_playbook(
        "drift_timer.yml",
        inventory,
        limit=limit,
        forks=forks or max(5, len(per_host)),
        extravars={"hostkit_drift_timer_settings": per_host, "hostkit_agent": str(artifact)},
        on_event=on_event,
    )
    out = {}
    for host, s in per_host.items():
        hr = run.hosts.get(host)
        if hr is None or hr.status != "ok":
            out[host] = {"status": "failed", "error": (hr and hr.msg) or run.error or "no result from the play"}
        elif s["state"] == "absent":
            out[host] = {"status": "ok", "timer": OFF, "textfile": s["textfile"]}
        else:
            out[host] = {
                "status": "ok",
                "timer": s["on_calendar"],
                "against": s["against"],
                "latency": "measured" if s["latency"] and "--no-smoke" not in s["agent_args"] else "not measured",
                "textfile": s["textfile"],
            }
    return out
