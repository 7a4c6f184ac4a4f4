"""Wake-ups between the worker and the clients: spin briefly, then block on an eventfd.

Every party (the worker, each client) has a *bell*: a ``sleeping`` word on its own cache line in
the queue segment and an ``eventfd`` created by the orchestrator and inherited by the spawned
processes. A party that runs out of work spins for a bounded, adaptive time (``Spin``), then
announces itself asleep and blocks in ``select`` on its eventfd. The other side, after publishing
(a READY request, a DONE result), looks at the sleeping word and writes the eventfd only when it
is set: a party that is awake costs its peers no system call.

A spin reads one word (``Spin``): the worker the *doorbell* on its own line, where every client
stores a fresh token after it publishes a request (queue.doorbell_token), then it scans the slots
once; a client the state of its oldest request out.

Lost wake-ups are the classic hazard (the store-then-load pattern of Dekker's algorithm): the
sleeper stores ``sleeping=1`` then loads the states; the publisher stores a state then loads
``sleeping``. x86 may let each load pass the other's store (store buffers), so both sides put a
full fence between their store and their load. CPython has no fence primitive; an uncontended
``threading.Lock`` acquire/release is one on x86 (glibc's ``sem_trywait``/``sem_post`` and 3.13's
``PyMutex`` both use ``lock``-prefixed instructions, full barriers on x86). The sleeper also never
blocks for longer than a bounded timeout, and the worker counts any READY request it finds after
such a timeout (``missed_wakeups``): zero is what the tests assert.
"""

from __future__ import annotations

import os
import select
import threading
import time
from multiprocessing import reduction

_fence = threading.Lock()
_acquire, _release = _fence.acquire, _fence.release


def fence() -> None:
    """A full memory barrier (see the module docstring)."""
    _acquire()
    _release()


class InheritedFd:
    """An fd handed to a spawned child in its ``Process`` arguments (the child gets the same open file)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self):
        # Only meaningful while multiprocessing spawns the child: the fd joins the child's pass_fds.
        return (_rebuild_fd, (reduction.DupFd(self.fd),))


def _rebuild_fd(dup) -> int:
    return dup.detach()


def new_eventfd() -> int:
    return os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)


class Bell:
    """One party's wake-up: the ``sleeping`` word ``flag`` (a 32-bit memoryview of one item) and its eventfd."""

    def __init__(self, flag: memoryview, fd: int) -> None:
        self.flag = flag
        self.fd = fd
        self.sleeps = 0  # times this party blocked
        self.rings = 0  # wake-up writes others made to it, as counted by whoever holds this object

    # -- the sleeping side
    def sleep(self, ready, timeout_s: float) -> bool:
        """Block until rung or ``timeout_s``, unless ``ready()`` is already true once we are announced
        asleep. Returns True when woken by a ring (or ready), False on timeout."""
        flag = self.flag
        flag[0] = 1
        fence()
        if ready():
            flag[0] = 0
            return True
        self.sleeps += 1
        readable = select.select((self.fd,), (), (), max(0.0, timeout_s))[0]
        flag[0] = 0
        return self._drain() if readable else False

    def rung_within(self, seconds: float) -> bool:
        """After a timeout: did a ring arrive within ``seconds`` (a publisher between its store and its ring)?"""
        return bool(select.select((self.fd,), (), (), seconds)[0]) and self._drain()

    def _drain(self) -> bool:
        try:
            os.eventfd_read(self.fd)
        except BlockingIOError:
            pass
        return True

    # -- the waking side (after publishing what the sleeper waits for)
    def ring(self) -> bool:
        _acquire()  # fence(), inlined: every request and every answer passes here
        _release()
        if self.flag[0]:
            self.flag[0] = 0  # one ring is enough: later publishers see it awake
            os.eventfd_write(self.fd, 1)
            self.rings += 1
            return True
        return False

    def ring_always(self) -> None:
        """Wake it whatever it is doing (the orchestrator's stop)."""
        try:
            os.eventfd_write(self.fd, 1)
        except OSError:
            pass


