# -*- coding: utf-8 -*-
"""Paths under a sysroot, whether a sysroot is the live machine, the bounded read of a host's file
and the atomic write of one: the one definition of each.

A sysroot is the root directory a host's files are read and written under: ``/`` (or ``''``)
for the machine itself, or a fixture tree with the same file names standing in for another
machine. Used by the agent, the facts engine and the audit, and by hostkit's Ansible modules as
``module_utils/hostkit_sysroot.py`` (a symlink to this file). Standard library only;
Python 2-compatible syntax because Ansible may load it anywhere.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile


def sysroot_path(sysroot, path):
    """``path`` (absolute on the host) under ``sysroot`` ('' or '/' = the real root)."""
    root = (sysroot or "/").rstrip("/")
    return root + "/" + path.lstrip("/")


def is_live(sysroot):
    """True when ``sysroot`` is this machine's own root (after resolving symlinks)."""
    return os.path.realpath(sysroot or "/") == "/"


# The largest file hostkit reads from a host (a 384-CPU /proc/interrupts is about 1 MB; a boot
# loader entry, a journal or a sysfs attribute far less): anything larger is not read.
MAX_READ = 16 << 20
EXCERPT = 60  # characters of a bad value quoted in an error


class HostFileError(ValueError):
    """A file on the host that cannot be read as a file of its kind: it names the file and why."""

    def __init__(self, path, why):
        ValueError.__init__(self, "%s: %s" % (path, why))
        self.path = path
        self.why = why


def excerpt(value, limit=EXCERPT):
    """``value`` as an error quotes it (its repr): at most ``limit`` characters, the length said when cut."""
    shown = repr(value)
    if len(shown) <= limit + 2:
        return shown
    return "%s... (%d characters)" % (shown[:limit], len(shown))


def read_bytes(path, limit=MAX_READ):
    """The bytes of the regular file ``path`` (symlinks followed), or None when it does not exist.

    A FIFO, a device or a socket is refused, never opened for reading in a way that could block
    (O_NONBLOCK), and so is a symlink loop and a file larger than ``limit``: HostFileError. A
    directory, or a file the kernel refuses to read (EIO, EACCES on some sysfs attributes), reads
    as None, as a missing one does."""
    import errno
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise HostFileError(path, "a symlink loop, not read")
        return None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            return None
        if not stat.S_ISREG(st.st_mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(st.st_mode)
                else "a device"
                if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket"
                if stat.S_ISSOCK(st.st_mode)
                else "not a file"
            )
            raise HostFileError(path, "%s, not a regular file: not read" % kind)
        chunks, size = [], 0
        while True:
            try:
                b = os.read(fd, 65536)
            except OSError:  # EIO from a sysfs attribute the driver refuses
                return None
            if not b:
                break
            size += len(b)
            if size > limit:
                raise HostFileError(path, "larger than %d bytes: not read" % limit)
            chunks.append(b)
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_text(path, limit=MAX_READ):
    """The text of ``path`` (UTF-8, undecodable bytes replaced) without the trailing newlines and
    NULs some kernels end sysfs values with (as lscpu reads them); None when absent. See read_bytes."""
    data = read_bytes(path, limit)
    if data is None:
        return None
    return data.decode("utf-8", "replace").rstrip("\n\x00")


def is_number(text):
    """An ASCII decimal number (``str.isdigit`` also accepts ``²`` and other digits int() refuses)."""
    return bool(text) and all("0" <= c <= "9" for c in text)


def atomic_write(full, data, mode=0o644, uid=None, gid=None):
    """The one atomic file write (journal, rollback, adoption, smoke reports, the rollout state, the
    agent cache): a temporary file in the target's directory, fsync, rename over ``full``, fsync of
    the directory. A crash leaves the old file or the new one, never half of either."""
    d = os.path.dirname(full)
    if not os.path.isdir(d):
        os.makedirs(d, 0o755)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".hostkit-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if uid is not None and gid is not None:
            os.chown(tmp, uid, gid)
        os.rename(tmp, full)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
