"""`hostkit smoke -i` / `apply --verify-smoke`: what each host's agent is asked to run (decided on
the controller, before any host is contacted; the lab and VM tests run it end to end)."""

from __future__ import annotations

import yaml

from hostkit import api
from hostkit.smoke.options import DEFAULT_REQUESTS, SmokeOptions


def _inventory(tmp_path, **hostvars) -> str:
    inv = tmp_path / "inv.yml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": {"h1": dict(ansible_host="127.0.0.1", **hostvars)}}}))
    return str(inv)


def test_every_option_reaches_the_agent(tmp_path):
    opts = SmokeOptions(
        duration=7.5,
        clients=3,
        idle="spin",
        infer_ms=0.5,
        min_batch_wait_ms=0.0,
        inject_stall_ms=20.0,
        inject_every_s=0.5,
    )
    settings, _ = api.smoke_plan(
        api.SmokeRequest(inventory=_inventory(tmp_path), options=opts, given=frozenset({"duration", "clients", "idle"}))
    )
    args = settings["h1"]["args"]
    # The agent parses them with the same parser as `hostkit smoke`: the same options come out.
    import argparse

    from hostkit.smoke.options import add_smoke_arguments

    parser = argparse.ArgumentParser()
    add_smoke_arguments(parser)
    back = SmokeOptions.from_args(parser.parse_args(args))
    prof = {"transport": "shm", "target_p999_ms": 1.0}  # the default profile's smoke settings
    assert back == opts.replace(**prof)
    assert settings["h1"]["run"] == "7.5 s"


def test_without_a_duration_the_run_is_credible(tmp_path):
    settings, _ = api.smoke_plan(api.SmokeRequest(inventory=_inventory(tmp_path)))
    assert "--duration" not in settings["h1"]["args"]
    assert settings["h1"]["run"] == f"{DEFAULT_REQUESTS:,} requests"
    assert DEFAULT_REQUESTS >= 10_000  # the SLO gate's credible p999


def test_profile_settings_apply_unless_given(tmp_path):
    inv = _inventory(tmp_path, hostkit_profile="vmware-guest")
    settings, _ = api.smoke_plan(
        api.SmokeRequest(inventory=inv, options=SmokeOptions(target_p999_ms=2.0), given=frozenset({"target_p999_ms"}))
    )
    args = settings["h1"]["args"]
    assert args[args.index("--transport") + 1] == "socket"  # from the vmware-guest profile
    assert args[args.index("--target-p999-ms") + 1] == "2.0"  # the command line wins
