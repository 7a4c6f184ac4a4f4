"""The inference worker: a spawned subprocess pinned to one CPU, claiming READY slots in batches.

As in the seeds: ``sched_setaffinity`` to one CPU, ``nice(-20)``, SCHED_FIFO during inference
when permitted (SCHED_OTHER while idle), one BLAS thread, first touch of the shared memory from
its own CPU, batches of up to ``max_batch`` with a short wait for at least ``min_batch``, and a
0.5 ms idle sleep (or busy polling).

Per inference it records wall and thread-CPU time, the CPU-time reads *inside* the wall-clock
reads: ``deschedule = max(0, wall - cpu)`` is time the thread was runnable but not running.
"""

from __future__ import annotations

import os
import pickle
import selectors
import socket
import struct
import time

from hostkit.smoke.queue import DONE, ERROR, PROCESSING, READY, SharedInferenceQueue

FIFO_PRIORITY = 50


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
    want_fifo = cfg.get("fifo", True)
    info["fifo_available"] = want_fifo and _set_fifo(True)
    if info["fifo_available"]:
        _set_fifo(False)

    from hostkit.smoke.model import OnnxModel, SyntheticModel

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
    if q is not None:
        _serve_shm(q, model, cfg, info, stats)
    else:
        _serve_socket(server, model, cfg, info, stats, conn)
    conn.send({"done": True, **stats})


def _infer(model, tensor):
    t0 = time.monotonic_ns()
    c0 = time.thread_time_ns()
    out = model(tensor)
    c1 = time.thread_time_ns()
    t1 = time.monotonic_ns()
    return out, t1 - t0, c1 - c0, t1


def _serve_shm(q: SharedInferenceQueue, model, cfg: dict, info: dict, stats: dict) -> None:
    max_batch, min_batch = cfg["max_batch"], cfg["min_batch"]
    min_wait = cfg["min_batch_wait_ms"] / 1000.0
    idle_sleep = 0.0 if cfg["idle"] == "spin" else cfg["idle_sleep_ms"] / 1000.0
    fifo = info["fifo_available"]
    tensor_count = q.tensor_size // 4
    tensors = [q.tensor(i, count=tensor_count) for i in range(q.nslots)]  # views made once, no copies
    pack_out = struct.Struct("<d").pack_into
    cursor = 0
    while not q.stop_requested():
        claimed = q.find_from(READY, cursor, max_batch)
        if not claimed:
            if idle_sleep:
                time.sleep(idle_sleep)
            continue
        if len(claimed) < min_batch and min_wait > 0:
            deadline = time.monotonic() + min_wait
            while len(claimed) < max_batch and time.monotonic() < deadline:
                more = [i for i in q.find_from(READY, cursor, max_batch) if i not in claimed]
                claimed += more[: max_batch - len(claimed)]
        cursor = (claimed[-1] + 1) % q.nslots
        now = time.monotonic_ns()
        for i in claimed:
            q.set_state(i, PROCESSING)
            q.set_claim(i, now)
        if fifo:
            _set_fifo(True)
            stats["fifo_batches"] += 1
        for i in claimed:
            try:
                out, wall, cpu, done = _infer(model, tensors[i])
                pack_out(q.shm.buf, q.off_resp + i * q.resp_size, out)
                q.set_done(i, done, wall, cpu)
                q.set_state(i, DONE)
            except Exception:  # a model error is the request's ERROR, not the worker's death
                q.set_state(i, ERROR)
            stats["inferences"] += 1
        if fifo:
            _set_fifo(False)
        q.add_completed(len(claimed))
        stats["batches"] += 1


def _recv_exact(sock, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _serve_socket(server, model, cfg: dict, info: dict, stats: dict, conn) -> None:
    """The seeds' socket actor: length-prefixed pickles over TCP loopback."""
    try:
        import numpy as np
    except ImportError:
        np = None

    sel = selectors.DefaultSelector()
    sel.register(server, selectors.EVENT_READ)
    sel.register(conn, selectors.EVENT_READ)
    fifo = info["fifo_available"]
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
            if fifo:
                _set_fifo(True)
                stats["fifo_batches"] += 1
            tensor = np.frombuffer(msg["tensor"], dtype=np.float32) if np is not None else msg["tensor"]
            out, wall, cpu, done = _infer(model, tensor)
            if fifo:
                _set_fifo(False)
            reply = pickle.dumps({"id": msg["id"], "claim_ns": claim, "wall_ns": wall, "cpu_ns": cpu,
                                  "done_ns": done, "out": out, "resp": resp_pad}, protocol=pickle.HIGHEST_PROTOCOL)
            c.sendall(struct.pack("<I", len(reply)) + reply)
            stats["inferences"] += 1
            stats["batches"] += 1
