"""Two small JSON-over-a-UNIX-socket clients for a lab guest's QEMU: QMP (the QEMU monitor, on the
host side) and QGA (the QEMU guest agent, a daemon inside the guest reached through a virtio-serial
port). Standard library only; one request at a time, each bounded by a timeout.

QMP: a greeting, ``qmp_capabilities``, then ``{"execute": ...}`` -> ``{"return": ...}`` or
``{"error": ...}``, with asynchronous ``{"event": ...}`` lines in between (skipped here).
QGA: no greeting; ``guest-sync`` with a random id flushes whatever a previous client left in the
channel, then the same request/response shape (qemu-ga's documented protocol).
"""

from __future__ import annotations

import base64
import json
import random
import socket
import time
from pathlib import Path

from hostkit.errors import LabError

MAX_REPLY = 16 << 20  # bytes of one reply line; a guest-exec's captured output is bounded by the guest


class _JsonSocket:
    def __init__(self, path: Path, what: str, timeout: float) -> None:
        self.what = what
        deadline = time.monotonic() + timeout
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.connect(str(path))
                break
            except OSError as exc:
                self.sock.close()
                if time.monotonic() >= deadline:
                    raise LabError(f"{what}: cannot connect to {path}: {exc.strerror or exc}") from None
                time.sleep(0.05)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, obj: dict) -> None:
        try:
            self.sock.sendall(json.dumps(obj).encode() + b"\n")
        except OSError as exc:
            raise LabError(f"{self.what}: {exc.strerror or exc}") from None

    def line(self, deadline: float) -> dict:
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LabError(f"{self.what}: no answer in time")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                raise LabError(f"{self.what}: no answer in time") from None
            except OSError as exc:
                raise LabError(f"{self.what}: {exc.strerror or exc}") from None
            if not chunk:
                raise LabError(f"{self.what}: the connection closed")
            self.buf += chunk
            if len(self.buf) > MAX_REPLY:
                raise LabError(f"{self.what}: a reply over {MAX_REPLY} bytes")
        raw, _, self.buf = self.buf.partition(b"\n")
        raw = raw.strip(b"\xff \r")  # qemu-ga answers guest-sync-delimited with a 0xff sentinel first
        if not raw:
            return self.line(deadline)
        try:
            return json.loads(raw)
        except ValueError:
            raise LabError(f"{self.what}: not JSON: {raw[:80]!r}") from None

    def call(self, name: str, timeout: float, **arguments) -> object:
        self.send({"execute": name, **({"arguments": arguments} if arguments else {})})
        deadline = time.monotonic() + timeout
        while True:
            reply = self.line(deadline)
            if "event" in reply:
                continue
            if "error" in reply:
                err = reply["error"]
                raise LabError(f"{self.what}: {name}: {err.get('desc', err)}")
            if "return" in reply:
                return reply["return"]


class Qmp(_JsonSocket):
    """The QEMU monitor of one guest (``-qmp unix:PATH,server=on,wait=off``)."""

    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        super().__init__(path, "QMP", timeout)
        deadline = time.monotonic() + timeout
        greeting = self.line(deadline)
        if "QMP" not in greeting:
            raise LabError(f"QMP: unexpected greeting {str(greeting)[:80]}")
        self.call("qmp_capabilities", timeout)


class GuestAgent(_JsonSocket):
    """The guest agent (qemu-ga) of one guest, through its virtio-serial port's host socket."""

    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        super().__init__(path, "guest agent", timeout)

    def sync(self, timeout: float) -> None:
        """Until the agent answers (it starts with the guest): ``guest-sync`` with a fresh id, so a
        stale answer left in the channel is never taken for this one."""
        deadline = time.monotonic() + timeout
        while True:
            token = random.randrange(1, 1 << 31)
            try:
                self.send({"execute": "guest-sync", "arguments": {"id": token}})
                while True:
                    reply = self.line(min(deadline, time.monotonic() + 2.0))
                    if reply.get("return") == token:
                        return
            except LabError:
                if time.monotonic() >= deadline:
                    raise LabError("guest agent: no answer to guest-sync in time") from None

    def exec(self, argv: list[str], timeout: float, stdin: bytes = b"") -> tuple[int, str, str]:
        """Run ``argv`` in the guest (``guest-exec``), wait for it; (exit code, stdout, stderr)."""
        args = {"path": argv[0], "arg": argv[1:], "capture-output": True}
        if stdin:
            args["input-data"] = base64.b64encode(stdin).decode()
        pid = self.call("guest-exec", timeout, **args)["pid"]
        deadline = time.monotonic() + timeout
        while True:
            status = self.call("guest-exec-status", max(1.0, deadline - time.monotonic()), pid=pid)
            if status.get("exited"):
                out = base64.b64decode(status.get("out-data", "")).decode(errors="replace")
                err = base64.b64decode(status.get("err-data", "")).decode(errors="replace")
                code = status["exitcode"] if "exitcode" in status else -int(status.get("signal", 1))
                return int(code), out, err
            if time.monotonic() >= deadline:
                raise LabError(f"guest agent: {' '.join(argv)} still running after {timeout:.0f} s")
            time.sleep(0.1)
