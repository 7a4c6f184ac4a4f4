"""The kinds of change hostkit makes on a host (one module each, ``hostkit_change_<kind>`` in
``module_utils/``) and the set of them one role makes in one call (:mod:`.change_set`): run by
hostkit's Ansible modules and, from a parsed request, by the agent (``hostkit-agent changes``)."""
