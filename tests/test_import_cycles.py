"""h2htalk's modules import one another without a cycle, so each can be read, tested and changed from the bottom
up: every import counts, at module level or inside a function (one put in a function to dodge a cycle is still
one), absolute or relative. An import names the module it loads; the packages above it, which Python runs first,
are not counted, since a package's ``__init__`` that gathers its own modules would be a cycle with each of them.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "src" / "h2htalk"


def modules(package: Path) -> dict[str, Path]:
    """Each module of ``package`` (a folder) by its dotted name."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports."""
    known = modules(package)

    def module_of(name: str) -> str | None:
        """The module ``name`` is, or is in (a function or class imported from it)."""
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in known.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                imported.update(module_of(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = ".".join(here.split(".")[: len(here.split(".")) - node.level + 1])
                    base = f"{parent}.{base}" if base else parent
                imported.update(module_of(f"{base}.{alias.name}") for alias in node.names)
        graph[name] = {module for module in imported if module and module != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan), each sorted."""
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


def test_no_module_of_h2htalk_imports_itself_through_others():
    graph = import_graph(PACKAGE)
    assert len(graph) > 50 and sum(map(len, graph.values())) > len(graph)  # the package's modules and imports
    found = cycles(graph)
    described = ["\n".join(f"  {m} imports {sorted(graph[m] & set(part))}" for m in part) for part in found]
    assert not found, "import cycles:\n" + "\n\n".join(described)


def test_a_cycle_is_found_through_functions_and_relative_imports(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from pkg.sub import b\n",
        "sub/__init__.py": "",
        "sub/b.py": "def later():\n    from ..c import thing\n",
        "c.py": "import pkg.a as a\nthing = 1\n",
        "d.py": "from pkg import c\n",  # imports into the cycle, is not part of it
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    graph = import_graph(package)
    assert graph["pkg.sub.b"] == {"pkg.c"} and graph["pkg.c"] == {"pkg.a"} and graph["pkg.d"] == {"pkg.c"}
    assert cycles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    (package / "c.py").write_text("thing = 1\n", encoding="utf-8")
    assert cycles(import_graph(package)) == []
