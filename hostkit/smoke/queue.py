"""SharedInferenceQueue: the seeds' POSIX shared-memory inference queue.

One segment (``/dev/shm/<name>``, mode 0600) holds, for ``nslots`` slots:

* the **state array** (FREE 0 -> WRITING 1 -> READY 2 -> PROCESSING 3 -> DONE 4 / ERROR 5 -> FREE),
  one 32-bit state per slot, every state on its own 64-byte cache line by default
  (``state_stride=64``); ``state_stride=4`` packs them as the seed did (16 states per
  cache line: false sharing between clients and the worker);
* per-slot **metadata** (64 bytes: sequence, owner pid, timestamps, inference wall/CPU);
* the **request** region (16 KiB per slot) and the **response** region (32 KiB per slot);
* the **tensor** region: per-slot ndarray slots written by the client and read in place by
  the worker (zero-copy: both map the same pages).

Slot allocation, two designs (``allocator``):

* ``flock`` (the seed's): a client takes ``fcntl.flock`` on a lock file, finds a FREE slot,
  marks it WRITING, unlocks;
* ``partition`` (lock-free, one writer per transition): slot ``i`` belongs to client
  ``i % nclients``; only its owner moves it FREE->WRITING->READY and DONE->FREE, only the
  worker moves it READY->PROCESSING->DONE. A 32-bit aligned store is atomic on every
  platform CPython runs on; x86's store ordering (TSO) makes the payload visible before the
  state that publishes it. On weakly ordered CPUs (arm64) a fence would be needed.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import secrets
import struct
import time
from collections import namedtuple

FREE, WRITING, READY, PROCESSING, DONE, ERROR = range(6)
MAGIC = b"HKSQ"
VERSION = 2
CACHE_LINE = 64


class Record:
    """A fixed binary layout written down once: field names, their ``struct`` formats, every offset.

    ``offset[name]`` is a field's byte offset in the record; ``field(name)`` the ``Struct`` of that
    field alone; ``span(first, last)`` the ``Struct`` of adjacent fields read or written in one go.
    """

    def __init__(self, *fields: tuple[str, str], size: int | None = None) -> None:
        self.names = tuple(name for name, _ in fields)
        self.whole = struct.Struct("<" + "".join(fmt for _, fmt in fields))
        self.offset: dict[str, int] = {}
        self._fmt = dict(fields)
        off = 0
        for name, fmt in fields:
            self.offset[name] = off
            off += struct.calcsize("<" + fmt)
        if off != self.whole.size:
            raise ValueError("fields must be naturally aligned (no implicit padding)")
        self.size = size if size is not None else off
        if self.size < off:
            raise ValueError(f"record of {off} bytes does not fit {self.size}")
        self.tuple = namedtuple("_".join(self.names[:2]) + "_record", self.names)

    def field(self, name: str) -> struct.Struct:
        return struct.Struct("<" + self._fmt[name])

    def span(self, first: str, last: str) -> struct.Struct:
        names = self.names[self.names.index(first):self.names.index(last) + 1]
        return struct.Struct("<" + "".join(self._fmt[n] for n in names))

    def unpack(self, buf, base: int = 0):
        return self.tuple._make(self.whole.unpack_from(buf, base))

    def pack(self, buf, base: int = 0, **values) -> None:
        self.whole.pack_into(buf, base, *(values[n] for n in self.names))


# The segment's first 64 bytes. ``stop``: the run's stop flag (the orchestrator sets it, everyone
# reads it); ``completed``: inferences done so far (the worker alone writes it; the orchestrator
# reads it for progress and liveness).
HEADER = Record(("magic", "4s"), ("version", "I"), ("nslots", "I"), ("req_size", "I"), ("resp_size", "I"),
                ("tensor_size", "I"), ("state_stride", "I"), ("stop", "I"), ("completed", "Q"), ("nclients", "I"),
                size=64)
# One cache line per party (the worker is party 0, client k is party k + 1), written by that party:
# ``sleeping`` (1 while it is blocked on its eventfd, see wake.py) and, for a client, its
# announcement: ``coming`` requests from ``next_submit_ns`` on (monotonic ns; NEVER: none before
# one of its requests comes back). The worker's min-batch wait reads them to know what is coming.
PARTY = Record(("sleeping", "I"), ("coming", "I"), ("next_submit_ns", "Q"), size=CACHE_LINE)
NEVER = 2 ** 64 - 1
# Per slot, 64 bytes. The client writes the whole record when it submits; the worker writes
# ``claim_ns`` (when it claimed the slot's batch) to ``cpu_ns`` in one store once it is answered.
SLOT_META = Record(("seq", "Q"), ("submit_ns", "Q"), ("claim_ns", "Q"), ("done_ns", "Q"), ("wall_ns", "Q"),
                   ("cpu_ns", "Q"), ("owner_pid", "I"), ("req_len", "I"), ("client", "I"), ("reserved", "I"),
                   size=64)


SHM_DIR = "/dev/shm"
SEGMENT_PREFIX = "hostkit-smoke-"


def _align(n: int, a: int = 4096) -> int:
    return (n + a - 1) // a * a


class Segment:
    """A POSIX shared-memory segment (what shm_open does on Linux: a file in /dev/shm).

    Not multiprocessing.shared_memory: its resource tracker would unlink a segment when any
    attached process exits (before Python 3.13), and the creator must own cleanup here.
    """

    def __init__(self, name: str, create: bool, size: int = 0) -> None:
        if "/" in name or not name:
            raise ValueError(f"bad segment name {name!r}")
        self.name = name
        self.path = os.path.join(SHM_DIR, name)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(self.path, flags, 0o600)
        try:
            if create:
                os.fchmod(fd, 0o600)
                os.ftruncate(fd, size)
            self.size = os.fstat(fd).st_size
            self._mmap = mmap.mmap(fd, self.size)
        finally:
            os.close(fd)
        self.buf = memoryview(self._mmap)

    def close(self) -> None:
        try:
            self.buf.release()
            self._mmap.close()
        except BufferError:
            pass  # a live numpy view still maps it; the mapping goes with the process

    def unlink(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class SharedInferenceQueue:
    def __init__(self, shm: Segment) -> None:
        self.shm = shm
        h = HEADER.unpack(shm.buf)
        if h.magic != MAGIC or h.version != VERSION:
            raise ValueError(f"/dev/shm/{shm.name} is not a hostkit inference queue (version {VERSION})")
        self.nslots, self.req_size, self.resp_size = h.nslots, h.req_size, h.resp_size
        self.tensor_size, self.state_stride, self.nclients = h.tensor_size, h.state_stride, h.nclients
        self._layout()

    # ------------------------------------------------------------------ create / attach
    @classmethod
    def create(cls, name: str | None = None, nslots: int = 256, req_size: int = 16384, resp_size: int = 32768,
               tensor_size: int = 16384, state_stride: int = CACHE_LINE, nclients: int = 64) -> "SharedInferenceQueue":
        if nslots < 1 or nslots > 65536:
            raise ValueError(f"nslots must be 1..65536, got {nslots}")
        if state_stride not in (4, CACHE_LINE):
            raise ValueError("state_stride must be 4 (packed) or 64 (one cache line per slot)")
        if not 1 <= nclients <= 4096:
            raise ValueError(f"nclients must be 1..4096, got {nclients}")
        size = cls._offsets(nslots, req_size, resp_size, tensor_size, state_stride, nclients)[-1]
        shm = Segment(name or SEGMENT_PREFIX + secrets.token_hex(6), create=True, size=size)
        HEADER.pack(shm.buf, 0, magic=MAGIC, version=VERSION, nslots=nslots, req_size=req_size, resp_size=resp_size,
                    tensor_size=tensor_size, state_stride=state_stride, stop=0, completed=0, nclients=nclients)
        q = cls(shm)
        for party in range(1, nclients + 1):
            q.announce(party, NEVER, 0)
        return q

    @classmethod
    def attach(cls, name: str) -> "SharedInferenceQueue":
        return cls(Segment(name, create=False))

    @staticmethod
    def _offsets(n, req, resp, tensor, stride, nclients) -> tuple[int, int, int, int, int, int, int]:
        """(parties, state, meta, request, response, tensor, total size): regions page-aligned where large."""
        off_party = HEADER.size
        off_state = off_party + (1 + nclients) * PARTY.size
        off_meta = off_state + _align(n * stride, CACHE_LINE)
        off_req = _align(off_meta + n * SLOT_META.size)
        off_resp = off_req + _align(n * req)
        off_tensor = off_resp + _align(n * resp)
        return off_party, off_state, off_meta, off_req, off_resp, off_tensor, off_tensor + _align(n * tensor)

    def _layout(self) -> None:
        n = self.nslots
        (self.off_party, self.off_state, self.off_meta, self.off_req, self.off_resp, self.off_tensor, _) = \
            self._offsets(n, self.req_size, self.resp_size, self.tensor_size, self.state_stride, self.nclients)
        self._states = self.shm.buf[self.off_state:self.off_state + n * self.state_stride].cast("I")
        self._step = self.state_stride // 4
        self._state_bytes = None  # the low byte of every state, strided (numpy), for find_from
        self._coming_by = None  # built on first use (coming_by)
        self._views: list[memoryview] = []

    @property
    def name(self) -> str:
        return self.shm.name

    # The header's run-wide fields (see HEADER).
    _STOP = HEADER.field("stop")
    _COMPLETED = HEADER.field("completed")

    def stop_requested(self) -> bool:
        return self._STOP.unpack_from(self.shm.buf, HEADER.offset["stop"])[0] != 0

    def request_stop(self) -> None:
        self._STOP.pack_into(self.shm.buf, HEADER.offset["stop"], 1)

    def completed(self) -> int:
        return self._COMPLETED.unpack_from(self.shm.buf, HEADER.offset["completed"])[0]

    def set_completed(self, n: int) -> None:
        """The worker's running count (it is the only writer)."""
        self._COMPLETED.pack_into(self.shm.buf, HEADER.offset["completed"], n)

    # ------------------------------------------------------------------ states
    def state(self, i: int) -> int:
        return self._states[i * self._step]

    def set_state(self, i: int, value: int) -> None:
        self._states[i * self._step] = value

    def states(self) -> list[int]:
        return [self._states[i * self._step] for i in range(self.nslots)]

    def find(self, state: int, slots=None, limit: int | None = None) -> list[int]:
        out = []
        step, st = self._step, self._states
        for i in (range(self.nslots) if slots is None else slots):
            if st[i * step] == state:
                out.append(i)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def find_from(self, state: int, start: int, limit: int) -> list[int]:
        """Slots in ``state`` in circular order from ``start`` (the worker resumes after the slot it
        claimed last: fair to every client). States are small little-endian 32-bit words, so their
        first bytes, gathered by one strided numpy copy, say everything: one copy and ``bytes.find``
        (~0.3 us for 256 slots with nothing found) instead of a Python loop (~15 us)."""
        view = self._state_bytes
        if view is None:
            try:
                import numpy as np
            except ImportError:  # a bare host: python3 without numpy
                view = self._state_bytes = _StridedBytes(self.shm._mmap, self.off_state, self.nslots, self.state_stride)
            else:
                view = self._state_bytes = np.frombuffer(self.shm.buf, dtype=np.uint8,
                                                         count=self.nslots * self.state_stride,
                                                         offset=self.off_state)[:: self.state_stride]
        b = view.tobytes()
        out: list[int] = []
        i = b.find(state, start)
        while i != -1 and len(out) < limit:
            out.append(i)
            i = b.find(state, i + 1)
        if len(out) < limit and start:
            i = b.find(state, 0, start)
            while i != -1 and len(out) < limit:
                out.append(i)
                i = b.find(state, i + 1, start)
        return out

    def any_in(self, state: int) -> bool:
        view = self._state_bytes
        if view is None:
            return bool(self.find_from(state, 0, 1))
        return view.tobytes().find(state) != -1

    # ------------------------------------------------------------------ parties (see PARTY and wake.py)
    def party_flag(self, party: int) -> memoryview:
        """Party's ``sleeping`` word as a one-item 32-bit view (a Bell's flag)."""
        off = self.off_party + party * PARTY.size + PARTY.offset["sleeping"]
        v = self.shm.buf[off:off + 4].cast("I")
        self._views.append(v)
        return v

    _ANNOUNCE = PARTY.span("coming", "next_submit_ns")  # adjacent: one store

    def announce(self, party: int, next_submit_ns: int, coming: int) -> None:
        """A client's word to the worker: ``coming`` requests from ``next_submit_ns`` on."""
        self._ANNOUNCE.pack_into(self.shm.buf, self.off_party + party * PARTY.size + PARTY.offset["coming"],
                                 coming, next_submit_ns)

    def coming_by(self, deadline_ns: int) -> int:
        """How many requests the clients have announced by ``deadline_ns``."""
        if self._coming_by is None:
            self._coming_by = self._make_coming_by()
        return self._coming_by(deadline_ns)

    def _make_coming_by(self):
        first = self.off_party + PARTY.size + PARTY.offset["coming"]
        if self.nclients > 8:  # below that, a few struct reads beat numpy calls
            try:
                import numpy as np
            except ImportError:
                pass
            else:
                step = PARTY.size // 4
                words = np.frombuffer(self.shm.buf, dtype=np.uint32, count=self.nclients * step, offset=first)
                coming = words[::step]
                when = np.frombuffer(self.shm.buf, dtype=np.uint64, count=self.nclients * step // 2,
                                     offset=first + 4)[:: step // 2]
                return lambda deadline: int(coming[when <= deadline].sum())
        unpack, buf = self._ANNOUNCE.unpack_from, self.shm.buf
        offsets = [first + k * PARTY.size for k in range(self.nclients)]

        def coming_by(deadline: int) -> int:
            n = 0
            for off in offsets:
                coming, when = unpack(buf, off)
                if when <= deadline:
                    n += coming
            return n
        return coming_by

    # ------------------------------------------------------------------ metadata and payloads
    def meta(self, i: int):
        """Slot ``i``'s metadata as a named tuple (SLOT_META's fields)."""
        return SLOT_META.unpack(self.shm.buf, self.off_meta + i * SLOT_META.size)

    def submit_meta(self, i: int, seq: int, submit_ns: int, owner_pid: int, req_len: int, client: int) -> None:
        """The client's record of a request: everything the worker fills in starts at zero."""
        # SLOT_META's fields in order (positional: this is on every request's path)
        SLOT_META.whole.pack_into(self.shm.buf, self.off_meta + i * SLOT_META.size,
                                  seq, submit_ns, 0, 0, 0, 0, owner_pid, req_len, client, 0)

    _CLIENT = SLOT_META.field("client")

    def client_of(self, i: int) -> int:
        off = self.off_meta + i * SLOT_META.size + SLOT_META.offset["client"]
        return self._CLIENT.unpack_from(self.shm.buf, off)[0]

    _RESULT = SLOT_META.span("claim_ns", "cpu_ns")  # adjacent: written in one store, read in one load

    def set_result(self, i: int, claim_ns: int, done_ns: int, wall_ns: int, cpu_ns: int) -> None:
        """The worker's record of an answered request (before it marks the slot DONE)."""
        off = self.off_meta + i * SLOT_META.size + SLOT_META.offset["claim_ns"]
        self._RESULT.pack_into(self.shm.buf, off, claim_ns, done_ns, wall_ns, cpu_ns)

    def result(self, i: int) -> tuple[int, int, int, int]:
        """(claim_ns, done_ns, wall_ns, cpu_ns) of a DONE slot."""
        off = self.off_meta + i * SLOT_META.size + SLOT_META.offset["claim_ns"]
        return self._RESULT.unpack_from(self.shm.buf, off)

    def owner_pid(self, i: int) -> int:
        return self.meta(i).owner_pid

    def request(self, i: int) -> memoryview:
        return self.shm.buf[self.off_req + i * self.req_size:self.off_req + (i + 1) * self.req_size]

    def response(self, i: int) -> memoryview:
        return self.shm.buf[self.off_resp + i * self.resp_size:self.off_resp + (i + 1) * self.resp_size]

    def tensor_bytes(self, i: int) -> memoryview:
        """The slot's tensor area as bytes (no copy): what a host without numpy uses."""
        return self.shm.buf[self.off_tensor + i * self.tensor_size:self.off_tensor + (i + 1) * self.tensor_size]

    def tensor(self, i: int, dtype="float32", count: int | None = None):
        """The slot's ndarray slot as a numpy array over the shared pages (no copy); without
        numpy, the same bytes as a memoryview."""
        try:
            import numpy as np
        except ImportError:
            return self.tensor_bytes(i)

        itemsize = np.dtype(dtype).itemsize
        n = self.tensor_size // itemsize if count is None else count
        return np.frombuffer(self.shm.buf, dtype=dtype, count=n, offset=self.off_tensor + i * self.tensor_size)

    def prefault(self) -> int:
        """Touch every page from the calling CPU (first-touch NUMA placement); returns pages touched."""
        buf = self.shm.buf
        pages = 0
        for off in range(0, len(buf), 4096):
            buf[off] = buf[off]
            pages += 1
        return pages

    # ------------------------------------------------------------------ cleanup
    def close(self) -> None:
        self._state_bytes = self._coming_by = None
        for v in [self._states, *self._views]:
            try:
                v.release()
            except ValueError:
                pass
        self.shm.close()

    def unlink(self) -> None:
        self.shm.unlink()


class _StridedBytes:
    """Every ``stride``-th byte of an mmap region, as ``bytes`` (find_from without numpy)."""

    def __init__(self, m: mmap.mmap, off: int, n: int, stride: int) -> None:
        self.m, self.off, self.end, self.stride = m, off, off + n * stride, stride

    def tobytes(self) -> bytes:
        return self.m[self.off:self.end:self.stride]


class _Allocator:
    """Slot allocation: ``acquire`` retries ``try_slot`` until a slot is WRITING for this client."""

    def try_slot(self) -> int | None:
        raise NotImplementedError

    def acquire(self, timeout: float = 1.0) -> int | None:
        deadline = time.monotonic() + timeout
        while True:
            i = self.try_slot()
            if i is not None or time.monotonic() > deadline:
                return i
            time.sleep(0.0001)

    def release(self, i: int) -> None:
        self.q.set_state(i, FREE)


class FlockAllocator(_Allocator):
    """The seed's allocation: a file lock around "find a FREE slot, mark it WRITING"."""

    def __init__(self, queue: SharedInferenceQueue, lockfile: str) -> None:
        self.q = queue
        self.fd = os.open(lockfile, os.O_RDWR | os.O_CREAT, 0o600)
        self.hint = 0

    def try_slot(self) -> int | None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            n = self.q.nslots
            for k in range(n):
                i = (self.hint + k) % n
                if self.q.state(i) == FREE:
                    self.q.set_state(i, WRITING)
                    self.hint = i + 1
                    return i
            return None
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)


class PartitionAllocator(_Allocator):
    """Lock-free: this client owns slots i with i % nclients == client_id; it alone writes FREE->WRITING."""

    def __init__(self, queue: SharedInferenceQueue, client_id: int, nclients: int) -> None:
        if not 0 <= client_id < nclients <= queue.nslots:
            raise ValueError(f"client {client_id} of {nclients} does not fit {queue.nslots} slots")
        self.q = queue
        self.slots = list(range(client_id, queue.nslots, nclients))
        self.pos = 0

    def try_slot(self) -> int | None:
        n = len(self.slots)
        for k in range(n):
            i = self.slots[(self.pos + k) % n]
            if self.q.state(i) == FREE:
                self.q.set_state(i, WRITING)
                self.pos = (self.pos + k + 1) % n
                return i
        return None
