"""The lab BMC: sushy-tools' Redfish emulator with :class:`~hostkit.lab.bmc.driver.FixtureDriver` as
its systems driver, TLS (a self-signed certificate) and basic authentication, as a real BMC has.

Where the emulator's own views lack what a real BMC does, they are replaced by name (Flask's view
functions) and the missing resources are added:

- ``Bios`` names the fixture's attribute registry; ``Bios/Settings`` holds what is pending, not the
  current values, and a PATCH a real BMC would reject is a 400 with ``@Message.ExtendedInfo``;
- the registry collection lists the fixture's BIOS attribute registry;
- ``Memory`` and its DIMMs, with ``MemoryLocation``;
- the system's Manufacturer and Model are the fixture's.

Run as ``python -m hostkit.lab.bmc.server CONFIG.json`` (:func:`hostkit.lab.bmc.start` writes the
config and starts it).
"""

from __future__ import annotations

import json
import sys
import time

import flask


def _json(doc, code=200):
    return flask.Response(json.dumps(doc, indent=2), status=code, mimetype="application/json")


class _Views:
    """The views the emulator lacks or serves otherwise than a real BMC, over the lab driver."""

    def __init__(self, driver):
        self.driver = driver

    def system_of(self, identity):
        return self.driver._get(self.driver.uuid(identity))

    def registry_id(self, identity):
        return self.system_of(identity)["fixture"]["registry"]["id"]

    def bios(self, identity):
        return _json(
            {
                "@odata.type": "#Bios.v1_1_0.Bios",
                "@odata.id": f"/redfish/v1/Systems/{identity}/BIOS",
                "Id": "BIOS",
                "Name": "BIOS Configuration Current Settings",
                "AttributeRegistry": self.registry_id(identity),
                "Attributes": self.driver.get_bios(identity),
                "@Redfish.Settings": {
                    "@odata.type": "#Settings.v1_3_0.Settings",
                    "SettingsObject": {"@odata.id": f"/redfish/v1/Systems/{identity}/BIOS/Settings"},
                    "SupportedApplyTimes": ["OnReset"],
                },
            }
        )

    def bios_settings(self, identity):
        if flask.request.method == "PATCH":
            from hostkit.lab.bmc.driver import SettingsRejected

            try:
                self.driver.set_bios(identity, (flask.request.json or {}).get("Attributes") or {})
            except SettingsRejected as exc:
                return _json(
                    {
                        "error": {
                            "code": "Base.1.8.GeneralError",
                            "message": "A general error has occurred. See ExtendedInfo for more information.",
                            "@Message.ExtendedInfo": [
                                {
                                    "MessageId": exc.message_id,
                                    "Message": str(exc),
                                    "RelatedProperties": [f"#/Attributes/{exc.prop}"],
                                    "Severity": "Warning",
                                }
                            ],
                        }
                    },
                    400,
                )
            return "", 204
        return _json(
            {
                "@odata.type": "#Bios.v1_1_0.Bios",
                "@odata.id": f"/redfish/v1/Systems/{identity}/BIOS/Settings",
                "Id": "Settings",
                "Name": "BIOS Configuration Pending Settings",
                "AttributeRegistry": self.registry_id(identity),
                "Attributes": self.driver.get_pending_bios(identity),
            }
        )

    def registries(self):
        ids = sorted({s["fixture"]["registry"]["id"] for s in self.driver._systems.values()})
        return _json(
            {
                "@odata.type": "#MessageRegistryFileCollection.MessageRegistryFileCollection",
                "@odata.id": "/redfish/v1/Registries",
                "Name": "Registry File Collection",
                "Members@odata.count": len(ids),
                "Members": [{"@odata.id": f"/redfish/v1/Registries/{i}"} for i in ids],
            }
        )

    def registry_file(self, registry):
        return _json(
            {
                "@odata.type": "#MessageRegistryFile.v1_1_0.MessageRegistryFile",
                "@odata.id": f"/redfish/v1/Registries/{registry}",
                "Id": registry,
                "Registry": registry,
                "Languages": ["en"],
                "Location": [{"Language": "en", "Uri": f"/redfish/v1/Registries/{registry}/Attributes"}],
            }
        )

    def registry_doc(self, registry):
        from hostkit.lab.bmc.driver import registry_entries

        for s in self.driver._systems.values():
            reg = s["fixture"]["registry"]
            if reg["id"] == registry:
                return _json(
                    {
                        "@odata.type": "#AttributeRegistry.v1_3_0.AttributeRegistry",
                        "Id": registry,
                        "Name": "BIOS Attribute Registry",
                        "Language": "en",
                        "OwningEntity": s["fixture"]["manufacturer"],
                        "RegistryVersion": "1.0.0",
                        **registry_entries(s["fixture"]),
                    }
                )
        return _json({"error": {"code": "Base.1.8.ResourceMissingAtURI", "message": "no such registry"}}, 404)

    def memory_collection(self, identity):
        dimms = self.driver.get_memory(identity)
        return _json(
            {
                "@odata.type": "#MemoryCollection.MemoryCollection",
                "@odata.id": f"/redfish/v1/Systems/{identity}/Memory",
                "Name": "Memory Collection",
                "Members@odata.count": len(dimms),
                "Members": [{"@odata.id": f"/redfish/v1/Systems/{identity}/Memory/{d['id']}"} for d in dimms],
            }
        )

    def memory(self, identity, dimm):
        for d in self.driver.get_memory(identity):
            if d["id"] == dimm:
                return _json(
                    {
                        "@odata.type": "#Memory.v1_7_0.Memory",
                        "@odata.id": f"/redfish/v1/Systems/{identity}/Memory/{dimm}",
                        "Id": dimm,
                        "Name": dimm,
                        "CapacityMiB": d["capacity_mib"],
                        "MemoryLocation": {"Socket": d["socket"], "Channel": d["channel"], "Slot": d["channel"]},
                        "Status": {"State": d["state"]},
                    }
                )
        return _json({"error": {"code": "Base.1.8.ResourceMissingAtURI", "message": "no such DIMM"}}, 404)


