"""The base install (`pip install -e .`, no extras) is enough for every module of the package.

An extra's package may be imported only behind ``except ImportError`` (which turns its absence into a clear
error or a fallback); every other third-party import must be a base dependency in pyproject.toml. Two checks:
every import statement in the source, lazy ones inside functions too, against the base dependencies; and every
module imported in a fresh interpreter that can see only the base dependencies and what they install.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .conftest import REPO_ROOT
from .test_envs import _guarded

SRC = REPO_ROOT / "src"
PACKAGES = ("h2htalk", "snakemake_logger_plugin_h2htalk")


def base_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [Requirement(line) for line in project["dependencies"]]


def distributions_of(top_level: str) -> set[str]:
    return {canonicalize_name(name) for name in packages_distributions().get(top_level, [])}


def base_closure() -> set[str]:
    """The distributions a base install brings: the base dependencies and, recursively, what they require
    (without their own extras)."""
    todo = [r for r in base_requirements() if r.marker is None or r.marker.evaluate({"extra": ""})]
    seen: set[str] = set()
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:
            continue  # a platform-specific dependency not installed here
        for line in requires:
            nested = Requirement(line)
            if nested.marker is None or nested.marker.evaluate({"extra": ""}):
                todo.append(nested)
    return seen


def source_imports() -> list[tuple[str, int, str]]:
    """(file, line, top-level module) of every unguarded third-party import in the package's source."""
    found = []
    for path in sorted(p for package in PACKAGES for p in (SRC / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in (*PACKAGES, "__future__") or _guarded(node, parents):
                    continue
                found.append((str(path.relative_to(REPO_ROOT)), node.lineno, top))
    return found


def test_every_unguarded_import_is_a_base_dependency():
    base = {canonicalize_name(r.name) for r in base_requirements()}
    wrong = [
        f"{file}:{line}: {module} ({', '.join(sorted(distributions_of(module))) or 'not installed'})"
        for file, line, module in source_imports()
        if not distributions_of(module) & base
    ]
    assert not wrong, "imports of packages that are not base dependencies (make them one, or guard the import):\n" + (
        "\n".join(wrong)
    )


# Imports every module in a fresh interpreter whose imports of top-level modules outside the base install fail as
# they would there; prints the modules that failed, as JSON.
IMPORT_ALL = """
import importlib, importlib.abc, importlib.machinery, json, os, pkgutil, sys, sysconfig
allowed = set(json.loads(sys.argv[1]))
paths = sysconfig.get_paths()
stdlib = [paths["stdlib"], paths["platstdlib"], os.path.join(paths["platstdlib"], "lib-dynload")]

class BaseInstallOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if path is not None or name in allowed or name in sys.stdlib_module_names:
            return None
        if importlib.machinery.PathFinder.find_spec(name, stdlib) is not None:  # private ones: _sysconfigdata...
            return None
        raise ModuleNotFoundError(f"No module named {name!r} (not in the base install)", name=name)

sys.meta_path.insert(0, BaseInstallOnly())
failed = {}
for package in json.loads(sys.argv[2]):
    modules = [package]
    root = importlib.import_module(package)
    found = pkgutil.walk_packages(getattr(root, "__path__", []), package + ".")
    modules += [m.name for m in found if not m.name.endswith(".__main__")]  # that one runs the command
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            failed[name] = str(exc)
print(json.dumps(failed))
"""


@pytest.mark.slow
def test_every_module_imports_with_only_the_base_install():
    closure = base_closure()
    installed = packages_distributions().items()
    allowed = {top for top, names in installed if {canonicalize_name(name) for name in names} & closure}
    allowed |= {*PACKAGES, "_distutils_hack"}
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, json.dumps(sorted(allowed)), json.dumps(PACKAGES)],
        capture_output=True, text=True, timeout=600, check=False, cwd=Path(SRC),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    failed = json.loads(result.stdout.strip().splitlines()[-1])
    listed = "\n".join(f"{module}: {error}" for module, error in failed.items())
    assert not failed, f"modules that need more than the base install:\n{listed}"
