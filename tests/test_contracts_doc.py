"""docs/CONTRACTS.md's tables against geokernel.contracts: every defining-code entry names a real definition, and
every public name of the contract package is in a table (read from the sources: nothing is imported)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "CONTRACTS.md"
PACKAGE = ROOT / "geokernel" / "contracts"
#: Modules another change adds to the package; rows naming them are checked once they exist.
_ENTRY = re.compile(r"`([a-z_][\w.]*):([A-Za-z_][\w.]*)`")


def table_rows(text: str) -> list[dict[str, str]]:
    """Every row of every Markdown table whose header has a "Defining code" column, as ``{header: cell}``."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if header is None:
            header = cells
        elif not set("".join(cells)) <= set("-: "):
            rows.append(dict(zip(header, cells, strict=True)))
    return [r for r in rows if "Defining code" in r]


def entries(rows: list[dict[str, str]]) -> list[tuple[str, str]]:
    """The ``(module, name)`` of every ``module:Name`` in the rows' defining code."""
    return [(m.group(1), m.group(2)) for r in rows for m in _ENTRY.finditer(r["Defining code"])]


def module_path(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


@cache
def definitions(path: Path) -> dict[str, set[str]]:
    """Top-level names a module defines (classes, functions, assignments), each with its class body's names."""
    out: dict[str, set[str]] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
            out[node.name] |= {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets
                               if isinstance(t, ast.Name)}
            out[node.name] |= {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)
                               and isinstance(n.target, ast.Name)}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out[node.name] = set()
        elif isinstance(node, ast.Assign):
            out.update({t.id: set() for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = set()
    return out


def resolves(module: str, name: str) -> bool:
    path = module_path(module)
    if path is None:
        return False
    top, _, member = name.partition(".")
    found = definitions(path)
    return top in found and (not member or member in found[top])


ROWS = table_rows(DOC.read_text())
ENTRIES = entries(ROWS)


def test_the_doc_has_the_tables() -> None:
    # GIVEN docs/CONTRACTS.md WHEN its tables are parsed THEN each row names writers, readers and defining code
    assert len(ROWS) > 40 and all({"Contract", "Writer(s)", "Reader(s)"} <= set(r) for r in ROWS)
    assert all(_ENTRY.search(r["Defining code"]) for r in ROWS), [r["Contract"] for r in ROWS
                                                                 if not _ENTRY.search(r["Defining code"])]


@pytest.mark.parametrize(("module", "name"), sorted(set(ENTRIES)), ids=lambda v: str(v))
def test_every_defining_code_entry_names_a_real_definition(module: str, name: str) -> None:
    assert resolves(module, name), f"docs/CONTRACTS.md names {module}:{name}, which {module} does not define"


def test_every_public_name_of_the_contract_package_is_in_a_table() -> None:
    # GIVEN every public top-level name the contract modules define WHEN looked up in the tables THEN each is there
    documented = set(ENTRIES)
    missing = []
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "__init__.py":
            continue
        module = f"geokernel.contracts.{path.stem}"
        missing += [f"{module}:{n}" for n in definitions(path) if not n.startswith("_") and (module, n) not in documented]
    assert missing == [], "public names of geokernel/contracts/ missing from docs/CONTRACTS.md's tables"


def test_the_parser_reads_a_row_and_resolves_a_member() -> None:
    # GIVEN a small table WHEN parsed THEN its one row and entry come back, and a class member resolves
    text = "| Contract | Writer(s) | Reader(s) | Defining code |\n| --- | --- | --- | --- |\n| a | b | c | `m.n:X.y` |\n"
    assert entries(table_rows(text)) == [("m.n", "X.y")]
    assert resolves("geokernel.contracts.spec_pointer", "ActivePointer.version_of")
    assert not resolves("geokernel.contracts.spec_pointer", "ActivePointer.nothing")
