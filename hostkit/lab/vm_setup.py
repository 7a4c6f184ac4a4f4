"""Named guest setups: what a lab guest runs, and boots into, before anyone uses it.

A VM spec's ``setup=NAME`` (the preset ``small-tuned`` is ``small`` with
``setup=tuned-cpu-partitioning``) asks for a guest that is not the image's plain install: a
component installed in the image but disabled there (every other guest stays without it) is
configured, enabled and started, and the guest is rebooted into what it wrote (kernel arguments,
GRUB files). The guest is then as a user has it after their own reboot, and hostkit starts on it.

The setup runs through the guest agent (no SSH, no identity needed), once: when the preset's saved
state is built (:mod:`hostkit.lab.vm_state`; every later guest of the preset resumes booted into
it), or on a guest that boots the slow way (``--boot``, or a state that cannot be used). Its
``check`` must pass after the reboot, else the setup fails loudly.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from hostkit.errors import LabError

SETUP_TIMEOUT = 1200.0  # seconds for a setup script (tuned's first profile switch takes minutes under TCG)


@dataclass(frozen=True)
class Setup:
    about: str
    script: str  # POSIX sh, as root in the guest, before its reboot
    check: str  # POSIX sh after the reboot: exit 0 when the guest booted into the setup

    def fingerprint(self) -> str:
        """What a saved state of this setup must have been built with."""
        return hashlib.sha256(f"{self.script}\0{self.check}".encode()).hexdigest()[:16]


# tuned's cpu-partitioning with CPU 1 isolated (isolated_cores, and no_balance_cores, which puts
# tuned's own isolcpus=1 on the command line). Under TCG tuned needs more than systemd's default
# 90 s to claim its D-Bus name, and killed while starting it rolls back everything it set: a
# lab-only drop-in gives it time.
SETUPS = {
    "tuned-cpu-partitioning": Setup(
        about="tuned enabled and running cpu-partitioning (CPU 1 isolated), booted with its arguments",
        script=(
            "printf 'isolated_cores=1\\nno_balance_cores=1\\n' > /etc/tuned/cpu-partitioning-variables.conf && "
            "mkdir -p /etc/systemd/system/tuned.service.d && "
            "printf '[Service]\\nTimeoutStartSec=900\\n' "
            "> /etc/systemd/system/tuned.service.d/hostkit-lab-timeout.conf && systemctl daemon-reload && "
            "systemctl enable --now tuned && tuned-adm profile cpu-partitioning"
        ),
        check=(
            "systemctl is-active --quiet tuned && "
            "[ \"$(tuned-adm active)\" = 'Current active profile: cpu-partitioning' ] && "
            "grep -qw isolcpus=1 /proc/cmdline"
        ),
    ),
}


def wait_booted(agent, timeout: float) -> None:
    """Until the guest's boot is over (``systemctl is-system-running --wait``: every start job done)."""
    agent.sync(timeout)
    rc, out, err = agent.exec(["/bin/systemctl", "is-system-running", "--wait"], timeout)
    if out.strip() not in ("running", "degraded"):
        raise LabError(f"the guest's boot ended {out.strip() or err.strip()!r}")


def run(guest, name: str, boot_timeout: float, say=None) -> None:
    """Set ``guest`` (booting or booted, QEMU running) up as :data:`SETUPS` ``name`` says: wait for
    its boot, run the script, reboot, wait for the new boot, check. LabError when any step fails."""
    setup = SETUPS[name]
    t0 = time.monotonic()
    with guest.agent(timeout=10) as agent:
        wait_booted(agent, boot_timeout)
        rc, out, err = agent.exec(["/bin/sh", "-c", setup.script], SETUP_TIMEOUT)
        if rc != 0:
            raise LabError(f"setup {name} in {guest.name}: exit {rc}: {(err or out).strip()[-300:]}")
        boots = guest.boots()
        # `systemctl reboot` returns once the job is queued; the agent goes down with the guest, so
        # nothing waits for its status: the next kernel banner on the console is the sign.
        agent.call("guest-exec", 30, path="/bin/systemctl", arg=["reboot"])
    deadline = time.monotonic() + boot_timeout
    while guest.boots() <= boots:
        if time.monotonic() >= deadline:
            raise LabError(
                f"setup {name}: {guest.name} did not boot again within {boot_timeout:.0f} s "
                f"(console: {guest.console_tail()})"
            )
        time.sleep(1)
    with guest.agent(timeout=10) as agent:
        wait_booted(agent, boot_timeout)
        rc, out, err = agent.exec(["/bin/sh", "-c", setup.check], 120)
        if rc != 0:
            raise LabError(f"setup {name}: {guest.name} did not boot into it ({setup.check}: exit {rc})")
    if say:
        say(f"{guest.name}: set up ({name}: {setup.about}) in {time.monotonic() - t0:.0f} s, one reboot")
