"""Ansible inventories as hostkit reads them: parsed up front, so bad input fails before any run."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hostkit.errors import BadInput
from hostkit.tunables import PATH_VARS


@dataclass
class InventoryHost:
    name: str
    vars: dict = field(default_factory=dict)

    @property
    def sysroot(self) -> str:
        return self.vars.get("hostkit_sysroot") or "/"


def load_inventory(path: str | os.PathLike, limit: str | None = None) -> list[InventoryHost]:
    """Hosts (with their merged variables) of an inventory, after ``--limit``.

    Raises :class:`BadInput` for a missing file, a YAML file that does not
    parse, an inventory Ansible cannot read, or a limit that matches nothing.
    """
    p = Path(path)
    if not p.exists():
        raise BadInput(f"inventory {path} does not exist")
    if p.is_file() and p.suffix in (".yml", ".yaml"):
        try:
            data = yaml.safe_load(p.read_text())
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark else ""
            raise BadInput(f"inventory {path} is not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
        if not isinstance(data, dict):
            raise BadInput(f"inventory {path} must be a YAML mapping of groups, got {type(data).__name__}")

    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    try:
        inv = InventoryManager(loader=loader, sources=[str(p)], parse=True)
    except Exception as exc:  # ansible raises AnsibleError subclasses and plain ones
        raise BadInput(f"inventory {path} could not be read: {exc}") from None
    if not inv.list_hosts("all"):
        raise BadInput(f"inventory {path} has no hosts (or Ansible could not parse it)")
    if limit:
        inv.subset(limit)
    hosts = inv.list_hosts("all")
    if not hosts:
        raise BadInput(f"--limit {limit!r} matches no host of inventory {path}")
    vm = VariableManager(loader=loader, inventory=inv)
    out = []
    for h in hosts:
        hv = vm.get_vars(host=h, include_hostvars=False)
        # hostkit's and Ansible's variables, and the role paths an inventory may move (the audit reads there).
        keep = {
            k: v
            for k, v in hv.items()
            if k.startswith(("hostkit_", "ansible_")) or k in ("group_names",) or k in PATH_VARS
        }
        out.append(InventoryHost(name=h.name, vars=_plain(keep)))
    return out


def _plain(value):
    """Ansible's tagged/unsafe strings and lazy containers as plain Python values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return value
    return str(value)
