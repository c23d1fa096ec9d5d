"""h2htalk's modules import one another without a cycle, so each can be read, tested and changed from the bottom
up. What counts as an import (lazy ones and those under ``TYPE_CHECKING`` too): ``tests/package_imports.py``.
"""

from __future__ import annotations

from .conftest import REPO_ROOT
from .package_imports import cycles, import_graph

PACKAGE = REPO_ROOT / "src" / "h2htalk"


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
