"""The inference worker: a spawned subprocess pinned to one CPU, claiming READY slots in batches.

As in the original inference actor: ``sched_setaffinity`` to one CPU, ``nice(-20)``, SCHED_FIFO during inference
when permitted (SCHED_OTHER while idle; with ``fifo`` budget, the default, also for as long as more
SCHED_FIFO would overrun the host's RT budget, see ``_Fifo``), one BLAS thread, first touch of the shared memory from
its own CPU, batches of up to ``max_batch`` with a short wait for at least ``min_batch``. Idle, it
spins briefly and then blocks until a client rings (``idle`` adaptive, the default), or keeps the
original actor's 0.5 ms idle sleep (``sleep``) or busy polling (``spin``); see ``_serve_shm``.

Per inference it records wall and thread-CPU time, the CPU-time reads *inside* the wall-clock
reads: ``deschedule = max(0, wall - cpu)`` is time the thread was runnable but not running.
"""

from __future__ import annotations

import collections
import os
import pickle
import selectors
import socket
import struct
import time

from hostkit.smoke.queue import (
    DONE,
    ERROR,
    PROCESSING,
    READY,
    PartitionAllocator,
    SharedInferenceQueue,
    announcements_matter,
    find_in,
)

FIFO_PRIORITY = 50
NEVER_NS = 1 << 62


def _set_fifo(on: bool) -> bool:
    try:
        if on:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO_PRIORITY))
        else:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        return True
    except (PermissionError, OSError):
        return False


def shm_numa_nodes(path_fragment: str) -> dict[str, int]:
    """Pages per NUMA node of the mapping whose file name contains ``path_fragment`` (numa_maps)."""
    nodes: dict[str, int] = {}
    try:
        with open("/proc/self/numa_maps") as f:
            for line in f:
                if path_fragment in line:
                    for tok in line.split():
                        if tok.startswith("N") and "=" in tok and tok[1:].split("=")[0].isdigit():
                            node, count = tok[1:].split("=")
                            nodes[node] = nodes.get(node, 0) + int(count)
    except OSError:
        pass
    return nodes


def cpu_node(cpu: int) -> int | None:
    base = f"/sys/devices/system/cpu/cpu{cpu}"
    try:
        for name in os.listdir(base):
            if name.startswith("node") and name[4:].isdigit():
                return int(name[4:])
    except OSError:
        pass
    return None


