"""ansible-lint, production profile, over roles/ and playbooks/ (offline: no collection fetched)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from hostkit.paths import checkout_collection_view

REPO = Path(__file__).resolve().parents[2]


def test_ansible_lint_production_profile_passes():
    lint = Path(sys.executable).parent / "ansible-lint"
    assert lint.exists() or shutil.which("ansible-lint"), "ansible-lint is a test dependency (pip install -e .[test])"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}", NO_COLOR="1")
    # ansible.cfg's collections_path names the checkout's collection view, which hostkit makes at
    # run time: a fresh clone has none until then, and the FQCN module names would not resolve.
    checkout_collection_view(REPO)
    proc = subprocess.run(
        [str(lint) if lint.exists() else "ansible-lint", "roles/", "playbooks/"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "Profile 'production' was required, and it passed" in proc.stdout + proc.stderr


def test_role_readmes_document_every_variable():
    proc = subprocess.run(
        [sys.executable, "scripts/role_readmes.py", "--check"], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout


def test_every_role_has_the_layout():
    """No handlers/: a role's commands (restarts, update-grub) run in its one module call, after the
    changes they follow (hostkit_changes' run changes)."""
    for role in (REPO / "roles").iterdir():
        for part in (
            "defaults/main.yml",
            "vars/main.yml",
            "tasks/main.yml",
            "meta/argument_specs.yml",
            "meta/main.yml",
            "README.md",
        ):
            assert (role / part).exists(), f"{role.name}: {part}"
        assert not (role / "handlers").exists(), f"{role.name}: handlers/ (use run changes of hostkit_changes)"
        assert (role / "templates").is_dir(), role.name
        for tpl in (role / "templates").glob("*.j2"):
            text = tpl.read_text()
            if not tpl.name.endswith(".json.j2") and tpl.name != "report.j2":  # data, not files
                assert text.startswith("{{ ansible_managed | comment }}"), tpl
