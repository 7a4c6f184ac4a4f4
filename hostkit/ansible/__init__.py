"""The controller side's Ansible driver: inventories (:mod:`.inventory`), runs of hostkit's
playbooks through ansible-runner with their events and results (:mod:`.run`), the host agent's
zipapp (:mod:`.agent_zipapp`) and its calls (:mod:`.agent_call`), and apply (:mod:`.apply`)."""
