"""Ansible inventories as hostkit reads them: parsed up front, so bad input fails before any run."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from hostkit.core.sysroot import excerpt
from hostkit.errors import BadInput
from hostkit.jsonfile import check_name, check_numbers, check_shape, name_problem, read_text
from hostkit.tunables import PATH_VARS
from hostkit.yamlfile import parse_yaml


@dataclass
class InventoryHost:
    name: str
    vars: dict = field(default_factory=dict)

    @property
    def sysroot(self) -> str:
        return self.vars.get("hostkit_sysroot") or "/"


def _port(value) -> str | None:
    """None for a port Ansible and hostkit's own connections can use (or a template Ansible resolves)."""
    if isinstance(value, str) and "{{" in value:
        return None
    if isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535:
        return None
    return "must be a port number (1-65535)"


def _sysroot(value) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        return f"must be a path, got {type(value).__name__}"
    problem = name_problem(value)
    return f"{excerpt(value)}: {problem}" if problem else None


_OPT_STR = (str, type(None))
# The variables hostkit reads of an inventory host on the controller, and the type of each (every
# one optional); hostkit_overrides' content is the profile schema's (hostkit.profiles.schema), the
# hooks' the rollout's (hostkit.rollout.hooks). Every number of every variable kept is bounded
# (hostkit.jsonfile.check_numbers).
HOST_VARS = {
    "hostkit_sysroot": _sysroot,
    "hostkit_profile": _OPT_STR,
    "ansible_host": _OPT_STR,
    "ansible_ssh_host": _OPT_STR,
    "ansible_user": _OPT_STR,
    "ansible_port": lambda v: None if v is None else _port(v),
    "ansible_ssh_port": lambda v: None if v is None else _port(v),
    **dict.fromkeys(PATH_VARS, _OPT_STR),
}


def load_inventory(path: str | os.PathLike, limit: str | None = None) -> list[InventoryHost]:
    """Hosts (with their merged variables) of an inventory, after ``--limit``.

    Raises :class:`BadInput` for a missing file, a YAML file that does not
    parse, an inventory Ansible cannot read, variables of the wrong type or
    out of range, or a limit that matches nothing.
    """
    p = Path(check_name(path, "inventory"))
    if not p.exists():
        raise BadInput(f"inventory {path} does not exist")
    if p.is_file() and p.suffix in (".yml", ".yaml"):
        # hostkit's bounded reader first: size, encoding, nesting, aliases and numbers, in one line.
        data = parse_yaml(read_text(p), f"inventory {path}")
        if not isinstance(data, dict):
            raise BadInput(f"inventory {path} must be a YAML mapping of groups, got {type(data).__name__}")

    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    try:
        inv = InventoryManager(loader=loader, sources=[str(p)], parse=True)
    except Exception as exc:  # ansible raises AnsibleError subclasses and plain ones
        raise BadInput(f"inventory {path} could not be read: {_line(exc)}") from None
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
        try:
            hv = vm.get_vars(host=h, include_hostvars=False)
        except (AnsibleError, ValueError, OverflowError) as exc:  # group_vars/host_vars Ansible could not load
            raise BadInput(
                f"inventory {path}: the variables of host {h.name} could not be read: {_line(exc)}"
            ) from None
        # hostkit's and Ansible's variables, and the role paths an inventory may move (the audit reads there).
        keep = _plain(
            {
                k: v
                for k, v in hv.items()
                if k.startswith(("hostkit_", "ansible_")) or k in ("group_names",) or k in PATH_VARS
            }
        )
        for var, value in keep.items():
            where = f"inventory {path}: host {h.name}: {var}"
            check_numbers(value, where)
            if var in HOST_VARS:
                check_shape(value, HOST_VARS[var], where)
        out.append(InventoryHost(name=h.name, vars=keep))
    return out


def _line(exc: BaseException) -> str:
    """An exception's message as one line of an error (Ansible's span several, with a file excerpt)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]


def _plain(value):
    """Ansible's tagged/unsafe strings and lazy containers as plain Python values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return value
    return str(value)
