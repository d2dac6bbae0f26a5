"""The installable distribution (pyproject.toml): the wheel ``pip wheel .`` builds holds the kernel, the partitioner
library and command, and georebal, with their data files; it declares every third-party package they import (and no
other); it ships no test or bench file; its commands run outside the checkout; and the venv has the checkout
installed, as scripts/bootstrap.sh leaves it.

Offline and a few seconds: the wheel is built by the venv's setuptools (the dev lock pins the build backend) with
``--no-build-isolation --no-index`` from a copy of the packages (nothing is written into the checkout), and installed
with ``--no-deps`` into a folder (``--target``) that the venv's interpreter puts first on its path.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from importlib.metadata import packages_distributions, requires, version
from pathlib import Path

import pytest

import georebal
import partitioner
from georebal.launch import NO_BOTO3, NO_CHECKOUT

ROOT = Path(__file__).resolve().parents[2]
#: The packages the distribution ships.
SHIPPED = ("geokernel", "partitioner", "georebal", "infra")
#: The library (no extra needed): the kernel and the partitioner with its command.
LIBRARY = ("geokernel", "partitioner")
#: What georebal imports from the checkout, not from the distribution or an index (georebal.launch names it).
CHECKOUT_ONLY = {"lambdas"}  # locate, replay and redrive reuse the router's code there
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
EVENTS = "lat,lon,ts,entity_id\n" + "".join(f"51.50{i % 7},-0.12{i % 5},{1_700_000_000 + 10 * i},car{i % 3}\n"
                                            for i in range(120))


def source_files() -> set[str]:
    """Every file of the shipped packages in the checkout (``__pycache__`` aside), as paths in a wheel."""
    return {p.relative_to(ROOT).as_posix() for pkg in SHIPPED for p in (ROOT / pkg).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    have = version("setuptools")
    assert int(have.split(".")[0]) >= 77, (f"setuptools {have} in this venv: the dev lock pins the project's build "
                                           "backend (requirements-dev.txt): run scripts/bootstrap.sh python")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    for pkg in SHIPPED:
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
                            "--no-build-isolation", "--no-index", "-w", str(tmp / "dist"), str(src)],
                           capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    (path,) = (tmp / "dist").glob("*.whl")
    return path


def dist_info(whl: zipfile.ZipFile, name: str) -> str:
    """The text of ``<dist-info>/<name>`` in the wheel."""
    (path,) = [n for n in whl.namelist() if re.fullmatch(rf"[^/]+\.dist-info/{re.escape(name)}", n)]
    return whl.read(path).decode()


def imports(whl: zipfile.ZipFile, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Top-level names the modules of ``packages`` in the wheel import (every ``import``, also inside functions),
    but the standard library's and the shipped packages': ``{name: modules importing it}``."""
    found: dict[str, set[str]] = {}
    for path in whl.namelist():
        if path.split("/")[0] not in packages or not path.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(whl.read(path), path)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {n.split(".")[0] for n in names} - set(sys.stdlib_module_names) - set(SHIPPED):
                found.setdefault(top, set()).add(path)
    return found


def requires_dist(whl: zipfile.ZipFile) -> dict[str | None, set[str]]:
    """The wheel's declared dependencies by extra (None: always), as normalised distribution names."""
    out: dict[str | None, set[str]] = {}
    for line in dist_info(whl, "METADATA").splitlines():
        if line.startswith("Requires-Dist: "):
            req = line.removeprefix("Requires-Dist: ")
            extra = re.search(r"""extra\s*==\s*["']([\w-]+)["']""", req)
            out.setdefault(extra.group(1) if extra else None, set()).add(normalize(req))
    return out


def normalize(requirement: str) -> str:
    """``Foo_Bar>=1; extra == "x"`` -> ``foo-bar`` (PEP 503)."""
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert name is not None, requirement
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def brought_by(declared: set[str]) -> set[str]:
    """The distributions installing ``declared`` brings: each, and each one's own unconditional requirements."""
    out = set(declared)
    for dist in declared:
        out |= {normalize(r) for r in requires(dist) or () if "extra ==" not in r}
    return out


