"""Every import of ``src/h2htalk`` goes down its layers (``tests/layers.py``, shown in ``docs/layers.md``), or stays
in its layer without making a loop between two of its entries. Every import counts, lazy ones (inside a function)
and those under ``TYPE_CHECKING`` too (``tests/package_imports.py``): an import moved into a function still makes
the lower module depend on the upper one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .conftest import REPO_ROOT
from .layers import LAYERS, Layer, entry_of, layer_of, layer_table
from .package_imports import Import, cycles, modules, package_imports

PACKAGE = REPO_ROOT / "src" / "h2htalk"


@dataclass(frozen=True)
class KnownException:
    """Imports from ``importer`` (a module or package) of ``imported`` that break the layers for now, and why."""

    importer: str
    imported: str
    why: str

    def covers(self, found: Import) -> bool:
        pairs = ((found.importer, self.importer), (found.imported, self.imported))
        return all(within(module, f"h2htalk.{name}") for module, name in pairs)


def within(module: str, name: str) -> bool:
    """``module`` is ``name`` or one of its modules."""
    return module == name or module.startswith(name + ".")


# The only imports allowed to go up. Each entry must still be needed: the test below fails once none of its imports
# is left, so that it is removed with the loop it stood for.
KNOWN_UPWARD_IMPORTS: tuple[KnownException, ...] = (
    # the plan <-> stages loop: plan/chain.py walks the stage table, and the plan stage's job in stages/jobs/ calls
    # the plan back; it goes when the plan's stage is declared at its own function
    KnownException("stages.jobs.plan", "plan", "the plan stage's job calls the plan, which walks the stage table"),
)


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


def _outside_exceptions(imports: list[Import]) -> list[Import]:
    return [one for one in imports if not any(known.covers(one) for known in KNOWN_UPWARD_IMPORTS)]


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
    found = upward_imports(_outside_exceptions(imports), LAYERS, REPO_ROOT, "h2htalk")
    assert not found, "imports that go up the layers (tests/layers.py, docs/layers.md):\n" + "\n".join(found)


def test_no_two_packages_import_each_other():
    found = entry_loops(_outside_exceptions(package_imports(PACKAGE)), LAYERS, REPO_ROOT, "h2htalk")
    assert not found, "loops between packages:\n" + "\n\n".join(found)


def test_each_known_exception_is_still_needed():
    imports = package_imports(PACKAGE)
    for known in KNOWN_UPWARD_IMPORTS:
        covered = [one for one in imports if known.covers(one)]
        gone = f"the known exception {known.importer} -> {known.imported} ({known.why}) is not needed: remove it"
        assert covered and upward_imports(covered, LAYERS, REPO_ROOT, "h2htalk"), gone


def test_the_docs_show_the_layers():
    docs = (REPO_ROOT / "docs" / "layers.md").read_text(encoding="utf-8")
    assert layer_table() in docs, "docs/layers.md differs from tests/layers.py; its table is:\n" + layer_table()
    for known in KNOWN_UPWARD_IMPORTS:
        assert f"`{known.importer}`" in docs and f"`{known.imported}`" in docs, f"docs/layers.md does not name {known}"


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
