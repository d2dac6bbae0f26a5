"""The worker writes no file, so its container runs with a read-only root filesystem and no volume
(infra/workers.py): a scan of the code the image runs for file-writing calls."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: What the worker process runs: geo_service/ (not the build scripts under geo_service/data/) and the transforms.
RUNTIME = sorted([*ROOT.glob("geo_service/*.py"), *ROOT.glob("transforms/*.py")])
WRITING_CALLS = {"write_text", "write_bytes", "mkdir", "makedirs", "mkdtemp", "mkstemp", "NamedTemporaryFile",
                 "TemporaryDirectory", "TemporaryFile", "SpooledTemporaryFile", "savez", "tofile"}  # json.dump needs open(w)
WRITING_MODULES = {"tempfile", "shutil"}


def _mode(call: ast.Call, position: int) -> str:
    """The constant mode argument of an ``open`` call (``"r"`` when absent or not a constant)."""
    node = next((k.value for k in call.keywords if k.arg == "mode"), None)
    if node is None and len(call.args) > position:
        node = call.args[position]
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else "r"


def file_writes(path: Path) -> list[str]:
    """Every file-writing call or module import in ``path``, as ``"<line>: <what>"``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{node.lineno}: import {m}" for m in modules if m.split(".")[0] in WRITING_MODULES]
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in WRITING_CALLS:
            found.append(f"{node.lineno}: {name}()")
        elif name == "open":
            # open(path, mode) and gzip.open(path, mode); Path.open(mode)
            mode = _mode(node, 0 if isinstance(func, ast.Attribute) and not isinstance(func.value, ast.Name) else 1)
            if set(mode) & set("wax+"):
                found.append(f"{node.lineno}: open(..., {mode!r})")
    return found


def test_the_scan_sees_a_file_write(tmp_path: Path) -> None:
    # GIVEN a module that writes a file three ways WHEN scanned THEN each is found
    module = tmp_path / "m.py"
    module.write_text('import tempfile\nopen("x", "w")\nfrom pathlib import Path\nPath("y").write_text("z")\n')
    assert file_writes(module) == ["1: import tempfile", "2: open(..., 'w')", "4: write_text()"]


@pytest.mark.parametrize("path", RUNTIME, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_worker_writes_no_file(path: Path) -> None:
    # GIVEN a module the worker image runs WHEN scanned THEN it writes no file (the container's root is read-only)
    assert file_writes(path) == [], f"{path.relative_to(ROOT)} writes a file: mount a volume there (infra/workers.py)"
