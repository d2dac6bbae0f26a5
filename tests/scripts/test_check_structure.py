"""scripts/check_structure.py: the gate's structure check finds what it claims to find."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_structure.py"


@pytest.fixture(scope="module")
def structure() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_structure", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_structure"] = module
    spec.loader.exec_module(module)
    return module


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_cycle_held_by_a_type_checking_import_is_found(structure: ModuleType, tmp_path: Path) -> None:
    # GIVEN a imports b at run time and b imports a only under TYPE_CHECKING
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import X\n",
        "pkg/c.py": "from . import a\n",
    })
    # WHEN the structure is checked
    _, breaches = structure.check(tmp_path, ("pkg",), {})
    # THEN the cycle is reported once, and c (which only imports a) is not in it
    assert [str(b) for b in breaches] == ["pkg.a <-> pkg.b: import cycle"]


def test_an_upward_import_between_layers_is_found(structure: ModuleType, tmp_path: Path) -> None:
    # GIVEN layers geo (bottom) and spec, and a geo module importing spec
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/geo/__init__.py": "",
        "pkg/geo/tiles.py": "from ..spec.model import Spec\n",
        "pkg/spec/__init__.py": "",
        "pkg/spec/model.py": "from pkg.geo import tiles\n",
        "pkg/cli.py": "from pkg.spec import model\n",
    })
    # WHEN checked with the layer order
    _, breaches = structure.check(tmp_path, ("pkg",), {"pkg": ("geo", "spec")})
    # THEN the upward arrow is named (and the cycle it makes); the top-level cli importing down is fine
    assert "pkg.geo.tiles: imports pkg.spec.model, a layer above it" in [str(b) for b in breaches]
    assert not any(str(b).startswith("pkg.cli") for b in breaches)


def test_long_modules_and_functions_are_found(structure: ModuleType, tmp_path: Path) -> None:
    # GIVEN a 61-line function in a 402-line module
    body = "def long():\n" + "    x = 1\n" * 60 + "\n" * 341
    write(tmp_path, {"pkg/__init__.py": "", "pkg/big.py": body})
    # WHEN checked
    checked, breaches = structure.check(tmp_path, ("pkg",), {})
    # THEN both are named with their sizes
    assert checked == 2
    assert [str(b) for b in breaches] == [
        "pkg/big.py: 402 lines (at most 400)",
        "pkg/big.py:1: long() is 61 lines (at most 60)",
    ]


def test_parts_importing_each_other_in_a_circle_are_found_without_a_module_cycle(
    structure: ModuleType, tmp_path: Path
) -> None:
    # GIVEN config imports faults.names, faults.arm imports env, env imports config: no two modules form a cycle
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/config.py": "from pkg.faults.names import X\n",
        "pkg/env.py": "from pkg import config\n",
        "pkg/faults/__init__.py": "",
        "pkg/faults/names.py": "X = 1\n",
        "pkg/faults/arm.py": "from pkg import env\n",
    })
    # WHEN checked
    _, breaches = structure.check(tmp_path, ("pkg",), {})
    # THEN the circle between pkg's parts is named: no bottom-up order of them exists
    assert [str(b) for b in breaches] == [
        "pkg.config <-> pkg.env <-> pkg.faults: parts of pkg import each other in a circle "
        "(no bottom-up order of them exists)"
    ]


def test_a_package_importing_one_it_may_not_depend_on_is_found(structure: ModuleType, tmp_path: Path) -> None:
    # GIVEN a pure library importing the app that uses it
    write(tmp_path, {
        "lib/__init__.py": "", "lib/geo.py": "import app.run\n", "lib/tiles.py": "",
        "app/__init__.py": "", "app/run.py": "from lib import tiles\n",
    })
    # WHEN checked with lib at the bottom
    _, breaches = structure.check(tmp_path, ("lib", "app"), {}, {"lib": (), "app": ("lib",)})
    # THEN the downward arrow is fine and the upward one is named
    assert "lib.geo: imports app.run: package 'lib' may import only []" in [str(b) for b in breaches]
    assert not any(str(b).startswith("app.run") for b in breaches)


def test_sibling_layers_must_not_import_each_other(structure: ModuleType, tmp_path: Path) -> None:
    # GIVEN a runtime layer below two independent function packages, one importing the other
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/runtime/__init__.py": "", "pkg/runtime/aws.py": "",
        "pkg/router/__init__.py": "", "pkg/router/handler.py": "from pkg.runtime import aws\n",
        "pkg/deploy/__init__.py": "", "pkg/deploy/handler.py": "from pkg.router import handler\n",
    })
    # WHEN checked with ("runtime", ("router", "deploy"))
    _, breaches = structure.check(tmp_path, ("pkg",), {"pkg": ("runtime", ("router", "deploy"))})
    # THEN only the sibling arrow is named
    assert [str(b) for b in breaches] == [
        "pkg.deploy.handler: imports pkg.router.handler, a sibling layer it must not depend on"
    ]


def test_size_only_folders_are_held_to_the_module_size_but_not_the_function_size(
    structure: ModuleType, tmp_path: Path
) -> None:
    # GIVEN a runtime package and, under tests/, a 401-line file holding a 61-line function (and a cache file)
    body = "def long():\n" + "    x = 1\n" * 60 + "\n" * 340
    write(tmp_path, {"pkg/__init__.py": "", "tests/test_big.py": body, "tests/__pycache__/old.py": body})
    # WHEN checked with tests/ as a size-only folder
    checked, breaches = structure.check(tmp_path, ("pkg",), {}, size_only=("tests",))
    # THEN only its size is named; the function length and the cache are not checked, nor counted as modules
    assert checked == 1
    assert [str(b) for b in breaches] == ["tests/test_big.py: 401 lines (at most 400)"]


@pytest.mark.parametrize("name", ["common", "spec", "build", "tests"])
def test_a_runtime_folder_with_a_vague_name_is_named(structure: ModuleType, tmp_path: Path, name: str) -> None:
    # GIVEN a runtime package with a folder named {name} beside a well-named one
    write(tmp_path, {"pkg/__init__.py": "", f"pkg/{name}/__init__.py": "", f"pkg/{name}/aws.py": "",
                     "pkg/stores/__init__.py": "", "pkg/stores/s3.py": ""})
    # WHEN checked
    _, breaches = structure.check(tmp_path, ("pkg",), {}, {"pkg": ()})
    # THEN the vague folder alone is named, once
    assert [str(b) for b in breaches] == [f"pkg/{name}: a runtime folder named {name!r} (one of "
                                          "['build', 'common', 'spec', 'test', 'tests']): name it for what it holds"]