@functools.cache
def installed_providers() -> dict[str, list[str]]:
    return packages_distributions()  # a scan of every installed distribution: seconds in the dev venv


def providers(name: str) -> set[str]:
    """The installed distributions that provide the top-level import ``name`` (empty: none does)."""
    return {normalize(d) for d in installed_providers().get(name, ())}


def test_the_wheel_holds_the_packages_their_data_and_nothing_else(wheel: Path) -> None:
    # GIVEN the wheel built from the checkout WHEN its files are listed
    names = set(zipfile.ZipFile(wheel).namelist())
    meta = {n for n in names if n.split("/")[0].endswith(".dist-info")}
    # THEN it holds exactly the shipped packages' files, their data among them, and the license
    assert names - meta == source_files()
    assert {"geokernel/partition_spec/spec.schema.json", "partitioner/data/sample_counts.csv",
            "partitioner/data/places.csv.gz", "partitioner/data/basemap_50m.npz", "georebal/launch.py"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in meta)
    # AND no test, bench or conftest file, nor any other top-level folder of the checkout
    assert [n for n in names if re.search(r"(^|/)(tests?|bench)/|(^|/)(test_[^/]*|conftest)\.py$", n)] == []
    assert {n.split("/")[0] for n in names - meta} == set(SHIPPED)


def test_the_metadata_names_the_version_license_python_and_commands(wheel: Path) -> None:
    # GIVEN the wheel WHEN its metadata and entry points are read
    with zipfile.ZipFile(wheel) as whl:
        meta, entry_points = dist_info(whl, "METADATA"), dist_info(whl, "entry_points.txt")
    # THEN the version is pyproject's (and the packages'), the license Apache-2.0, Python 3.11 or newer
    assert f"\nVersion: {PROJECT['version']}\n" in meta and partitioner.__version__ == georebal.__version__ == PROJECT["version"]
    assert "\nLicense-Expression: Apache-2.0\n" in meta and "\nRequires-Python: >=3.11\n" in meta
    # AND both commands are installed, georebal through its launcher
    assert "partitioner = partitioner.cli:run" in entry_points and "georebal = georebal.launch:run" in entry_points


def test_the_changelog_names_the_version_and_the_license_is_apache_2() -> None:
    # GIVEN CHANGELOG.md and LICENSE WHEN read
    changelog, license_text = (ROOT / "CHANGELOG.md").read_text(), (ROOT / "LICENSE").read_text()
    version = PROJECT["version"]
    # THEN the changelog has a section for pyproject's version, released or to be (Unreleased)
    assert f"\n## [{version}] - " in changelog or f"To be released as **{version}**" in changelog
    # AND LICENSE is the Apache License 2.0's text as apache.org publishes it, which pyproject names
    assert hashlib.sha256(license_text.encode()).hexdigest() == APACHE_2_SHA256 and PROJECT["license"] == "Apache-2.0"


