#!/usr/bin/env python3
"""Write roles/<role>/README.md from meta/argument_specs.yml and defaults/main.yml.

.venv/bin/python scripts/role_readmes.py          # rewrite the READMEs
.venv/bin/python scripts/role_readmes.py --check  # exit 1 when one is stale (tests run this)
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from generated import sync  # noqa: E402  (scripts/generated.py)

from hostkit.tunables import tuned_sysctls  # noqa: E402

INTRO = {
    "bios_nps": "Read-only checks of what only the BIOS can set: NUMA nodes per socket (AMD NPS, Intel SNC), "
    "SMT, populated memory channels (the facts' SMBIOS memory devices). A mismatch fails the host when "
    "`bios_nps_enforce`, else warns. Nothing runs on the host: the checks are the plan's.",
    "isolcpus": "Kernel arguments `isolcpus=managed_irq,domain,I nohz_full=I rcu_nocbs=I irqaffinity=H` in the "
    "host's boot loader configuration, one backend chosen from its files: Debian/Ubuntu GRUB "
    "(`/etc/default/grub.d/hostkit.cfg`; the same arguments in `/etc/default/grub` or another "
    "`grub.d/*.cfg` removed), BLS (every `/boot/loader/entries/*.conf` `options` line, EL8's `kernelopts` "
    "in `/boot/grub2/grubenv`, `/etc/kernel/cmdline`) or systemd-boot (`<esp>/loader/entries`, "
    "`/etc/kernel/cmdline`); each argument ends up exactly once, another tool's value replaced, never "
    "duplicated; no supported boot configuration fails the host. Sets `isolcpus_reboot_required` when "
    "`/proc/cmdline` differs; reboots only with `isolcpus_reboot_ok`, after every other role of the play "
    "(`tasks/reboot.yml`, which the tune role's apply step, `playbooks/apply.yml`'s too, includes "
    "last; in the lab, the reboot rewrites the sysroot's `proc/cmdline`). `update-grub` runs in the same call, after the files, for Debian GRUB "
    "only (recorded as *would run* under a lab sysroot).",
    "irq_affinity": "IRQs have one owner (the plan's `irq.owner`). Where irqbalance runs and the plan bans it, "
    "it places them: the role bans it from every CPU that is not an IRQ CPU and pins no IRQ itself "
    "(irqbalance would rewrite the pins at its next pass); `default_smp_affinity` starts new IRQs "
    "on the IRQ CPUs until the next boot (then `irqaffinity=`). Elsewhere hostkit owns them: "
    "every movable IRQ to the IRQ CPUs in one module call (NIC queues to the housekeeping CPUs "
    "of the NIC's node), `default_smp_affinity`; IRQs the kernel refuses (managed, per-CPU) are "
    "reported, not failed. IRQs are found by their action name in `/proc/interrupts` "
    "(`eth0-TxRx-3`, `nvme0q2`), never by a number from another boot: the plan's `irq.by_name` "
    "is resolved to this boot's numbers on the host just before the write. Persistence: "
    "`IRQBALANCE_BANNED_CPULIST` wherever irqbalance is installed (running or not), and wherever "
    "hostkit pins IRQs `hostkit-irq-affinity.service`, which runs `/usr/local/lib/hostkit/irq_affinity.py` (`hostkit/core/irq_affinity.py`, "
    "python3 only) with the rules in `/etc/hostkit/irq-affinity.json` at every boot and logs "
    "each move, refusal and rule without an IRQ to the journal.",
    "cpu_governor": "`scaling_governor` on every CPU with cpufreq in one module call, and a boot-time unit. "
    "No cpufreq (VMs): not applicable, not failed.",
    "rt_runtime": "`kernel.sched_rt_runtime_us` at runtime and in `/etc/sysctl.d/60-hostkit-rt.conf`; "
    "reports (and optionally sets) the cgroup v1 `cpu.rt_runtime_us` budget where "
    "`CONFIG_RT_GROUP_SCHED` is active.",
    "numa_sysctl": ", ".join(f"`{s.key}`" for s in tuned_sysctls("numa_sysctl"))
    + " (those the plan sets; `hostkit/tunables.py` declares them) at runtime and in "
    "`/etc/sysctl.d/61-hostkit-numa.conf`.",
    "containerd": "`/etc/containerd/config.toml` rendered from the installed version's `containerd config "
    "default` with `SystemdCgroup = true` (and NRI where the version has it), validated by the "
    "real containerd (`containerd --config FILE config dump`) before it replaces the old file; "
    "`try-restart` when it changed, with a readiness check; not applicable where containerd is not installed.",
    "smoke": "Runs the on-host SHM inference smoke test with the shipped agent zipapp (python3 is all the "
    "host needs; numpy is used when present, a pure-Python model otherwise) and returns its JSON: "
    "p50/p99/p999/max deschedule, queue wait, rpc, SCHED_FIFO, diagnosis and the SLO verdict. "
    "Changes nothing on the host; `hostkit smoke -i` collects the results into a fleet table.",
    "tuned": "tuned coexistence (the plan's `tuned.mode`). drive: `<user profile dir>/hostkit/tuned.conf` "
    "including tuned's `cpu-partitioning` (or `latency-performance` without isolation) with "
    "`isolated_cores` and hostkit's sysctls and governor, tuned's `[bootloader]` cmdline options "
    "re-defined without the arguments hostkit sets; `/etc/tuned/active_profile` (`hostkit`), "
    "`/etc/tuned/profile_mode` (`manual`) and `/etc/tuned/bootcmdline` left as tuned writes them, so "
    "the next boot is right before tuned runs again. neutralize: the same with profile "
    "`hostkit-neutral` (no plugin sections). `tuned-adm profile NAME` runs when a file changed. Rollback "
    "restores the files and runs `tuned-adm profile <previous>`.",
    "kernel_values": "The plan's `/sys` values (`hostkit/tunables.py` `SYSFS_VALUES`, expanded per CPU and per "
    "NUMA node by the planner) in one call, compared by kind (hex masks, a "
    "choice file's bracketed word), and a oneshot unit writing them at every boot: unbound "
    "workqueue and writeback cpumasks on the housekeeping CPUs, `energy_performance_preference` "
    "where the cpufreq driver offers it, transparent hugepages `enabled`/`defrag`, KSM `run`, "
    "2 MiB hugepages per NUMA node.",
    "pm_qos": "A PM QoS CPU latency ceiling: `hostkit-pm-qos.service` opens `/dev/cpu_dma_latency`, writes the "
    "ceiling and holds the file open (the kernel drops the request when it closes), so cpuidle skips "
    "every C-state whose exit latency exceeds it. Only where the plan's holder is `unit`; where hostkit "
    "drives tuned, tuned's `force_latency` holds it. Rollback removes the unit and stops the holder.",
    "kthreads": "kthreadd and every kernel thread the kernel lets move (no `PF_NO_SETAFFINITY`; threaded IRQ "
    "handlers follow their IRQ and are left) whose allowed CPUs include an isolated one, onto the "
    "housekeeping CPUs among its allowed ones, else all of them (tuned's `isolated_cores` rule: "
    "`kswapd<N>` stays on its node), on live hosts, each thread's "
    "`Cpus_allowed_list` journaled by boot id, pid and start time; `hostkit-kthreads.service` runs the same "
    "move at every boot (`hostkit/core/kthreads.py`, installed with the `cpulist.py` it imports). "
    "Under a lab sysroot there are no threads: the move is reported skipped. Rollback moves each "
    "thread that still runs back and removes the unit.",
    "tune": "hostkit's whole job on a host from plain Ansible: `hostkit.tuning.facts` (the agent's facts), "
    "`hostkit.tuning.plan` (the planner, on the controller: a refused plan or bad input fails the host "
    "before anything changes), a smoke test before any change (`hostkit.tuning.smoke` with `gate: false`: "
    "evidence, reported beside the gate's run), the apply roles in `playbooks/apply.yml`'s order under the "
    "host-side lock, "
    "the reboot the plan needs (`hostkit_reboot`), `hostkit.tuning.audit` and the smoke gate "
    "`hostkit.tuning.smoke` (MISSED fails the host, INCONCLUSIVE does not). The playbooks "
    "`hostkit.tuning.tune` and `hostkit.tuning.rollout` run it; the rollout runs its entry points "
    "`plan`, `baseline`, `apply`, `gate` per batch and `revert` (`hostkit.tuning.rollback`, then a reboot into the "
    "restored boot configuration) when a step after the apply fails.",
    "drift_timer": "Installs `hostkit-drift.service` and `hostkit-drift.timer` (systemd, `OnCalendar`, "
    "`Persistent=true`): the shipped agent (`hostkit-agent.pyz drift`, python3 only) reads the host's facts, "
    "runs the smoke when asked, judges the host against the copy of its baseline under `drift_timer_dir` with "
    "`hostkit drift`'s rules, and writes the verdict in node_exporter's textfile format (`hostkit_drift_*`, "
    "docs/drift.md). Exit 1 (drift found) is a verdict, not a failed unit. The BIOS layer stays with the "
    "controller's `hostkit drift`, which reads the BMC. `hostkit drift -i INV --timer CALENDAR` runs it.",
    "kubelet": "A KubeletConfiguration drop-in: static CPU manager (`full-pcpus-only`), `single-numa-node` "
    "topology manager, Static memory manager with `reservedMemory` per node, `reservedSystemCPUs` = "
    "housekeeping. When a manager policy changes, its state file is removed before the restart "
    "(kubelet crash-loops otherwise).",
}
COMMON = """
A role is one call of `hostkit.tuning.hostkit_changes` on the host (one round trip): its files, values,
boot arguments and kernel threads, then the commands they call for (restarts, `update-grub`, only
when something they follow changed). Each change is the work of one of hostkit's modules
(`hostkit_file`, `hostkit_values`, `hostkit_bootargs`, `hostkit_kthreads`, `hostkit_run`, ...): the
previous state is journaled on the host before the change
(`<sysroot>/var/lib/hostkit/journal/<run-id>.json`, mode 0600), check and diff modes work, and a
second run changes nothing. All paths are under `hostkit_sysroot`; when it is not `/`, commands that
act on the machine itself are recorded in `var/lib/hostkit/would-run.jsonl`, never run.

