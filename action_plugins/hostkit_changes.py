# -*- coding: utf-8 -*-
"""The action plugin of hostkit_changes: with the hostkit Python package on the controller, the
changes are checked there with the module's rules and made by the host's hostkit agent in one call
(hostkit.actions.changes), which needs no Ansible module_utils compiled on the host; without it,
the module plugins/modules/hostkit_changes.py runs as Ansible ships any module. Both run the same
code (module_utils/hostkit_change_set.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

try:
    from hostkit import actions
    from hostkit.agent.changes.change_set import ARGUMENT_SPEC
except ImportError:  # the collection without the hostkit Python package beside Ansible
    actions = None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        if actions is None:
            result.update(self._execute_module(task_vars=task_vars))
            return result
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            result.update(actions.changes(actions.ActionRemote(self), args, check_mode=bool(self._task.check_mode),
                                          diff_mode=bool(self._task.diff), python=actions.host_python(task_vars, self._templar.template)))
        except actions.HostkitError as exc:
            result.update(failed=True, changed=False, msg=str(exc))
        return result
