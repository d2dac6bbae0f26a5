"""Structure check for the runtime packages: import cycles, upward imports, module and function size.

Run ``python scripts/check_structure.py`` (the gate runs it); exit 1 lists every breach, one per line.

What it checks
--------------
- **No import cycle** between modules of the runtime packages. Every ``import`` counts, including those under
  ``if TYPE_CHECKING:`` and inside functions: a cycle held apart only by deferring an import is still a cycle a
  reader has to hold in mind.
- **No upward import** inside a layered package: ``LAYERS`` orders each package's sub-packages bottom-up, and a
  module may import only from its own layer or the ones below it.
- **Module size**: at most ``MAX_MODULE_LINES`` lines. **Function size**: at most ``MAX_FUNCTION_LINES`` lines
  from ``def`` to the last line of the body (docstring included).

Importing a package (``from partitioner import errors``) is an arrow to the named submodule when it exists,
else to the package's ``__init__``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("partitioner", "lambdas", "geo_service", "aggregation", "local", "infra", "transforms")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

# Sub-packages of a layered package, bottom-up: a module may import its own layer and the ones before it.
# A module directly in the package (e.g. ``partitioner/cli.py``) is the top layer.
LAYERS: dict[str, tuple[str, ...]] = {
    # records exchanged between parts; the exception base (a module, imported by every layer); quadkey geometry;
    # the spec model; load; the build strategies; the control loop; the AWS API budget; the simulator; metrics,
    # text and maps; the sub-commands (under partitioner/cli.py)
    "partitioner": ("errors", "contracts", "geo", "spec", "load", "builders", "control", "aws_budget", "simulate",
                    "output", "commands"),
}


@dataclass(frozen=True, slots=True)
class Breach:
    """One thing the check found, printed as ``where: what``."""

    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def runtime_modules(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in packages:
        base = root / package
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[module_name(path, root)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Runtime modules that module ``name`` imports, anywhere in its body."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (hit := _resolve(alias.name, modules)) is not None:
                    targets.add(hit)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                if (hit := _resolve(f"{source}.{alias.name}", modules)) is not None:
                    targets.add(hit)
    targets.discard(name)
    return targets


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def layer_of(module: str, layers: dict[str, tuple[str, ...]]) -> tuple[str, int] | None:
    """(package, rank) of a module in a layered package; the package's own modules rank above every layer."""
    package, _, rest = module.partition(".")
    order = layers.get(package)
    if order is None:
        return None
    sub = rest.partition(".")[0]
    if sub in order:  # a module of the layer, or the layer's __init__
        return package, order.index(sub)
    return package, len(order)


def upward(graph: dict[str, set[str]], layers: dict[str, tuple[str, ...]]) -> list[Breach]:
    breaches = []
    for source, targets in sorted(graph.items()):
        here = layer_of(source, layers)
        if here is None:
            continue
        for target in sorted(targets):
            there = layer_of(target, layers)
            if there is not None and there[0] == here[0] and there[1] > here[1]:
                breaches.append(Breach(source, f"imports {target}, a layer above it"))
    return breaches


def sizes(modules: dict[str, Path], root: Path) -> list[Breach]:
    breaches = []
    for path in sorted(modules.values()):
        text = path.read_text()
        lines = text.count("\n")
        where = str(path.relative_to(root))
        if lines > MAX_MODULE_LINES:
            breaches.append(Breach(where, f"{lines} lines (at most {MAX_MODULE_LINES})"))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    breaches.append(
                        Breach(f"{where}:{node.lineno}", f"{node.name}() is {length} lines (at most {MAX_FUNCTION_LINES})")
                    )
    return breaches


def check(
    root: Path = ROOT, packages: tuple[str, ...] = PACKAGES, layers: dict[str, tuple[str, ...]] | None = None
) -> tuple[int, list[Breach]]:
    """(modules checked, breaches) for the packages under ``root``."""
    modules = runtime_modules(root, packages)
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    breaches = [Breach(" <-> ".join(c), "import cycle") for c in cycles(graph)]
    return len(modules), breaches + upward(graph, LAYERS if layers is None else layers) + sizes(modules, root)


def main() -> int:
    checked, breaches = check()
    for breach in breaches:
        print(breach)
    print(f"structure: {checked} modules checked, {len(breaches)} breaches")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
