"""A host's facts as its OS will show them after a BIOS power cycle, predicted from what the cycle
changes (the BIOS plan's ``cycle_changes``: NUMA nodes per socket, threads per core, where they
differ from the BIOS in effect; :func:`hostkit.bmc.plan.plan_bios`), so that the OS tuning can be
planned and applied before the one power cycle that brings both the BIOS settings and the new
kernel arguments.

What is predicted, and how:

* NUMA nodes per socket (AMD NPS, Intel SNC): each socket's cores, in the order of their first CPU,
  split into that many nodes of equal size, numbered socket by socket (the firmware's SRAT order);
  one node per socket count of 0 (NPS0) is one node over every CPU. The memory of a socket is split
  evenly between its nodes. A NIC is assumed on the first node of its socket: which node its PCIe
  root port falls in is not knowable before the boot.
* Nothing else: L3 groups, SMT siblings and CPU numbers stay as they are.

What cannot be predicted is said, in one line (:class:`CannotPredict`), and the caller boots first:
a change of threads per core (SMT) changes which CPUs exist and how the kernel numbers them, and a
socket whose cores do not split evenly into the wanted nodes has no one answer.

The prediction is checked after the cycle: the booted OS is read again and planned again, and what
differs is applied then (a second boot only when the kernel arguments differ).
"""

from __future__ import annotations

import copy

from hostkit.bmc.plan import cross_layer
from hostkit.core.cpulist import format_cpulist, parse_cpulist
from hostkit.facts.topology import numa_mode_name


class CannotPredict(Exception):
    """The OS's topology after the cycle has no one answer from the facts and the BIOS plan."""


def changes_topology(facts: dict, after: dict) -> bool:
    """Whether the BIOS plan's ``after`` gives the OS another NUMA layout or SMT than it has now
    (what the BIOS says against the OS's view: :func:`hostkit.bmc.plan.cross_layer`)."""
    return bool(cross_layer(after, facts["topology"]))


