"""Structure check for the runtime packages: import cycles, upward imports, module and function size.

Run ``python scripts/check_structure.py`` (the gate runs it); exit 1 lists every breach, one per line.

What it checks
--------------
- **No import cycle** between modules of the runtime packages. Every ``import`` counts, including those under
  ``if TYPE_CHECKING:`` and inside functions: a cycle held apart only by deferring an import is still a cycle a
  reader has to hold in mind.
- **No upward import**, three ways:

  - between packages: ``PACKAGE_DEPENDS`` names the packages each runtime package may import (``geokernel``,
    the kernel every image ships, is at the bottom and imports none; ``local`` drives the others and sits on top);
    ``PACKAGE_PART_DEPENDS`` narrows that for a part of a package (the router's and deploy functions' code ship the
    kernel only, so they may not import the partitioner library);
  - inside every package and sub-package: its direct parts (modules and sub-packages) must not import each other
    in a circle, so a bottom-up order of them exists (a part importing a sub-package that imports the part back is
    such a circle even when no two *modules* form one);
  - inside a package with a declared order: ``LAYERS`` orders its sub-packages bottom-up, and a module may import
    only from its own layer or the ones below it; a layer written as a tuple is a group of siblings that must not
    import each other (each Lambda function's package, for instance).
- **Module size**: at most ``MAX_MODULE_LINES`` lines, for the runtime packages and, size only, every ``.py`` file
  under ``SIZE_ONLY`` (``tests/``, ``bench/``, ``scripts/``). **Function size** (runtime packages only): at most
  ``MAX_FUNCTION_LINES`` lines from ``def`` to the last line of the body (docstring included).

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
PACKAGES = ("geokernel", "partitioner", "lambdas", "geo_service", "glue_jobs", "local", "infra", "transforms",
            "georebal")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# Folders whose .py files are held to MAX_MODULE_LINES only (no cycles, layers or function length).
SIZE_ONLY = ("tests", "bench", "scripts")

# Sub-packages of a layered package, bottom-up: a module may import its own layer and the ones before it.
# A module directly in the package (e.g. ``partitioner/cli.py``) is the top layer.
Layer = str | tuple[str, ...]
LAYERS: dict[str, tuple[Layer, ...]] = {
    # the kernel every image ships: the exception base (a module, imported by every layer); records exchanged between
    # parts; quadkey geometry; the partition spec model; the fast path's surge meter on it; the AWS API budget (the
    # event rules, a module, on top)
    "geokernel": ("errors", "contracts", "geo", "partition_spec", "surge", "aws_budget"),
    # the library on the kernel: load; the build strategies; the control loop and its forecast; the simulator;
    # metrics, text and maps; the sub-commands (under partitioner/cli.py)
    "partitioner": ("load", "builders", "control", "simulate", "output", "commands"),
    # the adapters every function shares; then one package per Lambda function, none importing another
    "lambdas": ("runtime", ("partitioner", "router", "deploy", "jobrun", "teardown")),
    # the worker: the exception base (a module); its ports (AWS, logs, clock and threads); the slot leases; the parts of
    # a record's path (read, decode, transform, cost, buffer); entity state; swaps; the process at run time; serving
    # slots (the entry points __main__, worker and healthcheck, modules, on top)
    "geo_service": ("errors", "adapters", "leases", "pipeline", "entity", "swap", "runtime", "serving"),
}

# The packages each runtime package may import (besides itself): the kernel every image ships at the bottom; the
# partitioner library on it; the Spark job and the worker image on the kernel alone, independent of each other; the
# CDK app on the kernel and the library (it validates the policy settings at synth); the Lambda functions on the
# kernel, and only the partitioner function's package on the library (PACKAGE_PART_DEPENDS); transforms (run in the worker) on the worker's interface; the local loop on top, driving
# the worker and the Lambda logic in-process; the operator's tools on the CDK app's settings and the router's own
# routing and adapters (``georebal locate`` locates a point with the router's RoutingTable, not a second copy).
PACKAGE_DEPENDS: dict[str, tuple[str, ...]] = {
    "geokernel": (),
    "partitioner": ("geokernel",),
    "glue_jobs": ("geokernel",),
    "geo_service": ("geokernel",),
    "lambdas": ("geokernel", "partitioner"),
    "infra": ("geokernel", "partitioner"),
    "transforms": ("geokernel", "geo_service"),
    "local": ("geokernel", "partitioner", "geo_service", "lambdas", "glue_jobs"),
    "georebal": ("geokernel", "partitioner", "infra", "lambdas"),
}
# Narrower rules for parts of a package: a module under the part may import only these packages (besides its own).
# Only the partitioner function's package builds specs: the router's and the deploy functions' code ship the kernel.
PACKAGE_PART_DEPENDS: dict[str, tuple[str, ...]] = {
    "lambdas.runtime": ("geokernel",),
    "lambdas.router": ("geokernel",),
    "lambdas.deploy": ("geokernel",),
    "lambdas.jobrun": ("geokernel",),
    "lambdas.teardown": ("geokernel",),
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


def layer_of(module: str, layers: dict[str, tuple[Layer, ...]]) -> tuple[str, int, str] | None:
    """(package, rank, sub-package) of a module in a layered package; the package's own modules rank above all."""
    package, _, rest = module.partition(".")
    order = layers.get(package)
    if order is None:
        return None
    sub = rest.partition(".")[0]
    for rank, layer in enumerate(order):
        if sub == layer or (isinstance(layer, tuple) and sub in layer):  # a module of the layer, or its __init__
            return package, rank, sub
    return package, len(order), sub


