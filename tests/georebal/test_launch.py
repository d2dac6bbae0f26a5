"""georebal.launch: the installed command finds the checkout beside its package, or names what it lacks in one line.

The wheel installed outside a checkout (no infra/, no boto3) is tested in tests/scripts/test_packaging.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from georebal.launch import checkout_root

ROOT = Path(__file__).resolve().parents[2]


def test_the_checkout_is_the_folder_above_the_package_when_it_holds_the_cdk_apps_settings(tmp_path: Path) -> None:
    # GIVEN this checkout's package, and a copy of the package in a folder without infra/ (as in site-packages)
    shutil.copytree(ROOT / "georebal", tmp_path / "georebal", ignore=shutil.ignore_patterns("__pycache__"))
    # WHEN the checkout each sits in is looked for THEN only the first has one
    assert checkout_root() == ROOT
    assert checkout_root(tmp_path / "georebal") is None


def test_an_editable_install_runs_the_cli_from_any_directory(tmp_path: Path) -> None:
    # GIVEN the packages reachable as an editable install exposes them (the three distributed packages, not infra/)
    # and a working directory outside the checkout
    site = tmp_path / "site"
    site.mkdir()
    for name in ("georebal", "geokernel", "partitioner"):
        (site / name).symlink_to(ROOT / name)
    code = (f"import sys; sys.path.insert(0, {str(site)!r}); from georebal.launch import run; "
            "run(['preflight', '--workers', '2', '--cdk-json', 'missing.json'])")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # WHEN preflight runs there
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    # THEN the CLI ran, the CDK app's settings imported from the checkout: it refuses the missing cdk.json, one line
    assert done.returncode == 2 and done.stderr.startswith("error: --cdk-json 'missing.json': cannot read it"), done.stderr
    assert len(done.stderr.splitlines()) == 1