def worker_main(cfg: dict, conn) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the orchestrator owns Ctrl-C and cleanup
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    cpu = cfg["cpu"]
    info = {"pid": os.getpid(), "cpu": cpu}
    try:
        os.sched_setaffinity(0, {cpu})
        info["pinned"] = sorted(os.sched_getaffinity(0)) == [cpu]
    except OSError as exc:
        info["pinned"] = False
        info["pin_error"] = str(exc)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -20)
        info["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    except OSError:
        info["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    policy = cfg.get("fifo", "budget")
    info["fifo_available"] = policy != "off" and _set_fifo(True)
    if info["fifo_available"]:
        _set_fifo(False)
    info["fifo_limit"] = fifo_limit(policy) if info["fifo_available"] else None

    from hostkit.smoke.model import OnnxModel, SyntheticModel

    _preload()  # numpy, for the tensor views, before we say we are ready
    model = OnnxModel(cfg["model"]) if cfg.get("model") else SyntheticModel(cfg["infer_ms"])
    info["model"] = model.describe()
    q = None
    server = None
    if cfg["transport"] == "shm":
        q = SharedInferenceQueue.attach(cfg["queue"])
        info["prefaulted_pages"] = q.prefault()  # first touch from the worker's own CPU
        info["shm_nodes"] = shm_numa_nodes(cfg["queue"])
    else:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        info["port"] = server.getsockname()[1]
    info["cpu_node"] = cpu_node(cpu)
    conn.send({"ready": True, **info})

    stats = {"batches": 0, "inferences": 0, "fifo_batches": 0}
    cpu0 = time.process_time()
    if q is not None:
        _serve_shm(q, model, cfg, info, stats)
    else:
        _serve_socket(server, model, cfg, info, stats, conn)
    stats["cpu_s"] = round(time.process_time() - cpu0, 4)
    conn.send({"done": True, **stats})


def _preload() -> None:
    """Import now what the run will import (numpy, for the tensor views): not on the clock."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        pass


def _infer(model, tensor):
    t0 = time.monotonic_ns()
    c0 = time.thread_time_ns()
    out = model(tensor)
    c1 = time.thread_time_ns()
    t1 = time.monotonic_ns()
    return out, t1 - t0, c1 - c0, t1


def read_int(path: str) -> int | None:
    """The integer a /proc or /sys file holds (its first word), or None."""
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def fifo_limit(policy: str) -> dict | None:
    """With ``policy`` budget and a finite RT budget on this host: the SCHED_FIFO time the worker
    allows itself in any window of one RT period (``limit_ns`` of ``period_ns``), the budget less a
    margin (5%, at least 10 ms) for the inference that crosses the limit before it is seen.

    Why this bound suffices: a CPU's RT time (the root group's, with or without CONFIG_RT_GROUP_SCHED)
    accumulates while RT tasks run and each period boundary takes ``sched_rt_runtime_us`` off it; the
    throttle parks the CPU's RT tasks when it exceeds the budget. If no one-period window holds more
    SCHED_FIFO wall time than the limit, it never does (wall time >= run time), as long as the worker
    is the CPU's only RT task, the CPU was not overdrawn when it started (RT time charged before
    drains within a period at the budget it was charged under) and no single inference outlasts the
    margin (a vCPU the host stops inside one is charged that time as run time: tests/vm/test_numa2.py).
    None: no limit (policy always, RT throttling off (-1), or the budget unreadable)."""
    if policy != "budget":
        return None
    runtime = read_int("/proc/sys/kernel/sched_rt_runtime_us")
    period = read_int("/proc/sys/kernel/sched_rt_period_us")
    if runtime is None or period is None or runtime < 0 or runtime >= period:
        return None
    limit_us = max(0, runtime - max(10_000, runtime // 20))
    return {"limit_ns": limit_us * 1000, "period_ns": period * 1000}


class _Fifo:
    """SCHED_FIFO switched on for work and off when idle, with the time spent in it.

    With a ``limit`` (``fifo_limit``) it also keeps the SCHED_FIFO time of every window of one RT
    period under that limit: ``enter`` refuses (the batch runs in SCHED_OTHER at nice -20, ``held``)
    while the last period's SCHED_FIFO time has reached it, and ``until`` is the time at which the
    worker must leave SCHED_FIFO (checked after each inference, and before an idle spin that could
    outlast it). So the kernel's RT throttle does not park it (see ``fifo_limit`` for the limits of
    that): the time given back goes to what else is runnable on its CPU (a per-CPU kernel worker the
    throttle exists for), in slices of the fair scheduler instead of one park of ``period - runtime``."""

    def __init__(self, available: bool, limit: dict | None = None) -> None:
        self.available = available
        self.on = False
        self.since = 0
        self.total_ns = 0
        self.until = NEVER_NS
        self.held = 0
        self.limit_ns = limit["limit_ns"] if limit else None
        self.period_ns = limit["period_ns"] if limit else 0
        self.stints: collections.deque[tuple[int, int]] = collections.deque()  # (start, end) in the last period
        self.window_ns = 0  # sum of the stints' lengths

    def enter(self) -> None:
        if not self.available or self.on:
            return
        now = time.monotonic_ns()
        if self.limit_ns is not None:
            stints, edge = self.stints, now - self.period_ns
            while stints and stints[0][1] <= edge:
                start, end = stints.popleft()
                self.window_ns -= end - start
            # only the oldest stint can straddle the window's edge: its part before the edge is out
            left = self.limit_ns - self.window_ns + (max(0, edge - stints[0][0]) if stints else 0)
            if left <= 0:
                self.held += 1
                return
            self.until = now + left
        _set_fifo(True)
        self.on, self.since = True, now

    def leave(self) -> None:
        if self.on:
            _set_fifo(False)
            now = time.monotonic_ns()
            self.on = False
            self.total_ns += now - self.since
            if self.limit_ns is not None:
                self.stints.append((self.since, now))
                self.window_ns += now - self.since
                self.until = NEVER_NS


IDLE_BLOCK_S = 0.1  # the longest a blocked worker waits before it looks at the stop flag and its parent
SCAN_ALL = 16  # batches between two scans of the whole queue while the slots below ``top`` keep it busy


def _serve_shm(q: SharedInferenceQueue, model, cfg: dict, info: dict, stats: dict) -> None:
    """Claim READY slots in batches and answer them.

    Idle modes: ``sleep`` is the original actor's loop (0.5 ms idle sleep; wait the whole min-batch wait for
    ``min_batch``; SCHED_FIFO on for each batch, off after it); ``spin`` is the same without the
    idle sleep (busy polling; FIFO still off between batches, or a spinning FIFO task would starve
    its CPU); ``adaptive`` spins for a bounded, adaptive time on the doorbell word (queue.PARTY)
    after the last request, then blocks on its eventfd until a client rings (FIFO stays on while
    it spins and goes off before it blocks), and waits for ``min_batch`` only while what it holds
    and what the clients have announced within the wait can make it.

    Every request passes through this loop: what it needs is bound to local names once, slot
    offsets are precomputed, and shared words are read and stored through one-item views. It stays
    one long function on purpose: split into helpers, every batch would pay their calls and lookups
    on the path bench/smoke_transport.py measures against the bare floor.
    """
    from hostkit.smoke.wake import Bell, Spin

    max_batch, min_batch, nslots = cfg["max_batch"], cfg["min_batch"], q.nslots
    min_wait_ns = int(cfg["min_batch_wait_ms"] * 1e6)
    idle = cfg["idle"]
    adaptive = idle == "adaptive"
    idle_sleep = cfg["idle_sleep_ms"] / 1000.0
    fifo = _Fifo(info["fifo_available"], info["fifo_limit"])
    fifo_per_batch = fixed_wait = not adaptive  # the original actor's loop: FIFO per batch, fixed min-batch wait
    may_fill = announcements_matter(cfg)  # else no announcement can ever make min_batch: never wait
    tensor_count = q.tensor_size // 4
    tensors = [q.tensor(i, count=tensor_count) for i in range(nslots)]  # views made once, no copies
    pack_out = struct.Struct("<d").pack_into
    pack_result = q.RESULT.pack_into
    buf = q.shm.buf
    resp_at = [q.off_resp + i * q.resp_size for i in range(nslots)]
    result_at = [q.result_offset(i) for i in range(nslots)]
    unpack_submitted, submitted_at = q.SUBMITTED.unpack_from, [q.submitted_offset(i) for i in range(nslots)]
    states, step = q.state_words()
    stop, completed_word = q.header_word("stop"), q.header_word("completed")
    coming_by, now_ns, thread_ns = q.coming_by, time.monotonic_ns, time.thread_time_ns
    # The scan reads the slots below ``top`` (one past the highest slot ever claimed: clients reuse
    # their first free slots, see PartitionAllocator) and the whole queue when that finds nothing
    # and at every SCAN_ALL-th batch: a slot above ``top`` is claimed within SCAN_ALL batches and
    # raises ``top``.
    read_all, top = q.state_bytes, 0
    read_top = read_all
    fds = cfg.get("wake_fds") or {}
    me = Bell(q.party_flag(0), fds["worker"]) if adaptive else None
    doorbell = q.party_word(0, "doorbell")
    bells = [Bell(q.party_flag(k + 1), fd) for k, fd in enumerate(fds.get("clients", []))] if me else []
    owners = (
        PartitionAllocator.owners(nslots, q.nclients) if cfg.get("allocator", "partition") == "partition" else None
    )  # flock: the client is read from the slot's metadata
    spin = Spin(int(cfg["spin_us"] * 1000))
    block_s = cfg.get("idle_block_s", IDLE_BLOCK_S)
    parent = os.getppid()
    missed = completed = batches = fifo_batches = first_claim = last_done = 0  # first_claim..last_done: serving
    cursor = 0
    waited = 0  # 1: the spin caught this batch (a sampled hit); 2: a ring woke us for it (learned once answered)
    while not stop[0]:
        rung = doorbell[0]  # read before the scan: a request the scan misses changes it afterwards
        whole = not top or not batches % SCAN_ALL
        claimed = find_in((read_all if whole else read_top)(), READY, cursor, max_batch)
        if not claimed and not whole:
            claimed = find_in(read_all(), READY, cursor, max_batch)
            whole = True
        if whole and claimed and max(claimed) >= top:
            top = max(claimed) + 1
            read_top = q.state_reader(top)
        if not claimed:
            if idle == "sleep":
                fifo.leave()
                time.sleep(idle_sleep)
                continue
            if idle == "spin":
                continue
            if fifo.on and now_ns() + spin.max_ns > fifo.until:
                fifo.leave()  # the spin could outlast the RT budget's limit
            if spin.until_changed(doorbell, 0, rung):
                waited = 1 if spin.learns_this_hit() else 0
                continue
            fifo.leave()
            if me.sleep(lambda: q.any_in(READY) or stop[0], block_s):
                waited = 2
            else:
                spin.learn(NEVER_NS)
                if os.getppid() != parent:
                    break  # the orchestrator is gone: nobody will collect or stop us
                if q.any_in(READY) and not me.rung_within(0.001):
                    missed += 1  # a request published while we slept, and no ring came
            continue
        for i in claimed:
            states[i * step] = PROCESSING  # ours now: the next scans skip it
        n = len(claimed)
        if (
            n < min_batch
            and min_wait_ns
            and (fixed_wait or may_fill and n + coming_by(now_ns() + min_wait_ns) >= min_batch)
        ):
            claimed += _more(q, n, cursor, max_batch, min_batch, now_ns() + min_wait_ns, fixed_wait)
            n = len(claimed)
        cursor = claimed[-1] + 1  # (nslots: find_in wraps to 0)
        claim = now_ns()
        if not first_claim:
            first_claim = claim
        if not fifo.on:
            fifo.enter()
        if fifo.on:
            fifo_batches += 1
        for i in claimed:
            try:
                t0 = now_ns()  # _infer, inlined: the CPU-time reads inside the wall-clock reads
                c0 = thread_ns()
                out = model(tensors[i])
                c1 = thread_ns()
                t1 = now_ns()
                pack_out(buf, resp_at[i], out)
                pack_result(buf, result_at[i], claim, t1, t1 - t0, c1 - c0)
                states[i * step] = DONE
                if t1 > fifo.until:  # the RT budget's limit (policy budget): the rest in SCHED_OTHER
                    fifo.leave()
            except Exception:  # a model error is the request's ERROR, not the worker's death
                states[i * step] = ERROR
            if bells:
                bells[owners[i] if owners is not None else q.client_of(i)].ring()
        if fifo_per_batch:
            fifo.leave()
        completed += n
        completed_word[0] = completed
        batches += 1
        last_done = now_ns()
        if waited:  # the wait, from the spin's start until the first of these was submitted
            submitted = unpack_submitted(buf, submitted_at[claimed[0]])[0]
            if waited == 1:
                spin.caught(submitted)
            else:  # not until we woke: the wake-up's latency is not the clients' pace
                spin.learn(submitted - spin.started_ns)
            waited = 0
    fifo.leave()
    stats.update(inferences=completed, batches=batches, fifo_batches=fifo_batches, fifo_held=fifo.held)
    stats["fifo_ms"] = round(fifo.total_ns / 1e6, 3)
    stats["serving_ms"] = round((last_done - first_claim) / 1e6, 3) if first_claim else 0.0
    stats["spin"] = spin.stats()
    stats["sleeps"] = me.sleeps if me else 0
    stats["rings_sent"] = sum(b.rings for b in bells)
    stats["missed_wakeups"] = missed


def _more(
    q: SharedInferenceQueue, have: int, cursor: int, max_batch: int, min_batch: int, deadline: int, fixed: bool
) -> list[int]:
    """More READY slots for a batch of ``have`` (< ``min_batch``), until ``deadline``. ``fixed`` (the
    original actor's): wait the whole time; otherwise only while the requests the clients have announced
    before the deadline can still make ``min_batch``: a request is never held back for a batch
    that cannot fill."""
    more: list[int] = []
    now_ns = time.monotonic_ns
    while have + len(more) < min_batch:
        # decided before the scan: what a client published before it withdrew its announcement is
        # READY by the time the announcement reads withdrawn (its stores are in that order)
        last = not fixed and have + len(more) + q.coming_by(deadline) < min_batch or now_ns() >= deadline
        for i in q.find_from(READY, cursor, max_batch - have - len(more)):
            q.set_state(i, PROCESSING)
            more.append(i)
        if last:
            break
    return more


def _recv_exact(sock, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _serve_socket(server, model, cfg: dict, info: dict, stats: dict, conn) -> None:
    """The original inference actor's socket transport: length-prefixed pickles over TCP loopback."""
    try:
        import numpy as np
    except ImportError:
        np = None

    sel = selectors.DefaultSelector()
    sel.register(server, selectors.EVENT_READ)
    sel.register(conn, selectors.EVENT_READ)
    fifo = _Fifo(info["fifo_available"], info["fifo_limit"])
    resp_pad = bytes(cfg["resp_size"])
    running = True
    while running:
        for key, _ in sel.select(timeout=0.5):
            if key.fileobj is server:
                c, _ = server.accept()
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sel.register(c, selectors.EVENT_READ)
                continue
            if key.fileobj is conn:
                conn.recv()  # the orchestrator's stop
                running = False
                break
            c = key.fileobj
            head = _recv_exact(c, 4)
            if head is None:
                sel.unregister(c)
                c.close()
                continue
            msg = pickle.loads(_recv_exact(c, struct.unpack("<I", head)[0]))
            claim = time.monotonic_ns()
            fifo.enter()
            stats["fifo_batches"] += fifo.on
            tensor = np.frombuffer(msg["tensor"], dtype=np.float32) if np is not None else msg["tensor"]
            out, wall, cpu, done = _infer(model, tensor)
            fifo.leave()
            reply = pickle.dumps(
                {
                    "id": msg["id"],
                    "claim_ns": claim,
                    "wall_ns": wall,
                    "cpu_ns": cpu,
                    "done_ns": done,
                    "out": out,
                    "resp": resp_pad,
                },
                protocol=pickle.HIGHEST_PROTOCOL,
            )
            c.sendall(struct.pack("<I", len(reply)) + reply)
            stats["inferences"] += 1
            stats["batches"] += 1
    stats.update(fifo_ms=round(fifo.total_ns / 1e6, 3), fifo_held=fifo.held)
