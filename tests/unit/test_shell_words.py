"""The kernel command line's and GRUB's one tokenizer (hostkit/core/kernel_args.py shell_words): the
words shlex.split gives, without shlex's per-character loop (seconds on a megabyte of input)."""

from __future__ import annotations

import shlex

from hypothesis import given, settings
from hypothesis import strategies as st

from hostkit.core.kernel_args import cmdline_tokens, shell_words

TEXT = st.text(alphabet=" \t\n'\"\\#ab=,$`-", max_size=24)


def _outcome(fn, text: str, comments: bool):
    try:
        return fn(text, comments=comments)
    except ValueError as exc:
        return ("ValueError", str(exc))


@settings(max_examples=3000, deadline=None)
@given(TEXT, st.booleans())
def test_the_same_words_and_errors_as_shlex(text, comments):
    assert _outcome(shell_words, text, comments) == _outcome(shlex.split, text, comments)


def test_a_megabyte_command_line_is_split_like_a_short_one():
    line = " ".join(["BOOT_IMAGE=/boot/vmlinuz", 'a="b c"', "isolcpus=managed_irq,domain,2-63"] * 40000)
    tokens = cmdline_tokens(line)
    assert (
        len(line) > 1_000_000
        and len(tokens) == 120000
        and tokens[:3] == ["BOOT_IMAGE=/boot/vmlinuz", "a=b c", "isolcpus=managed_irq,domain,2-63"]
    )
