"""The versions of the packages that own what hostkit tunes (the running kernel's image, tuned,
irqbalance, stalld, containerd, kubelet), beside the CPU microcode revision the kernel reports: what
an upgrade changes under the tuning, kept in a baseline so that drift can say what moved.

Debian's package database is read as dpkg keeps it, ``/var/lib/dpkg/status`` (deb-control(5):
stanzas of ``Field: value`` lines separated by blank lines; a package is installed when its
``Status`` (want, flag, status) ends in ``ok installed``: ``install ok installed``, or ``hold ok
installed`` for a package ``apt-mark hold`` pinned, as Kubernetes' install guide does kubelet). The
package of the running kernel is
``linux-image-<release>`` there. An RPM database (``/var/lib/rpm``, ``/usr/lib/sysimage/rpm``) is
named, not read: its format is rpm's own (Berkeley DB or SQLite) and hostkit does not read it yet,
which the facts say. Standard library only.
"""

from __future__ import annotations

from hostkit.facts.sysroot import Sysroot

DPKG_STATUS = "var/lib/dpkg/status"
RPM_DATABASES = ("usr/lib/sysimage/rpm", "var/lib/rpm")
# Debian's package names of what hostkit tunes: containerd from Debian or from Docker's repository
# (containerd.io), kubelet from the Kubernetes project's repository
PACKAGES = ("tuned", "irqbalance", "stalld", "containerd", "containerd.io", "kubelet")
INSTALLED = ("ok", "installed")  # a Status line's flag and status: installed, whatever is wanted of it


def _stanzas(text: str):
    """Each stanza of a deb-control file as {field: value} (first lines only: the fields read here
    are single-line)."""
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if line[:1] in (" ", "\t") or ":" not in line:
                continue  # a continuation line or none
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        if fields:
            yield fields


def dpkg_versions(text: str, names) -> dict[str, str]:
    """Installed version of each of ``names`` found in a dpkg status file's text."""
    wanted = set(names)
    return {
        f["Package"]: f["Version"]
        for f in _stanzas(text)
        if f.get("Package") in wanted and tuple(f.get("Status", "").split()[1:]) == INSTALLED and "Version" in f
    }


def read_packages(sr: Sysroot, release: str | None, microcode: str | None) -> dict:
    """``microcode``: the revision :func:`hostkit.facts.topology.read_cpuinfo` read."""
    kernel_package = f"linux-image-{release}" if release else None
    status = sr.read(DPKG_STATUS)
    out: dict = {"microcode": microcode}
    if status is not None:
        names = [*PACKAGES, *([kernel_package] if kernel_package else [])]
        versions = dpkg_versions(status, names)
        if kernel_package in versions:
            versions["kernel"] = versions.pop(kernel_package)
        return {**out, "manager": "dpkg", "versions": dict(sorted(versions.items()))}
    rpm = next((db for db in RPM_DATABASES if sr.exists(db)), None)
    if rpm:
        return {**out, "manager": "rpm", "versions": None, "reason": f"/{rpm}: hostkit does not read RPM databases yet"}
    return {**out, "manager": None, "versions": None, "reason": "no package database (dpkg or RPM) on this host"}
