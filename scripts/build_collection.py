#!/usr/bin/env python3
"""Assemble the Ansible collection ``hostkit.tuning`` from the repository layout.

    python scripts/build_collection.py DEST        # writes DEST/ansible_collections/hostkit/tuning/
    python scripts/build_collection.py DEST --tar  # ... and runs `ansible-galaxy collection build` on it
    python scripts/build_collection.py DEST --sanity  # ... and runs `ansible-test sanity` on it (make sanity)
    python scripts/build_collection.py --view      # the checkout's collection view (build/collections/)

The repository keeps Ansible's project layout (``library/``, ``module_utils/``, ``roles/``,
``playbooks/``); the collection is made from it, never kept beside it. Which repository path each
part of the collection comes from is written once, in ``hostkit/paths.py``
(``COLLECTION_SOURCES``, ``COLLECTION_META``): this script copies by it, and a checkout's hostkit
runs give Ansible the same collection as symlinks by it (``checkout_collection_view``):

=================================  ==========================================================
collection                         repository
=================================  ==========================================================
``galaxy.yml``, ``meta/``,         ``collection/`` (``galaxy.yml``'s version is hostkit's,
``README.md``, ``tests/sanity/``   ``hostkit.__version__``, written here)
``plugins/modules/*.py``           ``library/*.py``
``plugins/module_utils/*.py``      ``module_utils/*.py``: symlinks to ``hostkit/agent/``, copied
                                   as the files they point to
``roles/``, ``playbooks/``         the same directories (role READMEs included)
``inventories/``                   the example inventories
``LICENSE``                        ``LICENSE``
=================================  ==========================================================

One rewrite, on Python files only: ``from ansible.module_utils.hostkit_X import`` (how modules
find hostkit's module_utils in the project layout, through ``ANSIBLE_MODULE_UTILS``) becomes
``from ansible_collections.hostkit.tuning.plugins.module_utils.hostkit_X import``. Nothing else
differs. The wheel's build (``setuptools`` ``build_py``, :class:`BuildPy`) puts the same tree at
``hostkit/collection/ansible_collections/hostkit/tuning/`` (see ``hostkit/paths.py``).

Standard library only: it runs inside the wheel's isolated build environment.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tree_module(name: str):
    """A module of the hostkit tree being built, imported from it (the wheel's isolated build
    environment has no hostkit installed; what is imported this way needs only the standard library
    and ``hostkit.errors``)."""
    sys.path.insert(0, str(ROOT))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT))


paths = _tree_module("hostkit.paths")
NAMESPACE, NAME = paths.COLLECTION_NAMESPACE, paths.COLLECTION_NAME
COLLECTION_PKG = f"ansible_collections.{NAMESPACE}.{NAME}.plugins.module_utils"
LEGACY_IMPORT = re.compile(
    r"^(?P<indent>[ \t]*)from ansible\.module_utils\.(?P<name>hostkit_\w+) import "
    r"(?:\((?P<group>[^)]*)\)|(?P<names>[^\n]*))",
    re.M,
)
# Collection directories of Python files whose hostkit module_utils imports are rewritten.
PYTHON_DIRS = ("plugins/modules", "plugins/module_utils")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc")  # never part of the collection


def rewrite_imports(source: str) -> str:
    """The project layout's module_utils imports, as the collection's (a parenthesised list of
    names goes on one hanging-indented line: the old alignment would no longer line up)."""

    def sub(m: re.Match) -> str:
        head = f"{m['indent']}from {COLLECTION_PKG}.{m['name']} import "
        if m["group"] is None:
            return head + m["names"]
        names = " ".join(m["group"].split())
        return f"{head}(\n{m['indent']}    {names})"

    return LEGACY_IMPORT.sub(sub, source)


def version(root: Path = ROOT) -> str:
    """hostkit's version: ``__version__`` of ``hostkit/__init__.py``, its one place (pyproject.toml
    reads it too, ``[tool.setuptools.dynamic]``)."""
    tree = ast.parse((root / "hostkit" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__version__"]:
            return ast.literal_eval(node.value)
    raise SystemExit(f"{root / 'hostkit' / '__init__.py'}: no __version__")


def _copy_py(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(rewrite_imports(src.read_text()))
    os.chmod(dest, 0o644)


def assemble(dest: Path, root: Path = ROOT) -> Path:
    """Write the collection under ``dest/ansible_collections/hostkit/tuning`` (replacing it) and
    return that directory."""
    coll = paths.collection_dir(dest)
    if coll.exists():
        shutil.rmtree(coll)
    src = root / paths.COLLECTION_META
    shutil.copytree(src, coll, ignore=SKIP)
    galaxy = coll / "galaxy.yml"
    text = galaxy.read_text()
    if not re.search(r"^version: .*$", text, re.M):
        raise SystemExit(f"{src / 'galaxy.yml'}: no 'version:' line")
    galaxy.write_text(re.sub(r"^version: .*$", f"version: {version(root)}", text, count=1, flags=re.M))
    for target, name in paths.COLLECTION_SOURCES.items():
        if target in PYTHON_DIRS:  # module_utils links into hostkit/agent/ are copied as their files
            for py in sorted((root / name).glob("*.py")):
                _copy_py(py.resolve(), coll / target / py.name)
        elif (root / name).is_dir():
            shutil.copytree(root / name, coll / target, ignore=SKIP, symlinks=False)
        else:
            shutil.copy(root / name, coll / target)
    return coll


def galaxy_build(coll: Path, out: Path) -> Path:
    """``ansible-galaxy collection build`` of an assembled tree; the tarball's path. The build is
    hostkit's own (:func:`hostkit.ansible.collection.galaxy_build`, what ``hostkit collection
    install`` runs), imported from this tree like ``hostkit/paths.py``."""
    collection, errors = _tree_module("hostkit.ansible.collection"), _tree_module("hostkit.errors")
    try:
        return collection.galaxy_build(coll, out)
    except errors.HostkitError as exc:
        raise SystemExit(str(exc)) from None


# ansible-test bootstraps pip in each of its virtual environments with a get-pip script it
# downloads from ci-files.testing.ansible.com (not reachable from every build host). It runs
# the cached copy, with pip's install arguments, instead: this one bootstraps the interpreter's
# own ensurepip and installs the pinned pip ansible-test asks for from the configured index.
GET_PIP_SHIM = """\
import subprocess, sys
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "--upgrade"] + args)
"""
# ansible-test's own virtual environments (pinned pylint, pycodestyle, yamllint, voluptuous...),
# kept in hostkit's user cache rather than in the checkout: a clean clone reuses them instead of
# installing them again (about a minute of the fast suite). ansible-test names each environment
# by its requirements' hash, so one home serves every ansible-core version.
SANITY_HOME = paths.user_cache_dir() / "ansible-test-home"


def sanity(coll: Path, home: Path = SANITY_HOME) -> subprocess.CompletedProcess:
    """``ansible-test sanity --local`` on an assembled tree, with this interpreter's Python version.
    ansible-test keeps its per-test virtual environments (pinned pylint, pycodestyle, yamllint,
    voluptuous...) under ``home``: the first run on a machine installs them from the package index,
    later runs (other checkouts too) are offline."""
    bindir = Path(sys.executable).parent
    test = bindir / "ansible-test"
    if not test.exists():
        raise SystemExit(f"{test} not found (pip install ansible-core)")
    cache = home / ".ansible" / "test" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    spec = importlib.util.find_spec("ansible_test")  # the pip version it bootstraps
    wants = Path(spec.submodule_search_locations[0]) / "_internal" / "python_requirements.py"
    for pip_version in re.findall(r"pip='([0-9.]+)'", wants.read_text()):
        (cache / f"get_pip_{pip_version.replace('.', '_')}.py").write_text(GET_PIP_SHIM)
    env = dict(os.environ, HOME=str(home), PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    for var in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS", "ANSIBLE_LIBRARY", "ANSIBLE_MODULE_UTILS"):
        env.pop(var, None)
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return subprocess.run(
        [str(test), "sanity", "--local", "--python", version, "--color", "no"],
        cwd=coll,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )


try:  # the wheel's build: only when setuptools imports this file (tool.setuptools.cmdclass)
    from setuptools.command.build_py import build_py as _build_py
except ImportError:  # pragma: no cover - plain script use without setuptools
    _build_py = object


class BuildPy(_build_py):  # type: ignore[misc,valid-type]
    """``build_py`` that also writes the collection into the wheel's ``hostkit/collection/``.
    An editable install runs from the checkout and uses its layout, so it gets none."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        assemble(Path(self.build_lib) / "hostkit" / "collection", Path.cwd())


def main(argv: list[str]) -> int:
    if argv == ["--view"]:
        print(paths.checkout_collection_view(ROOT))
        return 0
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    coll = assemble(Path(args[0]).absolute())
    print(coll)
    if "--tar" in argv:
        print(galaxy_build(coll, Path(args[0]).absolute()))
    if "--sanity" in argv:
        proc = sanity(coll)
        print(proc.stdout + proc.stderr)
        return proc.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
