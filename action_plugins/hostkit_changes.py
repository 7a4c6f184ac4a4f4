# -*- coding: utf-8 -*-
"""The action plugin of the modules hostkit_changes and hostkit_lock (hostkit_lock.py is a link to
this file). With the hostkit Python package on the controller, the module's work is done by the
host's hostkit agent in one call (hostkit.actions.AGENT_MODULES: hostkit_changes' changes are
checked on the controller first, with the module's rules), which needs no Ansible module_utils
compiled on the host; without it, the module in plugins/modules/ runs as Ansible ships any module.
Both run the same code (module_utils/hostkit_change_set.py, module_utils/hostkit_host_lock.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

try:
    from hostkit import actions
except ImportError:  # the collection without the hostkit Python package beside Ansible
    actions = None

# The module this plugin is: its own name (...plugins.action.<name>), whichever link loaded it.
MODULE = __name__.rsplit(".", 1)[-1]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        if actions is None:
            result.update(self._execute_module(task_vars=task_vars))
            return result
        spec, work = actions.AGENT_MODULES[MODULE]
        dummy, args = self.validate_argument_spec(argument_spec=spec)
        try:
            python = actions.host_python(task_vars, self._templar.template)
            result.update(
                work(
                    actions.ActionRemote(self),
                    args,
                    check_mode=bool(self._task.check_mode),
                    diff_mode=bool(self._task.diff),
                    python=python,
                )
            )
        except actions.HostkitError as exc:
            result.update(failed=True, changed=False, msg=str(exc))
        return result
