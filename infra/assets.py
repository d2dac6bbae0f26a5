"""Code assets, built by LOCAL bundling only (no Docker engine is needed or used at synth).

* Lambda code: ``lambdas/`` and the kernel ``geokernel/`` copied into an asset dir shared by the router and deploy
  functions; the partitioner function's asset adds the ``partitioner/`` library (each function ships what it imports).
* Lambda layer: numpy, scipy and powertools installed with ``pip --no-index`` from the wheel cache that
  ``scripts/bootstrap.sh lambda-wheels`` downloads at setup time (``requirements-lambda.txt``), so synth is offline.
* Spark code: ``geokernel/`` + ``glue_jobs/`` zipped for ``--py-files`` / ``--extra-py-files``; the entry
  scripts are single-file assets.

Every entry point is checked at synth: a stack never points at code that does not exist.
"""

from __future__ import annotations

import ast
import hashlib
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from infra.errors import InfraError

REPO_ROOT = Path(__file__).resolve().parent.parent
WHEEL_CACHE = REPO_ROOT / ".cache" / "lambda-wheels"
LAMBDA_REQUIREMENTS = REPO_ROOT / "requirements-lambda.txt"
LAMBDA_PYTHON = "3.14"
LAMBDA_PLATFORMS = ("manylinux_2_28_aarch64", "manylinux2014_aarch64")
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "tests", ".pytest_cache", ".mypy_cache")
# Local bundling never falls back to Docker: this image name is required by the API and never pulled.
_NO_DOCKER = DockerImage.from_registry("geo-rebalancer/local-bundling-only")


class AssetError(InfraError, RuntimeError):
    """An asset's source is missing; the message says what to create or which setup step to run."""


@dataclass(frozen=True)
class EntryPoint:
    """``path`` (relative to the repo root), for Python handlers the function it must define, and the packages of
    this repo its code imports (what its asset ships)."""

    path: str
    function: str | None = None
    packages: tuple[str, ...] = ("lambdas", "geokernel")

    @property
    def file(self) -> Path:
        return REPO_ROOT / self.path

    @property
    def module(self) -> str:
        return self.path.removesuffix(".py").replace("/", ".")

    @property
    def handler(self) -> str:
        return f"{self.module}.{self.function}"


#: Only the partitioner function imports the library (scripts/check_structure.py, PACKAGE_PART_DEPENDS).
PARTITIONER_HANDLER = EntryPoint("lambdas/partitioner/handler.py", "handler", ("lambdas", "geokernel", "partitioner"))
ROUTER_HANDLER = EntryPoint("lambdas/router/handler.py", "handler")
DEPLOYER_HANDLER = EntryPoint("lambdas/deploy/deployer.py", "handler")
HOOKS_HANDLER = EntryPoint("lambdas/deploy/hooks.py", "handler")
TEARDOWN_HANDLER = EntryPoint("lambdas/teardown/handler.py", "handler")
EMR_ENTRY = EntryPoint("glue_jobs/emr_entry.py")
GLUE_ENTRY = EntryPoint("glue_jobs/glue_entry.py")
WORKER_DOCKERFILE = EntryPoint("geo_service/Dockerfile")
WORKER_HEALTHCHECK = EntryPoint("geo_service/healthcheck.py")