Common variables: `hostkit_sysroot` (inventory, default `''` = `/`), `hostkit_run_id` and
`hostkit_plan` (set by `hostkit apply`).
"""
TUNE_COMMON = """
Its modules run as action plugins on the controller with hostkit's own code (the Python package
`hostkit` beside Ansible: the execution environment's, or the controller's); the hosts need nothing
but `python3`. `hostkit collection install` puts the collection where Ansible finds it. The profile
and overrides are each host's `hostkit_profile` and `hostkit_overrides`, as for the CLI.
"""
DRIFT_TIMER_COMMON = """
Not a tuning role: it changes no tuned value, so nothing of it is journaled for `hostkit rollback`;
`drift_timer_state: absent` (`hostkit drift --timer off`) stops the timer and removes its units, the
agent and baseline copies and the last metrics file. A host that does not run systemd, or a lab
sysroot host, is refused before any change.
"""


def render(role: Path) -> str:
    spec = yaml.safe_load((role / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]
    defaults = yaml.safe_load((role / "defaults/main.yml").read_text()) or {}
    common = {"tune": TUNE_COMMON, "drift_timer": DRIFT_TIMER_COMMON}.get(role.name, COMMON)
    lines = [
        f"# Role `{role.name}`",
        "",
        spec["short_description"] + ".",
        "",
        INTRO[role.name],
        common,
        "| variable | type | default | description |",
        "|---|---|---|---|",
    ]
    for name, opt in spec["options"].items():
        default = defaults.get(name, "")
        default_text = f"`{default}`" if default != "" else "`''`"
        kind = opt.get("type", "str") + (f" of {opt['elements']}" if opt.get("elements") else "")
        desc = opt.get("description", "")
        if opt.get("choices"):
            desc += f" One of: {', '.join(map(str, opt['choices']))}."
        lines.append(f"| `{name}` | {kind} | {default_text.replace('|', '&#124;')} | {desc} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    roles = [r for r in sorted((ROOT / "roles").iterdir()) if (r / "meta/argument_specs.yml").exists()]
    return sync({role / "README.md": render(role) for role in roles}, "role READMEs", "scripts/role_readmes.py")


if __name__ == "__main__":
    raise SystemExit(main())
