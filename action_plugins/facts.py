# -*- coding: utf-8 -*-
"""The action plugin of the collection's modules facts, plan, smoke, audit, rollback, bios_facts and
bios: this file, and plan.py, smoke.py, audit.py, rollback.py, bios_facts.py, bios.py are links to
it. Each runs as the module it is named after: hostkit's own code for it (hostkit.actions) on the
controller, over the task's connection (bios_facts and bios talk to the host's BMC instead).
plugins/modules/<name>.py holds each module's documentation."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

IMPORT_ERROR = None
try:
    from hostkit import actions
except ImportError as exc:  # the collection without the hostkit Python package beside Ansible
    actions = None
    IMPORT_ERROR = str(exc)

# The module this plugin is: its own name (...plugins.action.<name>), whichever link loaded it.
MODULE = __name__.rsplit(".", 1)[-1]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        if actions is None:
            result.update(
                failed=True,
                msg="hostkit.tuning.%s needs the hostkit Python package on the controller "
                "(pip install hostkit-tuning): %s" % (MODULE, IMPORT_ERROR),
            )
            return result
        dummy, args = self.validate_argument_spec(argument_spec=actions.ARG_SPECS[MODULE])
        result.update(actions.dispatch(MODULE, self, args, task_vars or {}))
        return result
