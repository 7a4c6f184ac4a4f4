"""SharedInferenceQueue: the original inference actor's POSIX shared-memory inference queue.

One segment (``/dev/shm/<name>``, mode 0600) holds, for ``nslots`` slots:

* the **state array** (FREE 0 -> WRITING 1 -> READY 2 -> PROCESSING 3 -> DONE 4 / ERROR 5 -> FREE),
  one 32-bit state per slot, every state on its own 64-byte cache line by default
  (``state_stride=64``); ``state_stride=4`` packs them as the original actor did (16 states per
  cache line: false sharing between clients and the worker);
* per-slot **metadata** (64 bytes: sequence, owner pid, timestamps, inference wall/CPU);
* the **request** region (16 KiB per slot) and the **response** region (32 KiB per slot);
* the **tensor** region: per-slot ndarray slots written by the client and read in place by
  the worker (zero-copy: both map the same pages).

Slot allocation, two designs (``allocator``):

* ``flock`` (the original actor's): a client takes ``fcntl.flock`` on a lock file, finds a FREE slot,
  marks it WRITING, unlocks;
* ``partition`` (lock-free, one writer per transition): slot ``i`` belongs to client
  ``i % nclients``, which takes its lowest FREE one (the same few slots stay in cache); only its
  owner moves it FREE->WRITING->READY and DONE->FREE, only the
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
from functools import partial
from operator import getitem

FREE, WRITING, READY, PROCESSING, DONE, ERROR = range(6)
MAGIC = b"HKSQ"
VERSION = 3
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
        names = self.names[self.names.index(first) : self.names.index(last) + 1]
        return struct.Struct("<" + "".join(self._fmt[n] for n in names))

    def unpack(self, buf, base: int = 0):
        return self.tuple._make(self.whole.unpack_from(buf, base))

    def pack(self, buf, base: int = 0, **values) -> None:
        self.whole.pack_into(buf, base, *(values[n] for n in self.names))


# The segment's first 64 bytes. ``stop``: the run's stop flag (the orchestrator sets it, everyone
# reads it); ``completed``: inferences done so far (the worker alone writes it; the orchestrator
# reads it for progress and liveness).
HEADER = Record(
    ("magic", "4s"),
    ("version", "I"),
    ("nslots", "I"),
    ("req_size", "I"),
    ("resp_size", "I"),
    ("tensor_size", "I"),
    ("state_stride", "I"),
    ("stop", "I"),
    ("completed", "Q"),
    ("nclients", "I"),
    size=64,
)
# One cache line per party (the worker is party 0, client k is party k + 1), written by that party:
# ``sleeping`` (1 while it is blocked on its eventfd, see wake.py) and, for a client, its
# announcement: ``coming`` requests from ``next_submit_ns`` on (monotonic ns; NEVER: none before
# one of its requests comes back). The worker's min-batch wait reads them to know what is coming.
# ``doorbell`` is used on the worker's line only: every client, after it publishes a READY request,
# stores a token there that differs from any earlier value the worker may have read (see
# ``doorbell_token``), so a spinning worker watches one word instead of scanning every slot.
PARTY = Record(
    ("sleeping", "I"), ("coming", "I"), ("next_submit_ns", "Q"), ("doorbell", "I"), ("reserved", "I"), size=CACHE_LINE
)
NEVER = 2**64 - 1
TOKEN_MASK = (1 << 19) - 1  # doorbell token: the party above these bits, a per-party count in them


def doorbell_token(party: int, count: int) -> int:
    """The ``count``-th doorbell token of ``party`` (>= 1): never 0 (the initial value), never equal
    to another party's token, and never equal to the same party's previous one. So the word differs
    from what the worker last read as soon as anyone published after that read (the last writer's
    token differs from it), with no read-modify-write between clients. A client computes it as
    ``doorbell_token(party, 0) | count & TOKEN_MASK``: the same value, one operation on its path."""
    return (party << TOKEN_MASK.bit_length()) | count & TOKEN_MASK


# Per slot, 64 bytes. The client writes the whole record when it submits; the worker writes
# ``claim_ns`` (when it claimed the slot's batch) to ``cpu_ns`` in one store once it is answered.
SLOT_META = Record(
    ("seq", "Q"),
    ("submit_ns", "Q"),
    ("claim_ns", "Q"),
    ("done_ns", "Q"),
    ("wall_ns", "Q"),
    ("cpu_ns", "Q"),
    ("owner_pid", "I"),
    ("req_len", "I"),
    ("client", "I"),
    ("reserved", "I"),
    size=64,
)


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
    def create(
        cls,
        name: str | None = None,
        nslots: int = 256,
        req_size: int = 16384,
        resp_size: int = 32768,
        tensor_size: int = 16384,
        state_stride: int = CACHE_LINE,
        nclients: int = 64,
    ) -> SharedInferenceQueue:
        if nslots < 1 or nslots > 65536:
            raise ValueError(f"nslots must be 1..65536, got {nslots}")
        if state_stride not in (4, CACHE_LINE):
            raise ValueError("state_stride must be 4 (packed) or 64 (one cache line per slot)")
        if not 1 <= nclients <= 4096:
            raise ValueError(f"nclients must be 1..4096, got {nclients}")
        size = cls._offsets(nslots, req_size, resp_size, tensor_size, state_stride, nclients)[-1]
        shm = Segment(name or SEGMENT_PREFIX + secrets.token_hex(6), create=True, size=size)
        HEADER.pack(
            shm.buf,
            0,
            magic=MAGIC,
            version=VERSION,
            nslots=nslots,
            req_size=req_size,
            resp_size=resp_size,
            tensor_size=tensor_size,
            state_stride=state_stride,
            stop=0,
            completed=0,
            nclients=nclients,
        )
        q = cls(shm)
        for party in range(1, nclients + 1):
            q.announce(party, NEVER, 0)
        return q

    @classmethod
    def attach(cls, name: str) -> SharedInferenceQueue:
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
        (self.off_party, self.off_state, self.off_meta, self.off_req, self.off_resp, self.off_tensor, _) = (
            self._offsets(n, self.req_size, self.resp_size, self.tensor_size, self.state_stride, self.nclients)
        )
        self._states = self.shm.buf[self.off_state : self.off_state + n * self.state_stride].cast("I")
        self._step = self.state_stride // 4
        self.state_bytes = self.state_reader(n)
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
        for i in range(self.nslots) if slots is None else slots:
            if st[i * step] == state:
                out.append(i)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def state_reader(self, n: int):
        """A function returning the low byte of the first ``n`` slots' states (states are small
        little-endian words), as ``bytes``: one strided copy of the mapping (mmap's extended slice,
        ~0.2 us for 256 slots, C calls only). ``state_bytes`` reads every slot."""
        return partial(
            getitem, self.shm._mmap, slice(self.off_state, self.off_state + n * self.state_stride, self.state_stride)
        )

    def find_from(self, state: int, start: int, limit: int) -> list[int]:
        """Slots in ``state`` in circular order from ``start`` (the worker resumes after the slot it
        claimed last: fair to every client)."""
        return find_in(self.state_bytes(), state, start, limit)

    def any_in(self, state: int) -> bool:
        return self.state_bytes().find(state) != -1

    def state_words(self) -> tuple[memoryview, int]:
        """(the states as 32-bit words, words per state): slot ``i``'s state is ``words[i * step]``
        (the hot loops index it directly instead of calling ``state``)."""
        return self._states, self._step

    def word(self, offset: int, fmt: str = "I") -> memoryview:
        """A one-item view of the 32-bit (``I``) or 64-bit (``Q``) word at ``offset`` in the
        segment: reading or storing ``view[0]`` is one aligned access, no struct call."""
        v = self.shm.buf[offset : offset + struct.calcsize(fmt)].cast(fmt)
        self._views.append(v)
        return v

    def header_word(self, name: str) -> memoryview:
        """A HEADER field as a one-item view (``stop``, ``completed``)."""
        return self.word(HEADER.offset[name], HEADER._fmt[name])

    def party_word(self, party: int, name: str) -> memoryview:
        """A PARTY field of ``party`` as a one-item view (``sleeping``, ``doorbell``)."""
        return self.word(self.off_party + party * PARTY.size + PARTY.offset[name], PARTY._fmt[name])

    # ------------------------------------------------------------------ parties (see PARTY and wake.py)
    def party_flag(self, party: int) -> memoryview:
        """Party's ``sleeping`` word as a one-item 32-bit view (a Bell's flag)."""
        return self.party_word(party, "sleeping")

    def announce_offset(self, party: int) -> int:
        """Where ``announce`` stores (the clients pack ``ANNOUNCE`` there themselves)."""
        return self.off_party + party * PARTY.size + PARTY.offset["coming"]

    ANNOUNCE = PARTY.span("coming", "next_submit_ns")  # adjacent: one store

    def announce(self, party: int, next_submit_ns: int, coming: int) -> None:
        """A client's word to the worker: ``coming`` requests from ``next_submit_ns`` on."""
        self.ANNOUNCE.pack_into(self.shm.buf, self.announce_offset(party), coming, next_submit_ns)

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
                when = np.frombuffer(self.shm.buf, dtype=np.uint64, count=self.nclients * step // 2, offset=first + 4)[
                    :: step // 2
                ]
                return lambda deadline: int(coming[when <= deadline].sum())
        unpack, buf = self.ANNOUNCE.unpack_from, self.shm.buf
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
        SLOT_META.whole.pack_into(
            self.shm.buf, self.off_meta + i * SLOT_META.size, seq, submit_ns, 0, 0, 0, 0, owner_pid, req_len, client, 0
        )

    _CLIENT = SLOT_META.field("client")
    SUBMITTED = SLOT_META.field("submit_ns")

    def submitted_offset(self, i: int) -> int:
        """Where slot ``i``'s ``submit_ns`` is (SUBMITTED)."""
        return self.off_meta + i * SLOT_META.size + SLOT_META.offset["submit_ns"]

    def client_of(self, i: int) -> int:
        off = self.off_meta + i * SLOT_META.size + SLOT_META.offset["client"]
        return self._CLIENT.unpack_from(self.shm.buf, off)[0]

    RESULT = SLOT_META.span("claim_ns", "cpu_ns")  # adjacent: written in one store, read in one load

    def result_offset(self, i: int) -> int:
        """Where slot ``i``'s result (RESULT) is (the hot loops pack and unpack it there themselves)."""
        return self.off_meta + i * SLOT_META.size + SLOT_META.offset["claim_ns"]

    def result(self, i: int) -> tuple[int, int, int, int]:
        """(claim_ns, done_ns, wall_ns, cpu_ns) of a DONE slot."""
        return self.RESULT.unpack_from(self.shm.buf, self.result_offset(i))

    def owner_pid(self, i: int) -> int:
        return self.meta(i).owner_pid

    def request(self, i: int) -> memoryview:
        return self.shm.buf[self.off_req + i * self.req_size : self.off_req + (i + 1) * self.req_size]

    def tensor_bytes(self, i: int) -> memoryview:
        """The slot's tensor area as bytes (no copy): what a host without numpy uses."""
        return self.shm.buf[self.off_tensor + i * self.tensor_size : self.off_tensor + (i + 1) * self.tensor_size]

    def tensor_floats(self, i: int, count: int) -> memoryview:
        """The first ``count`` float32 of the slot's tensor area as a memoryview (what a client
        writes: a copy into it costs a third of numpy's, and needs no numpy)."""
        v = self.tensor_bytes(i)[: count * 4].cast("f")
        self._views.append(v)
        return v

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
        self._coming_by = None
        for v in [self._states, *self._views]:
            try:
                v.release()
            except ValueError:
                pass
        self.shm.close()

    def unlink(self) -> None:
        self.shm.unlink()


