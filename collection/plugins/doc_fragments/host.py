# -*- coding: utf-8 -*-
"""Options every hostkit.tuning module shares, documented once (extends_documentation_fragment)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """``hostkit.tuning.host``: where the host's files are; ``hostkit.tuning.host.journal``: the
    run whose journal records each change before it is made."""

    DOCUMENTATION = r"""
options:
  sysroot:
    description: Root the host's files are under (V('') or V(/) is the real root; a lab host's tree otherwise).
    type: str
    default: ''
"""

    JOURNAL = r"""
options:
  run_id:
    description: Run id; the journal is C(<sysroot>/var/lib/hostkit/journal/<run_id>.json).
    type: str
    required: true
  role:
    description: Role name recorded in the journal entry.
    type: str
    default: ''
"""
