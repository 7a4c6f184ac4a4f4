"""Drive ansible-runner: inventories, extravars, events, progress and results."""

from hostkit.runner.inventory import InventoryHost, load_inventory
from hostkit.runner.run import HostResult, RunResult, TaskResult, new_run_id, run_playbook

__all__ = ["InventoryHost", "load_inventory", "HostResult", "RunResult", "TaskResult", "new_run_id", "run_playbook"]
