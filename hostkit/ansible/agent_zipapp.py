"""Build the host agent's zipapp on the controller: the artifact hostkit ships to hosts.

The zipapp holds the standard-library-only code that runs on a host (:mod:`hostkit.agent`,
the facts engine, the smoke test) with :mod:`hostkit.agent.main` as its entry point; a host
needs nothing but python3. Next to each source it carries the bytecode of the controller's
Python (unchecked hash-based ``.pyc``): a host with the same Python version skips compiling
(about 40% of a ``facts`` call's CPU), any other version falls back to the sources.

On a host the agent is kept in a cache named by its content (:func:`locate_script`):
``/var/cache/hostkit/agent`` for root, ``~/.cache/hostkit/agent`` for another user, mode 0700,
the file's sha256 checked before every run. ``playbooks/agent.yml`` and the audit run it from
there and copy it only when the host does not hold this version yet (exit :data:`CACHE_MISS`);
the smoke role still copies it with Ansible's ``script`` module.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import importlib.util
import io
import json
import os
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import hostkit
from hostkit.core.sysroot import atomic_write

PACKAGE_ROOT = Path(hostkit.__file__).parent
ENTRY = "agent/main.py"


def shipped() -> list[str]:
    """The agent's entry point and every hostkit module it imports, transitively (each package's
    ``__init__.py`` included), as paths relative to the package. Each of them must import nothing
    outside the standard library and this set (tests/unit/test_agent.py checks it with python3 -I -S)."""
    todo, seen = [ENTRY], set()
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        for node in ast.walk(ast.parse((PACKAGE_ROOT / rel).read_text(), rel)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for parts in (n.split(".") for n in names if n.split(".")[0] == "hostkit"):
                for i in range(1, len(parts) + 1):
                    base = "/".join(parts[1:i])
                    todo += [
                        c
                        for c in (f"{base}/__init__.py" if base else "__init__.py", f"{base}.py")
                        if (PACKAGE_ROOT / c).is_file()
                    ]
    return sorted(seen)


# The guard matters: the smoke test spawns processes, and multiprocessing's spawn re-imports the
# main module (as __mp_main__) in every child.
MAIN = "from hostkit.agent.main import main\nif __name__ == '__main__':\n    raise SystemExit(main())\n"


# Compiles each source of a JSON object {name: base64 source} on stdin into its unchecked hash-based
# .pyc (PEP 552), printed as the same JSON shape.
_COMPILE = """
import base64, importlib.util, json, sys
from importlib._bootstrap_external import _code_to_hash_pyc
out = {}
for name, text in sorted(json.load(sys.stdin).items()):
    src = base64.b64decode(text)
    code = compile(src, name, "exec", dont_inherit=True)
    out[name] = base64.b64encode(bytes(_code_to_hash_pyc(code, importlib.util.source_hash(src), checked=False))).decode()
