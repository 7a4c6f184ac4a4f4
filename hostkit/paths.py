"""Where hostkit finds its playbooks, roles and modules, and where it keeps its runs.

Two layouts hold the same files (``scripts/build_collection.py`` makes one from the other):

* **checkout**: a hostkit source tree - ``playbooks/``, ``roles/``, ``library/``,
  ``module_utils/`` beside the ``hostkit`` package (an editable install runs from it);
* **collection**: the Ansible collection ``hostkit.tuning`` the wheel carries in
  ``hostkit/collection/ansible_collections/hostkit/tuning/`` - ``playbooks/``, ``roles/``,
  ``plugins/modules/``, ``plugins/module_utils/``. Its modules import hostkit's module_utils by
  their collection name.

:data:`COLLECTION_SOURCES` is the one rule between the two: which checkout path each part of
the collection is made of. ``scripts/build_collection.py`` copies by it (the wheel, ``ansible-galaxy
collection build``); a checkout gets a *view* by it (:func:`checkout_collection_view`): the same
collection as symlinks into the checkout, under ``build/collections/``. Either way the playbooks
and roles call hostkit's modules by their FQCN (``hostkit.tuning.hostkit_values``), found through
the collections root hostkit gives Ansible (``ANSIBLE_COLLECTIONS_PATH``,
:func:`hostkit.ansible.settings.runner_env`). The view's modules are the checkout's own files:
their ``ansible.module_utils.hostkit_*`` imports resolve through ``module_utils/``
(``ANSIBLE_MODULE_UTILS``); the built collection has them rewritten to collection names.

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
# The collection's files and the checkout's they are made of (collection path: checkout path).
# Besides these, the collection holds what the checkout keeps in COLLECTION_META: galaxy.yml,
# meta/, README.md, plugins/doc_fragments/, tests/sanity/.
COLLECTION_SOURCES = {
    "plugins/modules": "library",
    "plugins/module_utils": "module_utils",
    "plugins/action": "action_plugins",
    "roles": "roles",
    "playbooks": "playbooks",
    "inventories": "inventories",
    "extensions": "extensions",
    "LICENSE": "LICENSE",
}
COLLECTION_META = "collection"
# A checkout's collection view: a collections root (holding ansible_collections/) in build/.
CHECKOUT_COLLECTIONS = Path("build") / "collections"


@dataclass(frozen=True)
class Layout:
    """The directories Ansible is given for one layout (see the module's docstring)."""

    kind: str  # "checkout" | "collection"
    root: Path
    roles: Path
    module_utils: Path | None  # checkout: the modules import ansible.module_utils.hostkit_*
    # The root that holds ansible_collections/hostkit/tuning: the collection's own, or where a
    # checkout's view goes (made by checkout_collection_view).
    collections: Path

    @property
    def playbooks(self) -> Path:
        return self.root / "playbooks"


def layout_of(root: Path) -> Layout | None:
    """The layout of ``root`` (a checkout or a collection directory), None when it is neither."""
    root = Path(root).absolute()
    if not (root / "playbooks").is_dir() or not (root / "roles").is_dir():
        return None
    if (root / "library").is_dir():
        return Layout("checkout", root, root / "roles", root / "module_utils", root / CHECKOUT_COLLECTIONS)
    parts = root.parts  # a collection is found by its FQCN: .../ansible_collections/hostkit/tuning
    if (
        (root / "plugins" / "modules").is_dir()
        and len(parts) > 3
        and parts[-3] == "ansible_collections"
        and parts[-2:] == (COLLECTION_NAMESPACE, COLLECTION_NAME)
    ):
        return Layout("collection", root, root / "roles", None, Path(*parts[:-3]))
    return None


def collection_dir(collections: Path) -> Path:
    """``ansible_collections/hostkit/tuning`` under a collections root."""
    return Path(collections) / "ansible_collections" / COLLECTION_NAMESPACE / COLLECTION_NAME


def checkout_collection_view(root: Path) -> Path:
    """The collection ``hostkit.tuning`` of the checkout ``root`` as symlinks into it
    (:data:`COLLECTION_SOURCES`, and the entries of ``collection/``), under
    ``root/build/collections``; made when missing or stale, each link replaced atomically so a
    concurrent run never sees a half-made view. Returns the collections root. The links name whole
    directories: a role or module added to the checkout is in the view at once."""
    root = Path(root).absolute()
    coll = collection_dir(root / CHECKOUT_COLLECTIONS)
    meta = root / COLLECTION_META

    def entries(d: Path) -> list[str]:
        return sorted(n for n in os.listdir(d) if not n.startswith(".")) if d.is_dir() else []

    links = {name: meta / name for name in entries(meta) if name != "plugins"}
    links.update({f"plugins/{name}": meta / "plugins" / name for name in entries(meta / "plugins")})
    links.update({dest: root / src for dest, src in COLLECTION_SOURCES.items() if (root / src).exists()})
    try:
        for dest, target in sorted(links.items()):
            link = coll / dest
            rel = os.path.relpath(target, link.parent)
            if link.is_symlink() and os.readlink(link) == rel:
                continue
            link.parent.mkdir(parents=True, exist_ok=True)
            tmp = link.with_name(f".{link.name}.{os.getpid()}")
            if tmp.is_symlink():  # left by a run of this pid that died here
                tmp.unlink()
            os.symlink(rel, tmp)
            os.replace(tmp, link)
    except OSError as e:
        raise HostkitError(
            f"cannot make the collection view of the checkout in {coll}: {e} (hostkit "
            f"writes it there to run its playbooks from {root})"
        ) from e
    return root / CHECKOUT_COLLECTIONS


def layout() -> Layout:
    """``HOSTKIT_PROJECT_DIR`` if set, else the checkout this package runs from, else the
    collection installed with it."""
    env = os.environ.get("HOSTKIT_PROJECT_DIR")
    if env:
        found = layout_of(Path(env))
        if found is None:
            raise HostkitError(
                f"HOSTKIT_PROJECT_DIR={env}: neither a hostkit checkout (playbooks/, roles/, "
                f"library/) nor the {COLLECTION_NAMESPACE}.{COLLECTION_NAME} collection "
                "(.../ansible_collections/hostkit/tuning with playbooks/, roles/, plugins/modules/)"
            )
        return found
    installed = INSTALLED_COLLECTIONS / "ansible_collections" / COLLECTION_NAMESPACE / COLLECTION_NAME
    found = layout_of(PACKAGE_DIR.parent) or layout_of(installed)
    if found is None:
        raise HostkitError(
            f"hostkit's playbooks are neither in a checkout ({PACKAGE_DIR.parent}) nor in the "
            f"installed collection ({installed}): reinstall hostkit from its wheel, or set "
            "HOSTKIT_PROJECT_DIR"
        )
    return found


def project_root() -> Path:
    """The directory holding ``playbooks/`` and ``roles/`` (a checkout or the installed collection)."""
    return layout().root


def playbook_path(name: str) -> Path:
    return layout().playbooks / name


def state_dir() -> Path:
    """``.hostkit/`` of the current directory (or ``HOSTKIT_STATE_DIR``)."""
    return Path(os.environ.get("HOSTKIT_STATE_DIR", ".hostkit")).absolute()


def user_cache_dir() -> Path:
    """hostkit's directory in the user's cache (``$XDG_CACHE_HOME/hostkit``, else ``~/.cache/hostkit``):
    what is built once per machine and kept across checkouts and runs."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path("~/.cache").expanduser()) / "hostkit"


def runs_dir() -> Path:
    d = state_dir() / "runs"
    d.mkdir(parents=True, exist_ok=True)
    return d
