"""infra.assets: entry points are checked, the Spark zip is deterministic, the layer needs the wheel cache."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from infra import assets


@pytest.mark.parametrize(
    "entry",
    [assets.PARTITIONER_HANDLER, assets.ROUTER_HANDLER, assets.DEPLOYER_HANDLER, assets.HOOKS_HANDLER,
     assets.TEARDOWN_HANDLER, assets.EMR_ENTRY, assets.GLUE_ENTRY, assets.WORKER_DOCKERFILE, assets.WORKER_HEALTHCHECK],
)  # fmt: skip
def test_every_wired_entry_point_exists(entry: assets.EntryPoint) -> None:
    # GIVEN an entry point the stack wires WHEN required THEN it exists (and defines its handler)
    assert assets.require(entry) is entry


def test_missing_entry_point_fails_with_its_path() -> None:
    # GIVEN an entry point that does not exist WHEN required THEN the error names it
    with pytest.raises(assets.AssetError, match=r"'lambdas/nope\.py' does not exist"):
        assets.require(assets.EntryPoint("lambdas/nope.py", "handler"))


def test_entry_point_without_its_function_fails() -> None:
    # GIVEN a real module that has no such function WHEN required THEN the error names the function
    with pytest.raises(assets.AssetError, match=r"defines no 'no_such_handler'"):
        assets.require(assets.EntryPoint("lambdas/router/handler.py", "no_such_handler"))


def test_spark_zip_is_deterministic_and_holds_both_packages(tmp_path: Path) -> None:
    # GIVEN two bundlings into different dirs
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    bundler = assets.SparkZipBundling()
    # WHEN both run
    assert bundler.try_bundle(str(first)) and bundler.try_bundle(str(second))
    a, b = (d / assets.SparkZipBundling.ZIP_NAME for d in (first, second))
    # THEN the archives are byte-identical and hold the importable packages (no tests or caches)
    assert a.read_bytes() == b.read_bytes()
    names = zipfile.ZipFile(a).namelist()
    assert "geokernel/__init__.py" in names and "glue_jobs/emr_entry.py" in names
    assert not [n for n in names if n.startswith("partitioner/")]  # the Spark job ships the kernel, not the library
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_lambda_code_bundle_copies_handlers_and_library(tmp_path: Path) -> None:
    # GIVEN the package-copy bundler WHEN run THEN every import root is in the asset dir
    assert assets.PackageCopyBundling(assets.PARTITIONER_HANDLER.packages).try_bundle(str(tmp_path))
    assert (tmp_path / "lambdas" / "router" / "handler.py").is_file()
    assert (tmp_path / "partitioner" / "__init__.py").is_file()
    assert (tmp_path / "geokernel" / "contracts" / "env.py").is_file()


def test_only_the_partitioner_function_ships_the_library() -> None:
    # GIVEN every Lambda entry point WHEN their packages are read THEN only the partitioner's names the library
    entries = (assets.PARTITIONER_HANDLER, assets.ROUTER_HANDLER, assets.DEPLOYER_HANDLER, assets.HOOKS_HANDLER,
               assets.TEARDOWN_HANDLER)
    assert [e.path for e in entries if "partitioner" in e.packages] == ["lambdas/partitioner/handler.py"]
    assert all("geokernel" in e.packages for e in entries)


def test_layer_without_wheel_cache_says_which_setup_step_to_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # GIVEN no wheel cache WHEN the layer is bundled THEN the error names the bootstrap target
    monkeypatch.setattr(assets, "WHEEL_CACHE", tmp_path / "missing")
    with pytest.raises(assets.AssetError, match=r"bootstrap\.sh lambda-wheels"):
        assets.WheelLayerBundling().try_bundle(str(tmp_path / "out"))


def test_a_cache_downloaded_for_another_lock_says_which_setup_step_to_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN a wheel cache whose stamp is of an older requirements-lambda.txt
    cache = tmp_path / "lambda-wheels"
    cache.mkdir()
    (cache / ".stamp").write_text("0123456789abcdef\n")
    monkeypatch.setattr(assets, "WHEEL_CACHE", cache)
    # WHEN the layer is bundled THEN the error names the lock and the bootstrap target, before pip fails on a hash
    with pytest.raises(assets.AssetError, match=r"another requirements-lambda\.txt: run 'bash scripts/bootstrap\.sh lambda-wheels'"):
        assets.WheelLayerBundling().try_bundle(str(tmp_path / "out"))


def test_the_cache_stamp_is_the_one_bootstrap_writes(tmp_path: Path) -> None:
    # GIVEN bootstrap.sh's stamp function (sha256sum of the lock, 16 hex digits) and a lock file
    bootstrap = (Path(__file__).resolve().parents[2] / "scripts" / "bootstrap.sh").read_text()
    (stamp_of,) = [line for line in bootstrap.splitlines() if line.startswith("stamp_of()")]
    lock = tmp_path / "requirements-lambda.txt"
    lock.write_text("numpy==2.4.6 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    # WHEN both stamp it
    shell = subprocess.run(["bash", "-c", f'{stamp_of}\nstamp_of "$1"', "_", str(lock)],
                           capture_output=True, text=True, check=True).stdout.strip()
    # THEN they agree (a fresh cache is taken as the lock's)
    assert assets.wheel_cache_stamp(lock) == shell
