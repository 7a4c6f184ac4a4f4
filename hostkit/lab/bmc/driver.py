"""The lab BMC's systems driver: sushy-tools' own fake driver (its systems-driver interface) with
what a real server's BMC has and the emulator lacks, served from a vendor fixture
(``hostkit/lab/bmc/fixtures/*.yml``):

- BIOS attributes with pending-until-reset semantics: a PATCH lands in ``Bios/Settings`` and takes
  effect at the next power-on or restart, not before;
- the vendor's attribute registry, against which a PATCH is checked as a real BMC checks it (an
  unknown, read-only or not-allowed value is a 400 with the DMTF Base registry's message);
- processors (sockets, cores, threads) and memory (one DIMM per populated channel, with its
  ``MemoryLocation``);
- the manufacturer, model and BIOS version of the fixture.

A system's ``applies_settings: false`` makes a BMC that accepts settings and never applies them.

A system with ``lab: {dir, host}`` stands in front of that lab's QEMU guest: its power state is the
guest's (QEMU running or not), GracefulShutdown presses the guest's ACPI power button, ForceOff
stops QEMU, and On starts the guest again with the topology its now-current BIOS implies (the
fixture's ``lab_topology``: NUMA nodes per socket, threads per core), on the same disk.
"""

from __future__ import annotations

import copy
import time

from sushy_tools import error
from sushy_tools.emulator.resources.systems.fakedriver import FakeDriver

from hostkit.bmc.registry import lock
from hostkit.bmc.registry import parse as parse_registry
from hostkit.lab.bmc.topology import guest_spec


def registry_entries(fixture: dict) -> dict:
    """The fixture's registry as a Redfish AttributeRegistry document's ``RegistryEntries``."""
    reg = fixture["registry"]
    return {"RegistryEntries": {"Attributes": reg["attributes"], "Dependencies": reg.get("dependencies") or []}}


class SettingsRejected(error.BadRequest):
    """A PATCH a real BMC would reject: its message and the DMTF Base registry's MessageId."""

    def __init__(self, message: str, message_id: str, prop: str):
        super().__init__(message)
        self.message_id = message_id
        self.prop = prop


