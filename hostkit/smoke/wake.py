"""Wake-ups between the worker and the clients: spin briefly, then block on an eventfd.

Every party (the worker, each client) has a *bell*: a ``sleeping`` word on its own cache line in
the queue segment and an ``eventfd`` created by the orchestrator and inherited by the spawned
processes. A party that runs out of work spins for a bounded, adaptive time (``Spin``), then
announces itself asleep and blocks in ``select`` on its eventfd. The other side, after publishing
(a READY request, a DONE result), looks at the sleeping word and writes the eventfd only when it
is set: a party that is awake costs its peers no system call.

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


def fence() -> None:
    """A full memory barrier (see the module docstring)."""
    _fence.acquire()
    _fence.release()


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
        fence()
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


class Spin:
    """A bounded spin whose budget follows the waits it sees (``learn``): about twice the recent
    typical wait when that is within ``max_ns`` (spinning would have caught it), halved after a
    wait longer than ``max_ns`` (spinning is wasted CPU), never below a floor of 1 us. Counts spins
    that caught the event (hits) and those that ran out (misses)."""

    def __init__(self, max_ns: int) -> None:
        self.max_ns = max(0, int(max_ns))
        self.floor_ns = min(self.max_ns, 1_000)
        self.budget_ns = self.max_ns
        self.typical_ns = self.max_ns / 4  # moving average of the waits within max_ns
        self.started_ns = 0
        self.hits = 0
        self.misses = 0
        self.spun_ns = 0

    def run(self, probe):
        """Call ``probe()`` until it returns something true or the budget is spent; returns its last
        result. After a miss the caller blocks, then tells ``learn`` how long the whole wait took."""
        now = time.monotonic_ns
        start = self.started_ns = now()
        deadline = start + self.budget_ns
        while True:
            got = probe()
            t = now()
            if got or t >= deadline:
                break
        self.spun_ns += t - start
        if got:
            self.hits += 1
            self.learn(t - start)
        else:
            self.misses += 1
        return got

    def learn(self, wait_ns: int) -> None:
        """How long a wait lasted, from the start of its spin to the event (or a timeout)."""
        if wait_ns <= self.max_ns:
            self.typical_ns += (wait_ns - self.typical_ns) / 8
            self.budget_ns = int(min(self.max_ns, max(self.floor_ns, 2 * self.typical_ns + 1_000)))
        else:
            self.budget_ns = max(self.floor_ns, self.budget_ns // 2)

    def stats(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "spun_ms": round(self.spun_ns / 1e6, 3),
                "budget_us": self.budget_ns / 1000}