def test_the_declared_dependencies_cover_every_third_party_import(wheel: Path) -> None:
    # GIVEN every import of the wheel's modules and the dependencies its metadata declares
    with zipfile.ZipFile(wheel) as whl:
        library, ops, declared = imports(whl, LIBRARY), imports(whl, ("georebal",)), requires_dist(whl)
        cdk = imports(whl, ("infra",))
    core, with_ops = declared.get(None, set()), declared.get(None, set()) | declared.get("ops", set())
    with_cdk = core | declared.get("cdk", set())
    # WHEN each imported name is traced to the distribution installing it
    # THEN the library's come from the core dependencies (or what they bring), georebal's with the extra [ops]
    unknown = {n: sorted(m) for n, m in library.items() if not providers(n)}
    assert unknown == {}, f"imports no installed distribution provides: {unknown}"
    assert {n: sorted(m) for n, m in library.items() if not providers(n) & brought_by(core)} == {}
    assert {n: sorted(m) for n, m in ops.items() if n not in CHECKOUT_ONLY and not providers(n) & brought_by(with_ops)} == {}
    # AND the constructs' (infra, the package a user embeds) with the extra [cdk]
    assert {n: sorted(m) for n, m in cdk.items() if not providers(n) & brought_by(with_cdk)} == {}
    # AND georebal takes from the checkout only the CDK app's settings (georebal.launch names them when absent)
    assert {n for n in ops if not providers(n)} == CHECKOUT_ONLY
    # AND nothing is declared that no module imports (scipy was, and none of them imports it)
    assert core <= {d for n in library for d in providers(n)}
    assert declared.get("ops", set()) <= {d for n in ops for d in providers(n)}
    assert declared.get("cdk", set()) <= {d for n in cdk for d in providers(n)} and set(declared) == {None, "ops", "cdk"}


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed into a folder (no dependencies: the venv's serve)."""
    site = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                           "--no-index", "--target", str(site), str(wheel)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def command(site: Path, cwd: Path, entry: str, *args: str, block: str = "") -> subprocess.CompletedProcess[str]:
    """Run the console script ``entry`` (``module:func``) as the installed wrapper would, the wheel's folder first on
    the path, from ``cwd``; ``block`` names a module to make unimportable."""
    module, _, func = entry.partition(":")
    code = (f"import sys; sys.path.insert(0, {str(site)!r}); "
            + (f"sys.modules[{block!r}] = None; " if block else "")
            + f"sys.argv = ['x', *{list(args)!r}]; from {module} import {func}; {func}()")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def test_the_installed_partitioner_runs_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    # GIVEN the installed wheel and a small event log in a directory outside the checkout
    (tmp_path / "events.csv").write_text(EVENTS)
    entry = PROJECT["scripts"]["partitioner"]
    # WHEN its command is asked for its version, and counts the log there
    asked = command(installed, tmp_path, entry, "--version")
    counted = command(installed, tmp_path, entry, "counts", "events.csv", "--window-s", "300", "--zoom", "12",
                      "-o", "windows", "--keep-partial", "-q")
    # THEN it answers from the wheel's files and writes the windows' counts
    assert asked.returncode == 0 and asked.stdout.strip() == f"partitioner {PROJECT['version']}", asked.stderr
    assert counted.returncode == 0, counted.stderr
    windows = sorted((tmp_path / "windows").glob("*.csv"))
    assert windows and sum(len(w.read_text().splitlines()) - 1 for w in windows) > 0
    # AND its packages are the wheel's, not the checkout's
    located = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(installed)!r}); "
                              "import partitioner, geokernel; print(partitioner.__file__); print(geokernel.__file__)"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert all(line.startswith(str(installed)) for line in located.stdout.split()), located.stdout


@pytest.mark.parametrize(("block", "line"), [("", NO_CHECKOUT), ("boto3", NO_BOTO3)], ids=["no-checkout", "no-boto3"])
def test_the_installed_georebal_names_what_it_lacks_in_one_line(installed: Path, tmp_path: Path, block: str,
                                                               line: str) -> None:
    # GIVEN the installed wheel outside a checkout (no infra/), with or without boto3
    entry = PROJECT["scripts"]["georebal"]
    # WHEN its command is asked for its version, then to run preflight
    asked = command(installed, tmp_path, entry, "--version", block=block)
    ran = command(installed, tmp_path, entry, "preflight", "--workers", "2", block=block)
    # THEN the version answers; the command exits 2 with one line naming what is missing, no traceback
    assert asked.returncode == 0 and asked.stdout.strip() == f"georebal {PROJECT['version']}", asked.stderr
    assert ran.returncode == 2 and ran.stderr == f"error: {line}\n" and ran.stdout == ""


def venv_commands() -> Iterator[Path]:
    yield from (Path(sys.executable).parent / name for name in PROJECT["scripts"])


def test_the_venv_has_the_checkout_installed_as_the_bootstrap_leaves_it(tmp_path: Path) -> None:
    # GIVEN the venv running the tests (scripts/bootstrap.sh installs the checkout into it, editable)
    # WHEN each command beside its interpreter is asked for its version from a directory outside the checkout
    for path in venv_commands():
        assert path.is_file(), f"{path} does not exist: run scripts/bootstrap.sh python"
        done = subprocess.run([str(path), "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              check=False)
        # THEN it answers (from the checkout that bootstrapped the venv last: a venv shared between checkouts runs
        # one of them)
        assert done.returncode == 0 and done.stdout.startswith(f"{path.name} "), done.stderr