json.dump(out, sys.stdout)
"""


def _pycs(files: dict[str, bytes]) -> dict[str, bytes]:
    """Each source's unchecked hash-based ``.pyc``, compiled in a fresh interpreter (``-S -s``, string
    hashing seeded with 0) so that the bytes depend on the sources and the Python build alone.

    marshal's output depends on the compiling process: a constant string the process happened to
    have interned already is written as interned, and a set's order follows the string hash seed.
    Compiled in-process, the same sources gave zipapps of two contents under one name (one from
    pytest's module cases), and the hosts' shared cache swapped one for the other under a running
    agent (zipimport: "bad local file header")."""
    request = json.dumps({name: base64.b64encode(data).decode() for name, data in files.items()})
    # The caller's environment (a Python built to need LD_LIBRARY_PATH still starts) without its
    # PYTHON* settings: no PYTHONPATH, no other hash seed, no -O from PYTHONOPTIMIZE.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run(
        [sys.executable, "-S", "-s", "-c", _COMPILE],
        input=request.encode(),
        capture_output=True,
        env={**env, "PYTHONHASHSEED": "0"},
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"compiling the agent's sources failed: {proc.stderr.decode(errors='replace')[-500:]}")
    return {name: base64.b64decode(text) for name, text in json.loads(proc.stdout).items()}


def build(dest_dir: str | Path) -> Path:
    """Write ``hostkit-agent-<sha256>.pyz`` into ``dest_dir`` (reused if present), named by its own
    content. Its bytes depend on the sources and the controller's Python build alone (:func:`_pycs`),
    so one version of hostkit (and of Python) always ships the same file and a host that holds it
    never receives it again; and two files of one name are always one content, so a host's cache
    (:func:`locate_script`) never replaces the file an agent is running from."""
    # Fast path: the package's sources unchanged since the last build (by path, size and mtime)
    # name the same artifact without parsing every module again.
    stamp = hashlib.sha256(importlib.util.MAGIC_NUMBER)
    for p in sorted(PACKAGE_ROOT.rglob("*.py")):
        st = p.stat()
        stamp.update(f"{p.relative_to(PACKAGE_ROOT)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    index = Path(dest_dir) / f".sources-{stamp.hexdigest()[:16]}"
    if index.is_file() and (Path(dest_dir) / index.read_text().strip()).is_file():
        return Path(dest_dir) / index.read_text().strip()
    files = {f"hostkit/{rel}": (PACKAGE_ROOT / rel).read_bytes() for rel in shipped()}
    pycs = _pycs(files)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            for arc, body in ((name, data), (name + "c", pycs[name])):
                info = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, body)
        info = zipfile.ZipInfo("__main__.py", date_time=(2020, 1, 1, 0, 0, 0))
        zf.writestr(info, MAIN)
    data = b"#!/usr/bin/env python3\n" + buf.getvalue()
    dest = Path(dest_dir) / f"hostkit-agent-{hashlib.sha256(data).hexdigest()[:16]}.pyz"
    if not dest.exists():
        atomic_write(str(dest), data, mode=0o755)  # a concurrent hostkit never reads half a file
    atomic_write(str(index), dest.name.encode())
    return dest


def sha256(artifact: str | Path) -> str:
    return hashlib.sha256(Path(artifact).read_bytes()).hexdigest()


# The exit status of :func:`locate_script` when the host does not hold this agent yet.
CACHE_MISS = 97
CACHE_DIR = 'if [ "$(id -u)" = 0 ]; then d=/var/cache/hostkit/agent; else d="${HOME:?}/.cache/hostkit/agent"; fi'


def locate_script(artifact: str | Path, *, upload: bool = False) -> str:
    """POSIX sh that sets ``$f`` to the host's cached copy of ``artifact`` after checking its
    sha256. A host without it: with ``upload``, the copy is read from stdin (written to a
    temporary name, then renamed); without, the cache directory is created, its file's path
    printed, and the script exits :data:`CACHE_MISS` (the caller copies the file there and
    runs again). Copies unused for 30 days are removed when another version is stored."""
    name = Path(artifact).name
    store = (
        '{ (umask 077 && mkdir -p "$d" && cat > "$f.$$" && mv -f "$f.$$" "$f") || '
        '{ rm -f "$f.$$"; echo "hostkit: cannot store the agent in $d" >&2; exit 98; }; }; '
        f'find "$d" -name "hostkit-agent-*.pyz" ! -name {shlex.quote(name)} -mtime +30 -exec rm -f {{}} + '
        "2>/dev/null; "
    )
    miss = f'(umask 077 && mkdir -p "$d") && echo "$f"; exit {CACHE_MISS}; '
    return (
        f'{CACHE_DIR}; f="$d/{name}"; '
        f'if ! {{ [ -f "$f" ] && echo "{sha256(artifact)}  $f" | sha256sum -c --status; }} 2>/dev/null; then '
        + (store if upload else miss)
        + "fi; "
    )


def store_command(artifact: str | Path) -> str:
    """A shell command line that stores ``artifact``, read from stdin, in the host's cache unless the
    host holds it already (:func:`locate_script`): for an agent call whose own stdin carries its input."""
    return shlex.join(["sh", "-c", locate_script(artifact, upload=True) + "exit 0"])


def agent_command(artifact: str | Path, *, upload: bool = False) -> str:
    """The start of a shell command line that runs the host's cached copy of ``artifact``
    (:func:`locate_script`; with ``upload``, a host without it reads it from stdin); append the
    host's python3 and the agent's arguments, each quoted."""
    return shlex.join(
        ["sh", "-c", locate_script(artifact, upload=upload) + 'p=$1; shift; exec "$p" "$f" "$@"', "hostkit-agent"]
    )
