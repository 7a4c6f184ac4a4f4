"""The audit's pytest plugin (testinfra's own idiom) without a host: what it says when it has nothing
to audit. Runs against hosts are in tests/lab/test_operator_settings.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_testinfra_idiom_without_an_inventory_fails_loudly_naming_the_option(tmp_path):
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--pyargs",
            "hostkit.audit",
            "--connection=ansible",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "--ansible-inventory" in proc.stderr and "--hostkit-inventory" in proc.stderr
