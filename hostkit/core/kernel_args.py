# -*- coding: utf-8 -*-
"""The kernel command line and the GRUB variables that hold it: the one parser hostkit has.

Splitting follows the kernel (``lib/cmdline.c`` ``next_arg``): arguments are separated by
blanks, double quotes group a value with blanks in it, and everything after a lone ``--`` belongs
to init. ``/etc/default/grub`` is a shell file: its ``GRUB_CMDLINE_LINUX`` and
``GRUB_CMDLINE_LINUX_DEFAULT`` values may be double-quoted, single-quoted or bare.

What the GRUB variables add up to across files (shell expansion, ``grub.d`` order) is
:mod:`hostkit.core.boot_loader`'s. Used by the facts engine, the audit and hostkit's Ansible modules (as
``module_utils/hostkit_kernel_args.py``, a symlink to this file). Standard library only;
Python 2-compatible syntax because Ansible may load it anywhere.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# isolcpus=[flag,...,]cpulist: the flag words the kernel accepts before the CPUs.
ISOLCPUS_FLAGS = ("nohz", "domain", "managed_irq")
# What the kernel assumes when isolcpus= names CPUs and no flag.
ISOLCPUS_DEFAULT_FLAGS = ("domain",)

# A GRUB_CMDLINE_LINUX(_DEFAULT)= assignment line: (indent and "export ", variable, raw value).
GRUB_CMDLINE_VAR = re.compile(r"^(\s*(?:export\s+)?)(GRUB_CMDLINE_LINUX(?:_DEFAULT)?)=(.*)$")


_BLANKS = " \t\r\n"
_PLAIN = re.compile(r"[^ \t\r\n'\"\\#]+")
_BLANK_RUN = re.compile(r"[ \t\r\n]+")


def shell_words(text, comments=False):
    """The words ``shlex.split(text, comments=comments)`` returns, in time linear in the text's
    length (shlex's character loop takes seconds on a megabyte): blanks separate words; single quotes
    keep everything; double quotes keep all but a backslash before ``\\`` or ``"``; a backslash
    outside quotes keeps the next character; with ``comments``, an unquoted ``#`` begins a comment to
    the end of its line. An unbalanced quote or a trailing backslash is a ValueError, as in shlex."""
    words, cur, have, i, n = [], [], False, 0, len(text)  # type: list[str], list[str], bool, int, int
    while i < n:
        c = text[i]
        if c in _BLANKS:
            if have:
                words.append("".join(cur))
                cur, have = [], False
            i = _BLANK_RUN.match(text, i).end()  # type: ignore[union-attr]  # c is a blank: a run starts at i
        elif c == "#" and comments:
            if have:
                words.append("".join(cur))
                cur, have = [], False
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ValueError("No closing quotation")
            cur.append(text[i + 1 : end])
            have, i = True, end + 1
        elif c == '"':
            i, have = _double_quoted(text, i + 1, cur), True
        elif c == "\\":
            if i + 1 >= n:
                raise ValueError("No escaped character")
            cur.append(text[i + 1])
            have, i = True, i + 2
        else:
            m = _PLAIN.match(text, i)
            cur.append(m.group(0) if m else c)
            have, i = True, m.end() if m else i + 1
    if have:
        words.append("".join(cur))
    return words


def _double_quoted(text, i, cur):
    """Append to ``cur`` what a double-quoted string from ``i`` (after its quote) holds; the index
    after its closing quote."""
    while True:
        quote = text.find('"', i)
        if quote < 0:  # shlex's words: an odd run of backslashes at the end leaves it escaping
            odd = (len(text) - len(text.rstrip("\\"))) % 2 and len(text) - len(text.rstrip("\\")) <= len(text) - i
            raise ValueError("No escaped character" if odd else "No closing quotation")
        escape = text.find("\\", i, quote)
        if escape < 0:
            cur.append(text[i:quote])
            return quote + 1
        cur.append(text[i:escape])
        if escape + 1 >= len(text):
            raise ValueError("No escaped character")
        nxt = text[escape + 1]
        cur.append(nxt if nxt in '\\"' else "\\" + nxt)
        i = escape + 2


def cmdline_tokens(text):
    """The arguments of a kernel command line, in order, quotes removed, up to a lone ``--``."""
    try:
        tokens = shell_words(text)
    except ValueError:  # an unbalanced quote: split on blanks as a last resort
        tokens = text.split()
    if "--" in tokens:
        tokens = tokens[: tokens.index("--")]
    return tokens


def split_cmdline(text):
    """Kernel arguments as name -> value (``None`` for a bare flag); a later one wins."""
    args = {}
    for tok in cmdline_tokens(text):
        key, sep, value = tok.partition("=")
        args[key] = value if sep else None
    return args


def format_arg(key, value):
    """``key=value``, or ``key`` alone for a bare flag (``value`` None)."""
    return key if value is None else "%s=%s" % (key, value)


def split_isolcpus(value):
    """``isolcpus=`` value -> (flags, cpulist text). No flag word means ``domain``."""
    flags = []
    parts = value.split(",")
    while parts and parts[0] in ISOLCPUS_FLAGS:
        flags.append(parts.pop(0))
    return flags or list(ISOLCPUS_DEFAULT_FLAGS), ",".join(parts)


def domain_isolated(value):
    """The CPUs a kernel booted with ``isolcpus=<value>`` lists in /sys/devices/system/cpu/isolated:
    those isolated from the scheduler domains, i.e. only with the ``domain`` flag (explicit, or
    implied by no flag). ``managed_irq,<cpus>`` alone (a kubelet node) lists none. Cpulist text."""
    if value is None:
        return ""
    flags, cpus = split_isolcpus(value)
    return cpus if "domain" in flags else ""


def shell_value(raw):
    """The value a POSIX shell assigns for the right-hand side ``raw`` of ``VAR=raw``:
    double quotes, single quotes or a bare word, a trailing ``# comment`` dropped."""
    try:
        return " ".join(shell_words(raw, comments=True))
    except ValueError:  # an unbalanced quote: the shell would refuse the file; take it as written
        return raw.strip().strip("\"'")


# One kernel argument as written, quotes kept: blanks separate, double quotes group (next_arg).
_KERNEL_WORD = re.compile(r'(?:"[^"]*(?:"|$)|[^\s"])+')
# A shell assignment's right-hand side that is one word (quoted or bare), then maybe a comment.
_SHELL_WORD = re.compile(r"""^\s*(?:"(?:[^"\\]|\\.)*"|('[^']*')|[^\s"'#][^\s"']*)?(\s+#.*)?\s*$""")


def arg_name(word):
    """The name of one kernel argument as written (``isolcpus`` for ``isolcpus=2-3``)."""
    return word.lstrip('"').split("=", 1)[0]


def cmdline_words(text):
    """The arguments of a kernel command line as written (quotes kept), in order."""
    return _KERNEL_WORD.findall(text)


def edit_words(words, want, remove=()):
    """``words`` (kernel arguments as written) with every argument named in ``want`` (name ->
    value, None for a bare flag) or ``remove`` taken out, except that the first one of each name
    in ``want`` is replaced in place by hostkit's value; the wanted arguments not found are
    appended in name order. What ``grubby --args/--remove-args`` does to one options line, with
    the duplicates another tool left removed too: each wanted argument ends up exactly once.
    Words that are variable references (``$kernelopts``) are kept as they are."""
    out, done = [], set()
    for w in words:
        name = arg_name(w)
        if name in want:
            if name not in done:
                out.append(format_arg(name, want[name]))
                done.add(name)
        elif name not in remove:
            out.append(w)
    return out + [format_arg(k, want[k]) for k in sorted(want) if k not in done]


def remove_grub_args(text, names):
    """``text`` (an ``/etc/default/grub``-style file) with the kernel arguments named in ``names``
    removed from every GRUB_CMDLINE_LINUX(_DEFAULT) value, so another tool's ``isolcpus=`` is
    replaced rather than duplicated. Lines without such an argument are kept byte for byte; a
    rewritten value keeps its single quotes, or is double-quoted, and its trailing comment."""
    names = set(names)
    out = []
    for line in text.splitlines(True):
        body = line.rstrip("\r\n")
        m = GRUB_CMDLINE_VAR.match(body)
        if m:
            words = _KERNEL_WORD.findall(shell_value(m.group(3)))
            kept = [w for w in words if arg_name(w) not in names]
            if len(kept) != len(words):
                value = " ".join(kept)
                shape = _SHELL_WORD.match(m.group(3))
                comment = (shape.group(2) or "") if shape else ""
                if shape and shape.group(1) and "'" not in value:
                    quoted = "'%s'" % value
                else:
                    quoted = '"%s"' % re.sub(r'(["\\`])', r"\\\1", value)
                line = "%s%s=%s%s%s" % (m.group(1), m.group(2), quoted, comment, line[len(body) :])
        out.append(line)
    return "".join(out)
