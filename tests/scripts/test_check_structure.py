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