SPIN_CHUNK = 32  # probes between two clock reads while spinning (~1 us)
LEARN_EVERY = 8  # hits per hit learned from (a sample: learning costs a clock read and some arithmetic)


class Spin:
    """A bounded spin on one word whose budget follows the waits it sees (``learn``): twice the
    recent typical wait plus four times its recent spread (as TCP sets a retransmission timeout),
    plus 1 us, when waits are within ``max_ns`` (spinning catches them); halved after a wait longer
    than ``max_ns`` (spinning is wasted CPU); never below a floor of 1 us nor above ``max_ns``.
    Counts spins that caught the event (hits) and those that ran out (misses).

    The probe is one indexed load of a shared word (``until_changed``, ``until_at_least``); the
    loop reads the clock once per ``SPIN_CHUNK`` probes. A hit returns at once, without a clock
    read: the caller learns the wait later, off the hot path, from when the event really happened
    (a request's submit time, an answer's done time), also after blocking, where the time it woke
    up would include the wake-up's own latency."""

    def __init__(self, max_ns: int) -> None:
        self.max_ns = max(0, int(max_ns))
        self.floor_ns = min(self.max_ns, 1_000)
        self.budget_ns = self.max_ns
        self.typical_ns = self.max_ns / 4  # moving average of the waits within max_ns
        self.spread_ns = 0.0  # moving average of their distance from typical_ns
        self.started_ns = 0
        self.hits = 0
        self.misses = 0
        self.spun_ns = 0
        self._chunk = range(SPIN_CHUNK)

    def until_changed(self, words, i: int, value: int) -> bool:
        """Spin until ``words[i] != value`` (True) or the budget is spent (False). Either way the
        caller then tells ``learn`` how long the wait took from ``started_ns``."""
        now, chunk = time.monotonic_ns, self._chunk
        start = self.started_ns = now()
        deadline = start + self.budget_ns
        while True:
            for _ in chunk:
                if words[i] != value:
                    self.hits += 1
                    return True
            t = now()
            if t >= deadline:
                self.misses += 1
                self.spun_ns += t - start
                return False

    def until_at_least(self, words, i: int, value: int) -> int:
        """Spin until ``words[i] >= value`` or the budget is spent; as ``until_changed``, but returns
        the time it saw the word reach ``value`` (monotonic ns: when a client saw its answer), 0 when
        the budget ran out."""
        now, chunk = time.monotonic_ns, self._chunk
        start = self.started_ns = now()
        deadline = start + self.budget_ns
        while True:
            for _ in chunk:
                if words[i] >= value:
                    self.hits += 1
                    return now()
            t = now()
            if t >= deadline:
                self.misses += 1
                self.spun_ns += t - start
                return 0

    def learns_this_hit(self) -> bool:
        """Whether the caller should tell ``caught`` about the last hit (one in LEARN_EVERY)."""
        return not self.hits % LEARN_EVERY

    def caught(self, event_ns: int) -> None:
        """A hit's wait (a sampled one, see ``learns_this_hit``), learned once the caller has done
        what the event was for."""
        wait = max(0, event_ns - self.started_ns)
        self.spun_ns += wait * LEARN_EVERY  # standing for the hits not learned from
        self.learn(wait)

    def learn(self, wait_ns: int) -> None:
        """How long a wait lasted, from the start of its spin to the event (or a timeout)."""
        if wait_ns <= self.max_ns:
            error = wait_ns - self.typical_ns
            self.typical_ns += error / 8
            self.spread_ns += (abs(error) - self.spread_ns) / 4
            self.budget_ns = int(min(self.max_ns, max(self.floor_ns, 2 * self.typical_ns + 4 * self.spread_ns + 1_000)))
        else:
            self.budget_ns = max(self.floor_ns, self.budget_ns // 2)

    def stats(self) -> dict:
        return {
            "hits": self.hits,
            "misses": self.misses,
            "spun_ms": round(self.spun_ns / 1e6, 3),
            "budget_us": self.budget_ns / 1000,
        }
