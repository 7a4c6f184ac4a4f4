"""The README's walk-through over SSH, run as written against the one lab host it starts: a fleet of
one, on this run's own lab port. The live results the README states are checked on the host's tree:
apply changes it, rollback puts every file back byte for byte, lab down stops its sshd."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from tests.conftest import excluding_hostkit_state, lab_port
from tests.readme_examples import check, examples, run, shell_env
from tests.treehash import tree_hash

PORT = lab_port(2)  # offset 2: tests/lab/test_lab.py's CLI labs use it inside one test each and stop it


def _roots(cwd) -> dict:
    state = json.loads((cwd / ".hostkit" / "lab" / "lab.json").read_text())
    return {h["name"]: cwd / ".hostkit" / "lab" / "hosts" / h["name"] / "root" for h in state["hosts"]}


def test_walk_through_runs_as_written(lab_root):
    # The session's lab root (tmpfs where there is one): the lab host's sysroot copy is thousands of
    # small files, written, hashed and removed faster there.
    cwd = Path(tempfile.mkdtemp(prefix="readme-", dir=lab_root))
    cmds = examples("lab")
    assert cmds[0].words[:3] == ["hostkit", "lab", "up"] and cmds[-1].shell == "hostkit lab down", (
        "the walk-through starts its lab and stops it"
    )
    cmds[0].shell += f" --port {PORT}"  # this run's port: a developer's lab on 2222 is left alone
    env = shell_env(cwd)
    before: dict = {}
    up = False
    try:
        for cmd in cmds:
            proc = run(cmd, cwd, env)
            check(cmd, proc)
            sub = cmd.words[1:3]
            if sub == ["lab", "up"]:
                up = True
                roots = _roots(cwd)
                assert len(roots) == 1, f"the walk-through stays a fleet of one: {sorted(roots)}"
                before = {name: excluding_hostkit_state(tree_hash(root)) for name, root in roots.items()}
            elif sub[0] == "apply" and "--check" not in cmd.words:
                for name, root in roots.items():
                    assert excluding_hostkit_state(tree_hash(root)) != before[name], f"apply changed nothing on {name}"
            elif sub[0] == "rollback":
                for name, root in roots.items():
                    assert excluding_hostkit_state(tree_hash(root)) == before[name], f"{name} is not back to the byte"
            elif sub == ["lab", "down"]:
                up = False
                assert not (cwd / ".hostkit" / "lab").exists()
    finally:
        if up:
            run(cmds[-1], cwd, env)
