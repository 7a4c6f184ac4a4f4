# -*- coding: utf-8 -*-
"""Action plugin of hostkit.tuning.facts: hostkit's own code (hostkit.actions) on the controller,
over this task's connection. The module file (plugins/modules/facts.py) holds its documentation."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

IMPORT_ERROR = None
try:
    from hostkit import actions
except ImportError as exc:  # the collection without the hostkit Python package beside Ansible
    actions = None
    IMPORT_ERROR = str(exc)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(actions.ARG_SPECS["facts"]) if actions else frozenset()

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        if actions is None:
            result.update(failed=True, msg="hostkit.tuning.facts needs the hostkit Python package on the controller "
                                           "(pip install hostkit): " + IMPORT_ERROR)
            return result
        dummy, args = self.validate_argument_spec(argument_spec=actions.ARG_SPECS["facts"])
        result.update(actions.dispatch("facts", self, args, task_vars or {}))
        return result