def upward(graph: dict[str, set[str]], layers: dict[str, tuple[Layer, ...]]) -> list[Breach]:
    breaches = []
    for source, targets in sorted(graph.items()):
        here = layer_of(source, layers)
        if here is None:
            continue
        for target in sorted(targets):
            there = layer_of(target, layers)
            if there is None or there[0] != here[0]:
                continue
            if there[1] > here[1]:
                breaches.append(Breach(source, f"imports {target}, a layer above it"))
            elif there[1] == here[1] < len(layers[here[0]]) and there[2] != here[2]:
                breaches.append(Breach(source, f"imports {target}, a sibling layer it must not depend on"))
    return breaches


def across_packages(graph: dict[str, set[str]], depends: dict[str, tuple[str, ...]]) -> list[Breach]:
    """Imports of another package that ``depends`` does not allow (packages it does not name are not checked).

    A key of ``depends`` is a package or a dotted part of one (``lambdas.router``); a module follows the rule of the
    longest key that holds it.
    """
    breaches = []
    for source, targets in sorted(graph.items()):
        package = source.partition(".")[0]
        names = source.split(".")
        rule = next((k for k in (".".join(names[:i]) for i in range(len(names), 0, -1)) if k in depends), None)
        if rule is None:
            continue
        for target in sorted(targets):
            other = target.partition(".")[0]
            if other != package and other not in depends[rule]:
                whose = f"package {rule!r}" if rule == package else f"{rule!r}"
                breaches.append(Breach(source, f"imports {target}: {whose} may import only {list(depends[rule])}"))
    return breaches


def part_circles(graph: dict[str, set[str]], modules: dict[str, Path]) -> list[Breach]:
    """Circles between the direct parts (modules, sub-packages) of each package: no bottom-up order of them."""
    def part(module: str, parent: str) -> str | None:
        if not module.startswith(parent + "."):
            return None
        return parent + "." + module[len(parent) + 1:].partition(".")[0]

    parents = {name for name, path in modules.items() if path.name == "__init__.py"}
    breaches = []
    for parent in sorted(parents):
        parts: dict[str, set[str]] = {}
        for source, targets in graph.items():
            if (a := part(source, parent)) is None:
                continue
            parts.setdefault(a, set())
            for target in targets:
                if (b := part(target, parent)) is not None and b != a:
                    parts[a].add(b)
        for circle in cycles(parts):
            breaches.append(Breach(" <-> ".join(circle), f"parts of {parent} import each other in a circle "
                                                         "(no bottom-up order of them exists)"))
    return breaches


def size_only_files(root: Path = ROOT, folders: tuple[str, ...] = SIZE_ONLY) -> list[Path]:
    """The ``.py`` files under ``folders`` (outside ``__pycache__``), held to the module size only."""
    found: list[Path] = []
    for folder in folders:
        base = root / folder
        if base.is_dir():
            found += (path for path in sorted(base.rglob("*.py")) if "__pycache__" not in path.parts)
    return found


def too_long(path: Path, text: str, root: Path) -> list[Breach]:
    lines = text.count("\n")
    if lines > MAX_MODULE_LINES:
        return [Breach(str(path.relative_to(root)), f"{lines} lines (at most {MAX_MODULE_LINES})")]
    return []


def sizes(modules: dict[str, Path], root: Path) -> list[Breach]:
    breaches = []
    for path in sorted(modules.values()):
        text = path.read_text()
        where = str(path.relative_to(root))
        breaches += too_long(path, text, root)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    breaches.append(
                        Breach(f"{where}:{node.lineno}", f"{node.name}() is {length} lines (at most {MAX_FUNCTION_LINES})")
                    )
    return breaches


#: Folder names that say nothing of what they hold, or that tools take for build output or tests (issue #59):
#: code-structure tools skip ``build/``, ``spec/`` and ``test(s)/``, and ``common/`` names no concept.
VAGUE_FOLDERS = frozenset({"spec", "build", "test", "tests", "common"})


def vague_folders(modules: dict[str, Path], root: Path) -> list[Breach]:
    """A breach per runtime package folder named in :data:`VAGUE_FOLDERS`."""
    folders = {path.parent for path in modules.values() if path.parent.name in VAGUE_FOLDERS}
    return [Breach(str(f.relative_to(root)), f"a runtime folder named {f.name!r} (one of {sorted(VAGUE_FOLDERS)}): "
                   "name it for what it holds") for f in sorted(folders)]


def check(
    root: Path = ROOT,
    packages: tuple[str, ...] = PACKAGES,
    layers: dict[str, tuple[Layer, ...]] | None = None,
    depends: dict[str, tuple[str, ...]] | None = None,
    *,
    size_only: tuple[str, ...] = SIZE_ONLY,
) -> tuple[int, list[Breach]]:
    """(modules checked, breaches) for the packages under ``root``, then the size of the files under ``size_only``.

    Circles between parts are looked for only once no module cycle is left (each module cycle is one of them).
    The count is of the runtime modules only.
    """
    modules = runtime_modules(root, packages)
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    breaches = [Breach(" <-> ".join(c), "import cycle") for c in cycles(graph)]
    if not breaches:
        breaches = part_circles(graph, modules)
    breaches += across_packages(graph, {**PACKAGE_DEPENDS, **PACKAGE_PART_DEPENDS} if depends is None else depends)
    breaches += upward(graph, LAYERS if layers is None else layers) + sizes(modules, root)
    breaches += vague_folders(modules, root)
    for path in size_only_files(root, size_only):
        breaches += too_long(path, path.read_text(), root)
    return len(modules), breaches


def main() -> int:
    checked, breaches = check()
    for breach in breaches:
        print(breach)
    print(f"structure: {checked} modules checked (and {', '.join(f'{f}/' for f in SIZE_ONLY)} for size), "
          f"{len(breaches)} breaches")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
