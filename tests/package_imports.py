"""Every import of a package read from its source with ``ast``, each with its file and line.

Every import counts: at module level, inside a function (one put there to dodge a cycle, or to load a heavy stack
only when needed, is still one) and under ``if TYPE_CHECKING:`` (a type named from a module is a dependency on
it, though Python does not run that import), absolute or relative. An import names the module it loads (``from
pkg.a import thing`` is ``pkg.a``, ``from pkg import a`` is ``pkg.a``); the packages above it, which Python runs
first, are not counted, since a package's ``__init__`` that gathers its own modules would be a cycle with each of
them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    path: Path  # its file
    line: int
    imported: str  # the package's module it loads


def modules(package: Path) -> dict[str, Path]:
    """Each module of ``package`` (a folder) by its dotted name."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def package_imports(package: Path) -> list[Import]:
    """Every import of one of ``package``'s modules by another, in file and line order."""
    known = modules(package)

    def module_of(name: str) -> str | None:
        """The module ``name`` is, or is in (a function or class imported from it)."""
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    found = []
    for name, path in known.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                imported = [module_of(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = ".".join(here.split(".")[: len(here.split(".")) - node.level + 1])
                    base = f"{parent}.{base}" if base else parent
                imported = [module_of(f"{base}.{alias.name}") for alias in node.names]
            else:
                continue
            found += [Import(name, path, node.lineno, module) for module in dict.fromkeys(imported) if module]
    return sorted((i for i in found if i.imported != i.importer), key=lambda i: (str(i.path), i.line, i.imported))


def import_graph(package: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports."""
    graph: dict[str, set[str]] = {name: set() for name in modules(package)}
    for found in package_imports(package):
        graph[found.importer].add(found.imported)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            part = []
            while (member := stack.pop()) != module:
                part.append(member)
            if part:
                found.append(sorted([module, *part]))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found