def predict(facts: dict, after: dict) -> tuple[dict, list[str]]:
    """The facts the OS will show after the cycle, and one line per assumption made; the facts
    themselves when the topology does not change. :class:`CannotPredict` with why otherwise."""
    if not changes_topology(facts, after):
        return facts, []
    topo = facts["topology"]
    threads = after.get("threads_per_core")
    if threads is not None and int(threads) != int(topo["threads_per_core"]):
        raise CannotPredict(
            f"the BIOS changes threads per core from {topo['threads_per_core']} to {threads}: the CPUs the kernel "
            "will number are not knowable before the boot"
        )
    per_socket = int(after["numa_per_socket"])
    sockets = [(s["id"], parse_cpulist(s["cpus"])) for s in topo["sockets_cpus"]]
    cores = [parse_cpulist(c) for c in topo["cores"]]
    memory = _socket_memory(topo["numa_nodes"], sockets)
    nodes: list[dict] = []
    if per_socket == 0:
        every = frozenset().union(*(cpus for _, cpus in sockets))
        known = [m for m in memory.values() if m is not None]
        nodes.append(_node(0, every, sum(known) if len(known) == len(memory) else None))
    else:
        for sid, cpus in sockets:
            mine = sorted((c for c in cores if c <= cpus), key=min)
            if len(mine) % per_socket:
                raise CannotPredict(
                    f"socket {sid}'s {len(mine)} cores do not split evenly into {per_socket} NUMA nodes"
                )
            size = len(mine) // per_socket
            mem = memory.get(sid)
            for k in range(per_socket):
                part = frozenset().union(*mine[k * size : (k + 1) * size])
                nodes.append(_node(len(nodes), part, None if mem is None else mem // per_socket))
    out = copy.deepcopy(facts)
    out["topology"].update(
        numa_nodes=nodes,
        numa_per_socket=per_socket,
        numa_mode=numa_mode_name(topo.get("vendor"), per_socket),
    )
    notes = [
        f"planned for the topology after the BIOS power cycle: {len(nodes)} NUMA node(s), {per_socket} per socket "
        f"(now {topo['numa_per_socket']}), each socket's cores split in order; checked once the host has booted"
    ]
    for nic in out.get("nics") or []:
        node = nic.get("numa_node", -1)
        if node is None or node < 0:
            continue
        sid = _socket_of(topo["numa_nodes"], sockets, node)
        first = next((n["id"] for n in nodes if sid is None or parse_cpulist(n["cpus"]) <= dict(sockets)[sid]), 0)
        nic["numa_node"] = first
        notes.append(
            f"NIC {nic.get('name')}: assumed on NUMA node {first}, the first of its socket after the cycle "
            "(its PCIe root port's node is known once the host has booted)"
        )
    return out, notes


def facts_after_bios(facts: dict, after: dict | None) -> tuple[dict, dict | None]:
    """The facts to plan from, given what the BIOS's next power cycle changes of the topology
    (``after``, the BIOS plan's cycle_changes; None: nothing): predicted when it changes the OS's,
    with ``after_bios`` (``predicted`` true, the notes, the nodes in all); as they are when it does
    not (None); as they are with ``predicted`` false and why when it has no one answer before the
    boot (the plan made again after the cycle corrects it)."""
    if not after or not changes_topology(facts, after):
        return facts, None
    try:
        predicted, notes = predict(facts, after)
    except CannotPredict as exc:
        why = f"not planned for the topology after the BIOS power cycle: {exc}; planned again once the host has booted"
        return facts, {"predicted": False, "why": why, "changes": after}
    nodes = len(predicted["topology"]["numa_nodes"])
    return predicted, {"predicted": True, "notes": notes, "changes": after, "numa_nodes": nodes}


def _node(nid: int, cpus: frozenset[int], memory_kb: int | None) -> dict:
    return {"id": nid, "cpus": format_cpulist(cpus), "distances": [], "memory_kb": memory_kb}


def _socket_memory(nodes: list[dict], sockets: list[tuple[int, frozenset[int]]]) -> dict[int, int | None]:
    """socket -> the memory of its nodes now (None where a node's is unknown)."""
    out: dict[int, int | None] = {}
    for n in nodes:
        sid = _socket_of(nodes, sockets, n["id"])
        if sid is None:
            continue
        mem = n.get("memory_kb")
        out[sid] = None if mem is None or out.get(sid, 0) is None else out.get(sid, 0) + mem
    return out


def _socket_of(nodes: list[dict], sockets: list[tuple[int, frozenset[int]]], node_id: int) -> int | None:
    """The socket holding the CPUs of NUMA node ``node_id`` now (None for a node without CPUs)."""
    cpus: frozenset[int] = next((parse_cpulist(n["cpus"]) for n in nodes if n["id"] == node_id), frozenset())
    return next((sid for sid, mine in sockets if cpus and cpus <= mine), None)


# The parts of a plan the roles apply that follow the topology: what a plan made for the predicted
# topology must share with the booted host's for the prediction to have held.
PREDICTED_PARTS = (
    "housekeeping",
    "isolated",
    "irq_cpus",
    "nic_irq_cpus",
    "nodes",
    "cmdline_set",
    "cmdline_remove",
    "sysctl",
    "governor_cpus",
    "kubelet",
    "kthreads",
    "sysfs",
)
PREDICTED_IRQ_PARTS = ("by_name", "default_smp_affinity", "banned_cpulist")


def prediction_misses(before: dict, booted: dict) -> list[str]:
    """What the plan applied before the power cycle (made for the predicted topology) and the booted
    host's plan do not share, one line per part (``key: before -> booted``); empty when it held."""
    pairs = [(k, before.get(k), booted.get(k)) for k in PREDICTED_PARTS]
    pairs += [
        (f"irq.{k}", (before.get("irq") or {}).get(k), (booted.get("irq") or {}).get(k)) for k in PREDICTED_IRQ_PARTS
    ]
    return [f"{key}: {was} -> {now}" for key, was, now in pairs if was != now]
