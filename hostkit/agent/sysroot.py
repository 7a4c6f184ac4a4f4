# -*- coding: utf-8 -*-
"""Paths under a sysroot, and whether a sysroot is the live machine: the one definition of both.

A sysroot is the root directory a host's files are read and written under: ``/`` (or ``''``)
for the machine itself, or a fixture tree with the same file names standing in for another
machine. Used by the agent, the facts engine and the audit, and by hostkit's Ansible modules as
``module_utils/hostkit_sysroot.py`` (a symlink to this file). Standard library only;
Python 2-compatible syntax because Ansible may load it anywhere.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os


def sysroot_path(sysroot, path):
    """``path`` (absolute on the host) under ``sysroot`` ('' or '/' = the real root)."""
    root = (sysroot or "/").rstrip("/")
    return root + "/" + path.lstrip("/")


def is_live(sysroot):
    """True when ``sysroot`` is this machine's own root (after resolving symlinks)."""
    return os.path.realpath(sysroot or "/") == "/"
