"""Every import of ``src/h2htalk`` goes down its layers (``tests/layers.py``, shown in ``docs/layers.md``), or stays
in its layer without making a loop between two of its entries. Every import counts, lazy ones (inside a function)
and those under ``TYPE_CHECKING`` too (``tests/package_imports.py``): an import moved into a function still makes
the lower module depend on the upper one.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .conftest import REPO_ROOT
from .layers import LAYERS, Layer, entry_of, layer_of, layer_table
from .package_imports import Import, cycles, modules, package_imports

PACKAGE = REPO_ROOT / "src" / "h2htalk"


def where(found: Import, root: Path) -> str:
    return f"{found.path.relative_to(root)}:{found.line}"


def _layered(imports: Iterable[Import], layers: tuple[Layer, ...], package: str) -> list[tuple[Import, str, str]]:
    """Each import between two entries of ``layers``, with the entries of its two ends."""
    found = []
    for one in imports:
        here, there = entry_of(one.importer, layers, package), entry_of(one.imported, layers, package)
        if here is not None and there is not None and here != there:
            found.append((one, here, there))
    return found


def upward_imports(imports: Iterable[Import], layers: tuple[Layer, ...], root: Path, package: str) -> list[str]:
    """One line per import that goes up ``layers``: its file and line, and the layers of its two ends."""
    lines = []
    for one, here, there in _layered(imports, layers, package):
        low, high = layer_of(here, layers), layer_of(there, layers)
        if high < low:
            lines.append(
                f"{where(one, root)}: {one.importer} (layer {low + 1}, {layers[low].name!r}) imports {one.imported}"
                f" (layer {high + 1}, {layers[high].name!r}, above it)"
            )
    return lines


def entry_loops(imports: Iterable[Import], layers: tuple[Layer, ...], root: Path, package: str) -> list[str]:
    """One block per loop between entries of one layer (two packages that import each other, however far round),
    naming each import of the loop with its file and line. Imports up the layers are ``upward_imports``'."""
    layered = [(one, here, there) for one, here, there in _layered(imports, layers, package)
               if layer_of(here, layers) == layer_of(there, layers)]  # fmt: skip
    graph: dict[str, set[str]] = {entry: set() for layer in layers for entry in layer.holds}
    for _, here, there in layered:
        graph[here].add(there)
    blocks = []
    for loop in cycles(graph):
        inside = [f"  {where(one, root)}: {one.importer} imports {one.imported}" for one, here, there in layered
                  if here in loop and there in loop]  # fmt: skip
        blocks.append(f"{' <-> '.join(loop)}:\n" + "\n".join(inside))
    return blocks


def test_every_module_is_in_exactly_one_layer():
    names = list(modules(PACKAGE))
    assert len(names) > 100  # the package's modules
    unplaced = [name for name in names if entry_of(name) is None]
    assert not unplaced, f"modules in no layer of tests/layers.py: {unplaced}"
    entries = [entry for layer in LAYERS for entry in layer.holds]
    assert len(entries) == len(set(entries)), "an entry is listed twice in tests/layers.py"
    used = {entry_of(name) for name in names}
    assert not [e for e in entries if e not in used], "tests/layers.py lists what the package no longer has"


def test_every_import_goes_down_the_layers():
    imports = package_imports(PACKAGE)
    assert len(imports) > 500  # the package's imports
    found = upward_imports(imports, LAYERS, REPO_ROOT, "h2htalk")
    assert not found, "imports that go up the layers (tests/layers.py, docs/layers.md):\n" + "\n".join(found)


def test_no_two_packages_import_each_other():
    found = entry_loops(package_imports(PACKAGE), LAYERS, REPO_ROOT, "h2htalk")
    assert not found, "loops between packages:\n" + "\n\n".join(found)


def test_the_docs_show_the_layers():
    docs = (REPO_ROOT / "docs" / "layers.md").read_text(encoding="utf-8")
    assert layer_table() in docs, "docs/layers.md differs from tests/layers.py; its table is:\n" + layer_table()


def test_an_import_up_the_layers_is_named_with_its_file_line_and_layers(tmp_path):
    package = tmp_path / "pkg"
    (package / "top").mkdir(parents=True)
    (package / "low").mkdir()
    files = {
        "__init__.py": "",
        "top/__init__.py": "",
        "top/a.py": "from pkg.low import b\n",  # down: allowed
        "low/__init__.py": "",
        "low/b.py": "def later():\n    from ..top.a import thing\n",  # up, inside a function
        "low/c.py": (
            "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import pkg.top\n"  # up, for a type only
            "from pkg import side\n"  # sideways
        ),
        "side.py": "from pkg.low import b\n",  # sideways back: a loop in one layer
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    layers = (Layer("top", ("top",), ""), Layer("low", ("low", "side", "__init__"), ""))
    imports = package_imports(package)
    assert upward_imports(imports, layers, tmp_path, "pkg") == [
        "pkg/low/b.py:2: pkg.low.b (layer 2, 'low') imports pkg.top.a (layer 1, 'top', above it)",
        "pkg/low/c.py:4: pkg.low.c (layer 2, 'low') imports pkg.top (layer 1, 'top', above it)",
    ]
    assert entry_loops(imports, layers, tmp_path, "pkg") == [
        "low <-> side:\n  pkg/low/c.py:5: pkg.low.c imports pkg.side\n  pkg/side.py:1: pkg.side imports pkg.low.b"
    ]
    assert entry_of("pkg", layers, "pkg") == "__init__" and entry_of("pkg.lower", layers, "pkg") is None
