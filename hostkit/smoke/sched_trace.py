"""Per-event attribution of long deschedules: who ran on the worker's CPU instead (runs ON a host;
stdlib only).

During a smoke run, a private tracefs instance (its own ring buffer, bounded, on the worker's CPU
only, the monotonic clock) records ``sched_switch``. Afterwards each time the worker was switched
out while still runnable (preempted, state R) for longer than a threshold becomes one event: how
long, and every task that ran meanwhile (command, pid, kernel priority, class). A SCHED_FIFO worker
switched out while runnable for CFS tasks or the idle task can only have been RT-throttled (a FIFO
task with budget left is never preempted by them; on kernels >= 6.12 the fair server, which
reserves CFS tasks a share of each period, does the same): the event says so when RT tasks (the
migration thread runs during a park too) took less than half of it.

tracefs must be mounted (``/sys/kernel/tracing``) and writable (root): without it the run goes on
and the report states why there is no per-event attribution (the run-level evidence remains).
"""

from __future__ import annotations

import os
import re

TRACEFS_ROOTS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
BUFFER_KB = 4096  # per CPU: bounded; a run that outgrows it keeps the newest events (overwrite)
MAX_EVENTS = 50  # long deschedules kept in the report (all are counted)

_SWITCH = re.compile(
    r"\s(\d+\.\d+): sched_switch: prev_comm=(.*?) prev_pid=(\d+) prev_prio=(-?\d+) "
    r"prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+) next_prio=(-?\d+)"
)


class TraceUnavailable(Exception):
    """tracefs is not mounted, or this process may not create an instance."""


def prio_class(prio: int) -> str:
    """The scheduling class of a kernel priority as sched_switch prints it (0-99 RT, 100-139 CFS)."""
    return "rt" if prio < 100 else "cfs"


def tracefs_mounts() -> list[str]:
    """Where tracefs is mounted, from /proc/self/mountinfo (readable by any user)."""
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                head, _, tail = line.partition(" - ")
                if tail.split(" ", 1)[0] == "tracefs":
                    found.append(head.split()[4].replace("\\040", " "))
    except OSError:
        pass
    return found


class SchedTrace:
    """A tracefs instance recording sched_switch on one CPU, from :meth:`start` to :meth:`stop`."""

    def __init__(self, cpu: int, name: str | None = None) -> None:
        root = next((r for r in TRACEFS_ROOTS if os.path.isdir(os.path.join(r, "instances"))), None)
        if root is None:
            mounted = tracefs_mounts()
            if mounted:  # there, but this user may not look inside (its root is mode 0700)
                raise TraceUnavailable(
                    f"tracefs at {mounted[0]} is not accessible to this user (uid "
                    f"{os.geteuid()}): per-event attribution needs root"
                )
            raise TraceUnavailable("tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing)")
        self.cpu = cpu
        self.dir = os.path.join(root, "instances", name or f"hostkit-smoke-{os.getpid()}")
        try:
            os.mkdir(self.dir)
        except FileExistsError:
            pass
        except OSError as exc:
            raise TraceUnavailable(f"cannot create a tracefs instance in {root}: {exc.strerror}") from None

    def _write(self, rel: str, value: str) -> None:
        with open(os.path.join(self.dir, rel), "w") as f:
            f.write(value)

    def start(self) -> None:
        try:
            self._write("tracing_on", "0")
            self._write("buffer_size_kb", str(BUFFER_KB))
            self._write("trace_clock", "mono")  # the clock of time.monotonic: the smoke samples' clock
            self._write("tracing_cpumask", format(1 << self.cpu, "x"))
            self._write("trace", "")
            self._write("events/sched/sched_switch/enable", "1")
            self._write("tracing_on", "1")
        except OSError as exc:
            self.close()
            raise TraceUnavailable(f"cannot set up tracing in {self.dir}: {exc.strerror}") from None

    def stop(self) -> str:
        """Stop recording; the worker CPU's trace text. The instance is removed."""
        try:
            self._write("tracing_on", "0")
            with open(os.path.join(self.dir, "per_cpu", f"cpu{self.cpu}", "trace")) as f:
                return f.read()
        finally:
            self.close()

    def close(self) -> None:
        try:
            self._write("events/sched/sched_switch/enable", "0")
        except OSError:
            pass
        try:
            os.rmdir(self.dir)
        except OSError:
            pass