def require(entry: EntryPoint) -> EntryPoint:
    """Fail synth unless the entry point's file exists (and defines its function at module level)."""
    if not entry.file.is_file():
        raise AssetError(f"entry point {entry.path!r} does not exist: the stack will not point at missing code")
    if entry.function is not None:
        tree = ast.parse(entry.file.read_text(encoding="utf-8"), filename=entry.path)
        names = {
            node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        } | {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
        if entry.function not in names:
            raise AssetError(f"entry point {entry.path!r} defines no {entry.function!r} at module level")
    return entry


def _copy_packages(output_dir: str, packages: tuple[str, ...]) -> None:
    for package in packages:
        source = REPO_ROOT / package
        if not (source / "__init__.py").is_file():
            raise AssetError(f"package {package!r} is missing its __init__.py under {REPO_ROOT}")
        shutil.copytree(source, Path(output_dir) / package, ignore=_IGNORE, dirs_exist_ok=True)


@jsii.implements(ILocalBundling)
class PackageCopyBundling:
    """Copies Python packages of this repo into the asset dir (import roots as in the repo)."""

    def __init__(self, packages: tuple[str, ...]) -> None:
        self._packages = packages

    def try_bundle(self, output_dir: str, *_args: Any, **_kwargs: Any) -> bool:
        _copy_packages(output_dir, self._packages)
        return True


@jsii.implements(ILocalBundling)
class WheelLayerBundling:
    """Installs requirements-lambda.txt into ``python/`` from the offline wheel cache, for Lambda's arm64 runtime."""

    def try_bundle(self, output_dir: str, *_args: Any, **_kwargs: Any) -> bool:
        if not (WHEEL_CACHE / ".stamp").is_file():
            raise AssetError(
                f"the Lambda layer wheel cache {str(WHEEL_CACHE)!r} is missing: run 'bash scripts/bootstrap.sh lambda-wheels'"
            )
        target = Path(output_dir) / "python"
        platforms = [arg for platform in LAMBDA_PLATFORMS for arg in ("--platform", platform)]
        command = [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
            "--find-links", str(WHEEL_CACHE), "--only-binary=:all:", *platforms, "--implementation", "cp",
            "--python-version", LAMBDA_PYTHON, "--no-compile", "--target", str(target), "-r", str(LAMBDA_REQUIREMENTS),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise AssetError(f"installing the Lambda layer from {str(WHEEL_CACHE)!r} failed:\n{done.stderr}")
        for tests in [p for p in target.rglob("tests") if p.is_dir()]:
            shutil.rmtree(tests, ignore_errors=True)
        return True


#: The packages the Spark job imports: the kernel and the job (scripts/check_structure.py, PACKAGE_DEPENDS).
SPARK_PACKAGES = ("geokernel", "glue_jobs")


@jsii.implements(ILocalBundling)
class SparkZipBundling:
    """Zips ``geokernel/`` and ``glue_jobs/`` (all files but tests/caches; deterministic: sorted, fixed timestamps) for Spark's py-files."""

    ZIP_NAME = "geo_rebalancer_spark.zip"

    def try_bundle(self, output_dir: str, *_args: Any, **_kwargs: Any) -> bool:
        with zipfile.ZipFile(Path(output_dir) / self.ZIP_NAME, "w", zipfile.ZIP_DEFLATED) as archive:
            for package in SPARK_PACKAGES:
                root = REPO_ROOT / package
                if not (root / "__init__.py").is_file():
                    raise AssetError(f"package {package!r} is missing its __init__.py under {REPO_ROOT}")
                for path in sorted(p for p in root.rglob("*") if p.is_file()):
                    rel = path.relative_to(REPO_ROOT)
                    if "__pycache__" in rel.parts or "tests" in rel.parts or path.suffix == ".pyc":
                        continue
                    info = zipfile.ZipInfo(rel.as_posix(), date_time=(2020, 1, 1, 0, 0, 0))
                    info.external_attr = 0o644 << 16
                    archive.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
        return True


def _tree_hash(*roots: Path, pattern: str = "*") -> str:
    digest = hashlib.sha256()
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob(pattern) if p.is_file())
        for path in files:
            rel = path.relative_to(REPO_ROOT).as_posix()
            if "__pycache__" in rel or path.suffix == ".pyc":
                continue
            digest.update(rel.encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def lambda_code(packages: tuple[str, ...]) -> lambda_.Code:
    """One code asset of ``packages`` (each copied at its import root; handlers ``lambdas.<fn>...``)."""
    for entry in (PARTITIONER_HANDLER, ROUTER_HANDLER, DEPLOYER_HANDLER, HOOKS_HANDLER, TEARDOWN_HANDLER):
        require(entry)
    return lambda_.Code.from_asset(
        str(REPO_ROOT / "lambdas"),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=_tree_hash(*(REPO_ROOT / p for p in packages), pattern="*"),
        bundling=BundlingOptions(image=_NO_DOCKER, local=PackageCopyBundling(packages)),
    )


def layer_code() -> lambda_.Code:
    """numpy + scipy + powertools for the arm64 Python 3.14 runtime, installed offline from the wheel cache."""
    if not WHEEL_CACHE.is_dir():
        raise AssetError(
            f"the Lambda layer wheel cache {str(WHEEL_CACHE)!r} is missing: run 'bash scripts/bootstrap.sh lambda-wheels'"
        )
    return lambda_.Code.from_asset(
        str(WHEEL_CACHE),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=_tree_hash(LAMBDA_REQUIREMENTS, WHEEL_CACHE, pattern="*.whl"),
        bundling=BundlingOptions(image=_NO_DOCKER, local=WheelLayerBundling()),
    )


def spark_code_asset(scope: Construct, construct_id: str) -> s3_assets.Asset:
    """The zip of ``geokernel/`` + ``glue_jobs/`` (a single .zip file asset, uploaded as-is)."""
    return s3_assets.Asset(
        scope,
        construct_id,
        path=str(REPO_ROOT / "glue_jobs"),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=_tree_hash(*(REPO_ROOT / p for p in SPARK_PACKAGES), pattern="*"),
        bundling=BundlingOptions(image=_NO_DOCKER, local=SparkZipBundling()),
    )


def script_asset(scope: Construct, construct_id: str, entry: EntryPoint) -> s3_assets.Asset:
    """A single entry script (``.py``), uploaded as-is."""
    return s3_assets.Asset(scope, construct_id, path=str(require(entry).file))
