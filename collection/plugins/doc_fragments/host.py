# -*- coding: utf-8 -*-
"""Options every hostkit.tuning module shares, documented once (extends_documentation_fragment)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """``hostkit.tuning.host``: where the host's files are; ``hostkit.tuning.host.journal``: the
    run whose journal records each change before it is made, and the check and diff modes every
    journaling module has; ``hostkit.tuning.host.no_diff``: a module that returns no diff;
    ``hostkit.tuning.host.action``: a module that is an action plugin running hostkit's code."""

    DOCUMENTATION = r"""
options:
  sysroot:
    description: Root the host's files are under (V('') or V(/) is the real root; a lab host's tree otherwise).
    type: str
    default: ''
"""

    JOURNAL = r"""
attributes:
  check_mode:
    description: Reports what it would change; writes nothing, not even the journal.
    support: full
  diff_mode:
    description: Returns each changed file's content, or each changed value, before and after.
    support: full
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

    ACTION = r"""
attributes:
  action:
    description: Runs on the controller as an action plugin.
    support: full
  diff_mode:
    description: No diff is returned.
    support: none
requirements:
  - The Python package C(hostkit) where Ansible runs (the execution environment's, or beside ansible-core).
notes:
  - Runs as an action plugin on the controller with hostkit's own code, over the task's connection; the
    host needs nothing but C(python3).
"""

    NO_DIFF = r"""
attributes:
  diff_mode:
    description: No diff is returned.
    support: none
"""