def long_deschedules(trace: str, worker_pid: int, threshold_ms: float, inference_at=None) -> dict:
    """The worker's preempted intervals longer than ``threshold_ms`` from a sched_switch trace of its
    CPU: each with who ran instead and whether it can only be RT throttling. Each traced stretch
    goes to the task the trace shows running at its end (the line's ``prev``).

    Some kernels record no switch *out of* the idle task on some CPUs (this project's CI machine, a
    firecracker guest, on CPU 1: every ``swapper/1 ==> ...`` line is missing while CPU 0 has them).
    An interval the worker was preempted into idle then has no traced end: the next line about the
    worker is its next switch out (or the trace ends first). ``inference_at(at_s)`` (the session's:
    (index, deschedule in ms) of the worker's inference running at ``at_s``, or None between
    inferences) times such an interval: with what of that inference's deschedule the intervals the
    trace did time in it left; a second untimed interval in the same inference gets nothing left and
    is counted as untimed. Its event says ``"timed": "inference"``, and its time after the last
    traced switch goes to the last task the trace saw take over. ``idle_exits_traced`` is False
    when the CPU went idle but never left it in the trace."""
    intervals, switches, idle_in, idle_out = _preempted_intervals(trace, worker_pid)
    events, untimed = _timed_events(intervals, threshold_ms, inference_at)
    by_task: dict[str, float] = {}
    for e in events:
        for r in e["ran_instead"]:
            key = f"{r['comm']}:{r['pid']} ({r['class']})"
            by_task[key] = by_task.get(key, 0.0) + r["ms"]
    return {
        "switches": switches,
        "threshold_ms": threshold_ms,
        "count": len(events),
        "rt_throttled": sum(1 for e in events if e["rt_throttled"]),
        "rt_throttled_ms": round(sum(e["ms"] for e in events if e["rt_throttled"]), 3),
        "total_ms": round(sum(e["ms"] for e in events), 3),
        "idle_exits_traced": not idle_in or bool(idle_out),
        "timed_by_inference": sum(1 for e in events if e["timed"] == "inference"),
        "untimed": untimed,
        "by_task": dict(sorted(((k, round(v, 3)) for k, v in by_task.items()), key=lambda kv: -kv[1])[:10]),
        "events": events[:MAX_EVENTS],
    }


def _preempted_intervals(trace: str, worker_pid: int) -> tuple[list[tuple[dict, float | None]], int, int, int]:
    """The worker's preempted intervals in the trace, each with its length in ms (None: its end was not
    traced); the switches seen, and how many went into and out of idle."""
    intervals, current = [], None
    switches = idle_in = idle_out = 0
    for line in trace.splitlines():
        m = _SWITCH.search(line)
        if not m:
            continue
        switches += 1
        t = float(m.group(1))
        prev_comm, prev_pid, prev_prio, prev_state = m.group(2), int(m.group(3)), int(m.group(4)), m.group(5)
        next_comm, next_pid, next_prio = m.group(6), int(m.group(7)), int(m.group(8))
        idle_out += prev_pid == 0
        idle_in += next_pid == 0
        if current is not None:
            if prev_pid == worker_pid:  # it ran again: its switch back in was not traced
                intervals.append((current, None))
                current = None
            else:
                current["ran"].append([prev_comm, prev_pid, prev_prio, t - current["at"]])
                current["at"] = t
        if prev_pid == worker_pid and prev_state.startswith("R"):
            current = {"start": t, "at": t, "worker_prio": prev_prio, "ran": []}
        if current is not None:
            if next_pid == worker_pid:
                intervals.append((current, (t - current["start"]) * 1000))
                current = None
            else:
                current.update(last_comm=next_comm, last_pid=next_pid, last_prio=next_prio)
    if current is not None:  # still off its CPU when the trace stopped, or its return was not traced
        intervals.append((current, None))
    return intervals, switches, idle_in, idle_out


def _timed_events(intervals, threshold_ms: float, inference_at) -> tuple[list[dict], int]:
    """The intervals of at least ``threshold_ms`` as events; an interval without a traced end is timed
    by its inference's deschedule (what the timed intervals in it leave), or counted as untimed."""
    left: dict[int, float] = {}
    owners = []
    for interval, length_ms in intervals:
        found = inference_at(interval["start"]) if inference_at else None
        owners.append(found and found[0])
        if found:
            left.setdefault(found[0], found[1])
            if length_ms is not None:
                left[found[0]] -= length_ms
    events, untimed = [], 0
    for (interval, length_ms), owner in zip(intervals, owners):
        timed = "trace"
        if length_ms is None:
            if owner is None or left[owner] <= 0:
                untimed += 1
                continue
            length_ms, left[owner] = left[owner], 0.0
            timed = "inference"
            # the rest, after the stretches the trace timed, to the last task it saw take over
            known = sum(seg[3] for seg in interval["ran"])
            interval["ran"].append(
                [interval["last_comm"], interval["last_pid"], interval["last_prio"], max(0.0, length_ms / 1000 - known)]
            )
        if length_ms >= threshold_ms:
            events.append({**_event(interval, length_ms), "timed": timed})
    return events, untimed


def _event(current: dict, length_ms: float) -> dict:
    ran: dict[tuple, float] = {}
    for comm, pid, prio, seconds in current["ran"]:
        ran[(comm, pid, prio)] = ran.get((comm, pid, prio), 0.0) + seconds * 1000
    ran_instead = [
        {"comm": c, "pid": p, "prio": pr, "class": "idle" if p == 0 else prio_class(pr), "ms": round(ms, 3)}
        for (c, p, pr), ms in sorted(ran.items(), key=lambda kv: -kv[1])
    ]
    fifo_worker = current["worker_prio"] < 100
    # A runnable FIFO worker loses its CPU to CFS tasks or idle only when its RT budget is spent; RT
    # tasks that ran meanwhile (the migration thread runs whatever the budget) explain at most their
    # own time: a throttle park is one they took less than half of.
    rt_ms = sum(ms for (_, _, prio), ms in ran.items() if prio_class(prio) == "rt")
    throttled = fifo_worker and bool(ran_instead) and rt_ms * 2 < length_ms
    return {
        "at_s": round(current["start"], 6),
        "ms": round(length_ms, 3),
        "rt_throttled": throttled,
        "ran_instead": ran_instead[:5],
    }
