"""SmokeOptions: one declaration gives the options, their bounds, the agent's argv and back."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostkit.errors import BadInput
from hostkit.smoke.options import DEFAULT_REQUESTS, FIFO_POLICIES, SmokeOptions, add_smoke_arguments


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="smoke")
    add_smoke_arguments(p)
    return p


def parse(argv: list[str], **fallbacks) -> SmokeOptions:
    return SmokeOptions.from_args(parser().parse_args(argv), **fallbacks)


def test_nothing_given_is_the_defaults():
    assert parse([]) == SmokeOptions()
    assert SmokeOptions().total_requests == DEFAULT_REQUESTS
    assert SmokeOptions(duration=5).total_requests is None


def test_every_option_declared_once_reaches_the_parser():
    p = parser()
    dests = {a.dest for a in p._actions}
    with_flag = {f.name for f in dataclasses.fields(SmokeOptions) if f.metadata["flag"] is not None}
    assert with_flag <= dests
    # the settings without an option of their own are set through another one or only by API
    assert {f.name for f in dataclasses.fields(SmokeOptions)} - with_flag == {
        "req_size",
        "resp_size",
        "tensor_size",
        "client_cpus",
        "inject_stall_ms",
        "inject_every_s",
    }


def test_command_line_beats_fallback_beats_default():
    assert parse([], transport="socket").transport == "socket"
    assert parse(["--transport", "shm"], transport="socket").transport == "shm"
    assert parse([], target_p999_ms=None).target_p999_ms == 1.0  # a fallback of None is no fallback
    with pytest.raises(TypeError):
        parse([], no_such_option=1)


def test_aliases_and_compound_options():
    assert parse(["--busy-poll"]).idle == "spin"
    assert parse(["--no-fifo"]).fifo == parse(["--fifo", "off"]).fifo == "off"
    assert parse([]).fifo == "budget"
    o = parse(["--inject-stall", "20@0.5"])
    assert (o.inject_stall_ms, o.inject_every_s) == (20.0, 0.5)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--clients", "0"], "--clients"),
        (["--clients", "65"], "--clients"),
        (["--infer-ms", "-1"], "--infer-ms"),
        (["--duration", "0"], "--duration"),
        (["--rate", "0"], "--rate"),
        (["--target-p999-ms", "0"], "--target-p999-ms"),
        (["--request-timeout", "0"], "--request-timeout"),
        (["--clients", "64", "--client-batch", "5"], "exceeds --slots"),
        (["--min-batch", "20"], "--min-batch <= --max-batch"),
        (["--inject-stall", "20"], "MS@EVERY_S"),
        (["--inject-stall", "600@0.5"], "shorter than its period"),
    ],
)
def test_out_of_bounds_is_bad_input(argv, needle):
    with pytest.raises(BadInput, match=needle.replace("+", r"\+")):
        parse(argv)


def test_requests_and_duration_exclude_each_other():
    with pytest.raises(SystemExit):  # argparse's own group
        parser().parse_args(["--requests", "10", "--duration", "1"])
    with pytest.raises(BadInput, match="exclude each other"):
        SmokeOptions(requests=10, duration=1.0)


def test_host_checks_are_separate_from_bounds(tmp_path):
    SmokeOptions(cpu=4095)  # within bounds: only the host can say whether CPU 4095 exists
    with pytest.raises(BadInput, match="--cpu 4095"):
        SmokeOptions(cpu=4095).check_host()
    with pytest.raises(BadInput, match="no such file"):
        SmokeOptions(model=str(tmp_path / "none.onnx")).check_host()


options = st.builds(
    SmokeOptions,
    transport=st.sampled_from(["shm", "socket"]),
    allocator=st.sampled_from(["partition", "flock"]),
    infer_ms=st.floats(0, 10000, allow_nan=False),
    duration=st.one_of(st.none(), st.floats(0.001, 86400)),
    clients=st.integers(1, 64),
    rate=st.one_of(st.none(), st.floats(0.01, 1e6)),
    idle=st.sampled_from(["adaptive", "sleep", "spin"]),
    spin_us=st.floats(0, 100000),
    fifo=st.sampled_from(FIFO_POLICIES),
    with_cyclictest=st.booleans(),
    target_p999_ms=st.floats(0.0001, 1e6),
    cpu=st.one_of(st.none(), st.integers(0, 64)),
)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        options,
        st.builds(
            SmokeOptions,
            inject_stall_ms=st.floats(0.01, 400),
            inject_every_s=st.floats(0.5, 3600),
            requests=st.integers(1, 10**9),
        ),
    )
)
def test_agent_argv_rebuilds_the_same_options(opts):
    assert parse(opts.to_agent_args()) == opts


def test_help_says_how_long_a_credible_run_takes():
    text = " ".join(parser().format_help().split())
    assert "10,000 samples" in text and "at least 20 s" in text and "INCONCLUSIVE" in text