def build(config: dict):
    """The emulator's Flask app with the lab driver and views."""
    from sushy_tools.emulator import main as emu

    from hostkit.lab.bmc.driver import FixtureDriver

    app = emu.app
    app.configure(
        extra_config={
            "SUSHY_EMULATOR_FAKE_DRIVER": True,
            "SUSHY_EMULATOR_FAKE_SYSTEMS": config["systems"],
            "SUSHY_EMULATOR_AUTH_FILE": config["auth_file"],
            "SUSHY_EMULATOR_STATE_DIR": config["state_dir"],
        }
    )
    driver = FixtureDriver.initialize(app.config, app.logger)()
    type(app).systems = property(lambda self: driver)  # the emulator picks its driver in this property
    views = _Views(driver)
    delay = float(config.get("delay_s", 0))

    @app.before_request
    def slow():  # a slow BMC: every request waits (the client's timeout is what is tested)
        if delay:
            time.sleep(delay)

    @app.after_request
    def vendor(response):
        """The system resource with the fixture's manufacturer and model."""
        parts = flask.request.path.strip("/").split("/")
        if flask.request.method == "GET" and len(parts) == 4 and parts[:3] == ["redfish", "v1", "Systems"]:
            try:
                fx = views.system_of(parts[3])["fixture"]
            except Exception:
                return response
            doc = json.loads(response.get_data())
            doc.update(Manufacturer=fx["manufacturer"], Model=fx["model"])
            response.set_data(json.dumps(doc, indent=2))
        return response

    app.view_functions["bios"] = views.bios
    app.view_functions["bios_settings"] = views.bios_settings
    app.view_functions["registry_file_collection"] = views.registries
    # the emulator's own route for this name serves its sample registry: a fixture's of that name wins
    app.view_functions["bios_attribute_registry_file"] = lambda: views.registry_file("BiosAttributeRegistry.v1_0_0")
    app.add_url_rule("/redfish/v1/Registries/<registry>", "lab_registry_file", views.registry_file)
    app.add_url_rule("/redfish/v1/Registries/<registry>/Attributes", "lab_registry", views.registry_doc)
    app.add_url_rule("/redfish/v1/Systems/<identity>/Memory", "lab_memory", views.memory_collection)
    app.add_url_rule("/redfish/v1/Systems/<identity>/Memory/<dimm>", "lab_dimm", views.memory)
    return app


def main(argv: list[str]) -> int:
    import ssl

    with open(argv[0]) as f:
        config = json.load(f)
    app = build(config)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(config["cert"], config["key"])
    app.run(host="127.0.0.1", port=config["port"], ssl_context=ctx, threaded=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