class FixtureDriver(FakeDriver):
    """Systems from ``SUSHY_EMULATOR_FAKE_SYSTEMS``, each with a ``fixture`` (a loaded vendor fixture)."""

    POWER_DELAY = 1  # seconds a power transition takes (the fake driver's is 1-11 s at random)

    def get_bios(self, identity):
        return dict(self._get(identity)["fixture"]["attributes"])

    def get_pending_bios(self, identity) -> dict:
        return dict(self._get(identity).get("pending_bios") or {})

    def set_bios(self, identity, attributes):
        system = self._get(identity)
        fixture = system["fixture"]
        registry = {a["AttributeName"]: a for a in fixture["registry"]["attributes"]}
        # an attribute its registry's Dependencies lock (ReadOnly, GrayOut) with the BIOS as it would be
        # after this PATCH is not writable, as a read-only one is: hostkit.bmc.registry reads them
        locks = parse_registry(registry_entries(fixture))
        future = {**fixture["attributes"], **(system.get("pending_bios") or {}), **attributes}
        for name, value in attributes.items():
            entry = registry.get(name)
            if entry is None:
                raise SettingsRejected(
                    f"The property {name} is not in the list of valid properties for the resource.",
                    "Base.1.8.PropertyUnknown",
                    name,
                )
            if value != fixture["attributes"].get(name) and lock(
                locks, name, future
            ):  # its current value: a withdrawal
                raise SettingsRejected(
                    f"The property {name} is a read only property and cannot be assigned a value.",
                    "Base.1.8.PropertyNotWritable",
                    name,
                )
            allowed = [v["ValueName"] for v in entry.get("Value", [])]
            if allowed and value not in allowed:
                raise SettingsRejected(
                    f"The value {value} for the property {name} is not in the list of acceptable values.",
                    "Base.1.8.PropertyValueNotInList",
                    name,
                )
        pending = dict(system.get("pending_bios") or {})
        pending.update(attributes)
        self._update(system, pending_bios=pending)

    def reset_bios(self, identity):
        system = self._get(identity)
        self._update(system, pending_bios={})

    def get_versions(self, identity):
        return {"BiosVersion": self._get(identity)["fixture"]["bios_version"]}

    def get_processors(self, identity):
        p = self._get(identity)["fixture"]["processors"]
        smt = self._threads_per_core(identity)
        return [
            {
                "id": f"CPU{i}",
                "Id": f"CPU{i}",
                "socket": f"CPU {i}",
                "vendor": p["manufacturer"],
                "model": p["model"],
                "cores": p["cores"],
                "threads": p["cores"] * smt,
            }
            for i in range(p["sockets"])
        ]

    def _threads_per_core(self, identity) -> int:
        """2 where the fixture's SMT attribute is enabled now, else 1."""
        fx = self._get(identity)["fixture"]
        smt = fx.get("smt_attribute")
        if not smt:
            return fx["processors"].get("threads_per_core", 1)
        return 2 if fx["attributes"].get(smt["attribute"]) == smt["enabled"] else 1

    def get_memory(self, identity) -> list[dict]:
        m = self._get(identity)["fixture"]["memory"]
        sockets = self._get(identity)["fixture"]["processors"]["sockets"]
        dimms = []
        for s in range(sockets):
            for c in range(m["channels_per_socket"]):
                populated = c < m["populated_per_socket"]
                dimms.append(
                    {
                        "id": f"DIMM{s}{chr(65 + c)}",
                        "socket": s,
                        "channel": c,
                        "capacity_mib": m["capacity_mib"] if populated else 0,
                        "state": "Enabled" if populated else "Absent",
                    }
                )
        return dimms

    # ------------------------------------------------------------ a lab guest behind the BMC

    @staticmethod
    def _lab(system):
        from hostkit.lab.lab import Lab

        return Lab(system["lab"]["dir"])

    def get_power_state(self, identity):
        system = self._get(identity)
        if system.get("lab"):
            return "On" if self._lab(system).guest_running(system["lab"]["host"]) else "Off"
        return super().get_power_state(identity)

    def _guest_power(self, system, state: str) -> None:
        lab, host = self._lab(system), system["lab"]["host"]
        running = lab.guest_running(host)
        if state == "GracefulShutdown" and running:
            lab.powerdown(host)
        elif state == "ForceOff" or ("Restart" in state or state == "PowerCycle") and running:
            lab.stop_host(host)
        if state in ("On", "ForceOn") or "Restart" in state or state == "PowerCycle":
            if lab.guest_running(host):
                return
            if system.get("applies_settings", True):
                fixture = copy.deepcopy(system["fixture"])
                fixture["attributes"].update(system.get("pending_bios") or {})
                self._update(system, fixture=fixture, pending_bios={})
            current = next(h for h in lab.hosts() if h.name == host).vm
            lab.reshape(host, guest_spec(current, system["fixture"]))
            lab.start_host(host, wait=False)
        elif state not in ("GracefulShutdown", "ForceOff"):
            raise error.NotSupportedError(f"Power state {state} is not supported")

    # ------------------------------------------------------------ power with pending-until-reset

    def set_power_state(self, identity, state):
        system = self._get(identity)
        if system.get("lab"):
            self._guest_power(system, state)
            return
        if state in ("On", "ForceOn"):
            pending = "On"
        elif state in ("ForceOff", "GracefulShutdown"):
            pending = "Off"
        elif "Restart" in state or state == "PowerCycle":
            system["power_state"] = "Off"
            pending = "On"
        else:
            raise error.NotSupportedError(f"Power state {state} is not supported")
        if system["power_state"] != pending:
            self._update(system, pending_power={"power_state": pending, "apply_time": time.time() + self.POWER_DELAY})

    def _update_if_needed(self, system):
        pending_power = system.get("pending_power")
        if pending_power and time.time() >= pending_power["apply_time"]:
            changes = {"power_state": pending_power["power_state"], "pending_power": None}
            if pending_power["power_state"] == "On" and system.get("applies_settings", True):
                fixture = copy.deepcopy(system["fixture"])
                fixture["attributes"].update(system.get("pending_bios") or {})
                changes.update(fixture=fixture, pending_bios={})
            self._update(system, **changes)
        return system
