"""The code that runs ON hosts: the agent's entry point (:mod:`hostkit.agent.main`), the change
journal, exact rollback, adoption, and the parsers and sysroot helpers shared with hostkit's
Ansible modules through ``module_utils/`` (symlinks to these files).

Standard library only: this package ships to hosts inside the agent zipapp
(:mod:`hostkit.ansible.agent_zipapp`), where the host needs nothing but python3.
"""