def announcements_matter(cfg: dict) -> bool:
    """Whether the worker's min-batch wait can ever go by the clients' announcements (``cfg``: the
    run's SmokeOptions as a dict). The original actor's fixed wait never reads them. In a closed loop a
    client's requests out plus those it announces are at most its batch plus the one it is
    submitting; when all clients' together cannot reach min_batch, no announcement can make a
    batch wait (and the clients need not write them). In an open loop a late client submits
    several at once: always."""
    if cfg["idle"] != "adaptive" or cfg["min_batch"] <= 1 or not cfg["min_batch_wait_ms"]:
        return False
    return bool(cfg.get("rate")) or cfg["clients"] * (cfg["client_batch"] + 1) >= cfg["min_batch"]


def find_in(b: bytes, state: int, start: int, limit: int) -> list[int]:
    """Up to ``limit`` indexes of ``state`` in ``b`` (states' low bytes, SharedInferenceQueue.state_reader)
    in circular order from ``start``: ``bytes.count`` and ``bytes.find`` (~0.3 us for 256 slots)
    instead of a Python loop over the slots (~15 us)."""
    k = b.count(state)
    if k <= 1:  # the common cases: none, or the one request in flight
        return [b.find(state)] if k else []
    limit = min(limit, k)
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
    """The original actor's allocation: a file lock around "find a FREE slot, mark it WRITING"."""

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
        self._states, step = queue.state_words()
        self._words = [i * step for i in self.slots]  # each own slot's state word

    @staticmethod
    def owners(nslots: int, nclients: int) -> list[int]:
        """The client that owns each slot (what the worker rings once the slot is answered)."""
        return [i % nclients for i in range(nslots)]

    def try_slot(self) -> int | None:
        """The first FREE slot of this client's: the same few slots again and again, so their
        tensor, metadata and response pages stay in both CPUs' caches and TLBs (cycling through
        every slot touches 256 x 48 KiB, far more than a cache holds)."""
        st = self._states
        for k, w in enumerate(self._words):
            if st[w] == FREE:
                st[w] = WRITING
                return self.slots[k]
        return None
