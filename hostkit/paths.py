"""Where hostkit finds its playbooks, roles and modules, and where it keeps its runs.

Two layouts hold the same files (``scripts/build_collection.py`` makes one from the other):

* **checkout**: a hostkit source tree - ``playbooks/``, ``roles/``, ``library/``,
  ``module_utils/`` beside the ``hostkit`` package (an editable install runs from it);
* **collection**: the Ansible collection ``hostkit.tuning`` the wheel carries in
  ``hostkit/collection/ansible_collections/hostkit/tuning/`` - ``playbooks/``, ``roles/``,
  ``plugins/modules/``, ``plugins/module_utils/``. Its modules import hostkit's module_utils by
  their collection name, so Ansible is given the collection's root (``ANSIBLE_COLLECTIONS_PATH``).

``HOSTKIT_PROJECT_DIR`` overrides the lookup with a directory of either layout.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hostkit.errors import HostkitError

PACKAGE_DIR = Path(__file__).resolve().parent
COLLECTION_NAMESPACE, COLLECTION_NAME = "hostkit", "tuning"
# The collections root in an installed wheel (a directory holding ansible_collections/).
INSTALLED_COLLECTIONS = PACKAGE_DIR / "collection"


@dataclass(frozen=True)
class Layout:
    """The directories Ansible is given for one layout (see the module's docstring)."""

    kind: str  # "checkout" | "collection"
    root: Path
    roles: Path
    library: Path
    module_utils: Path | None  # checkout: the modules import ansible.module_utils.hostkit_*
    collections: Path | None  # collection: the root that holds ansible_collections/hostkit/tuning

    @property
    def playbooks(self) -> Path:
        return self.root / "playbooks"


def layout_of(root: Path) -> Layout | None:
    """The layout of ``root`` (a checkout or a collection directory), None when it is neither."""
    root = Path(root).absolute()
    if not (root / "playbooks").is_dir() or not (root / "roles").is_dir():
        return None
    if (root / "library").is_dir():
        return Layout("checkout", root, root / "roles", root / "library", root / "module_utils", None)
    if (root / "plugins" / "modules").is_dir():
        parts = root.parts
        collections = (Path(*parts[:-3]) if len(parts) > 3 and parts[-3] == "ansible_collections"
                       and parts[-2:] == (COLLECTION_NAMESPACE, COLLECTION_NAME) else None)
        return Layout("collection", root, root / "roles", root / "plugins" / "modules", None, collections)
    return None


def layout() -> Layout:
    """``HOSTKIT_PROJECT_DIR`` if set, else the checkout this package runs from, else the
    collection installed with it."""
    env = os.environ.get("HOSTKIT_PROJECT_DIR")
    if env:
        found = layout_of(Path(env))
        if found is None:
            raise HostkitError(f"HOSTKIT_PROJECT_DIR={env}: neither a hostkit checkout (playbooks/, roles/, "
                               f"library/) nor the {COLLECTION_NAMESPACE}.{COLLECTION_NAME} collection "
                               "(playbooks/, roles/, plugins/modules/)")
        return found
    installed = INSTALLED_COLLECTIONS / "ansible_collections" / COLLECTION_NAMESPACE / COLLECTION_NAME
    found = layout_of(PACKAGE_DIR.parent) or layout_of(installed)
    if found is None:
        raise HostkitError(f"hostkit's playbooks are neither in a checkout ({PACKAGE_DIR.parent}) nor in the "
                           f"installed collection ({installed}): reinstall hostkit from its wheel, or set "
                           "HOSTKIT_PROJECT_DIR")
    return found


def project_root() -> Path:
    """The directory holding ``playbooks/`` and ``roles/`` (a checkout or the installed collection)."""
    return layout().root


def playbook_path(name: str) -> Path:
    return layout().playbooks / name


def state_dir() -> Path:
    """``.hostkit/`` of the current directory (or ``HOSTKIT_STATE_DIR``)."""
    return Path(os.environ.get("HOSTKIT_STATE_DIR", ".hostkit")).absolute()


def runs_dir() -> Path:
    d = state_dir() / "runs"
    d.mkdir(parents=True, exist_ok=True)
    return d
