"""cpulist and hex-mask parsing/formatting: examples from the kernel, and properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostkit.core.cpulist import format_cpulist, format_mask, parse_cpulist, parse_mask
from hostkit.errors import CpulistError


@pytest.mark.parametrize(
    "text,cpus",
    [
        ("", set()),
        ("\n", set()),
        ("0", {0}),
        ("0-3", {0, 1, 2, 3}),
        ("0-3,8-11", {0, 1, 2, 3, 8, 9, 10, 11}),
        ("0,2,4", {0, 2, 4}),
        ("0-7:2/4", {0, 1, 4, 5}),  # the kernel's stride form (Documentation/admin-guide/kernel-parameters)
        (" 1-2 \n", {1, 2}),
    ],
)
def test_parse_cpulist(text, cpus):
    assert parse_cpulist(text) == frozenset(cpus)


@pytest.mark.parametrize("bad", ["3-1", "0-", "a", "-1", "1,,2", "0-3; rm -rf /", "0-99999", "1:2", "0-7:3/2"])
def test_parse_cpulist_rejects(bad):
    with pytest.raises(CpulistError) as exc:
        parse_cpulist(bad)
    assert repr(bad) in str(exc.value)  # the error names the input


@pytest.mark.parametrize("cpus,text", [(set(), ""), ({0}, "0"), ({0, 1, 2, 5, 7, 8}, "0-2,5,7-8")])
def test_format_cpulist(cpus, text):
    assert format_cpulist(cpus) == text


@pytest.mark.parametrize(
    "cpus,nr,text",
    [
        ({0, 1}, 2, "3"),  # what /proc/irq/N/smp_affinity shows on a 2-CPU machine
        ({0}, 64, "00000000,00000001"),
        (set(range(168)), 168, "ff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff"),
        ({32}, None, "1,00000000"),
    ],
)
def test_format_mask_kernel_width(cpus, nr, text):
    assert format_mask(cpus, nr) == text


@pytest.mark.parametrize("text,cpus", [("3", {0, 1}), ("ff,00000000", set(range(32, 40))), ("0x5", {0, 2})])
def test_parse_mask(text, cpus):
    assert parse_mask(text) == frozenset(cpus)


@pytest.mark.parametrize("bad", ["", "xyz", "0-3"])
def test_parse_mask_rejects(bad):
    with pytest.raises(CpulistError):
        parse_mask(bad)


def test_live_irq_masks_agree_with_lists():
    """On this machine every /proc/irq/N has both forms; they must agree after parsing."""
    import glob

    checked = 0
    for d in glob.glob("/proc/irq/[0-9]*"):
        try:
            mask = open(f"{d}/smp_affinity").read()
            lst = open(f"{d}/smp_affinity_list").read()
        except OSError:
            continue
        assert parse_mask(mask) == parse_cpulist(lst), d
        checked += 1
    assert checked > 0


cpu_sets = st.frozensets(st.integers(min_value=0, max_value=1023), max_size=200)


@given(cpu_sets)
def test_cpulist_roundtrip(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == cpus


@given(cpu_sets, st.integers(min_value=1, max_value=1024))
def test_mask_roundtrip(cpus, nr):
    assert parse_mask(format_mask(cpus, nr)) == cpus


@given(cpu_sets)
def test_format_is_canonical(cpus):
    text = format_cpulist(cpus)
    assert format_cpulist(parse_cpulist(text)) == text
    assert ",," not in text and not text.startswith(",")
