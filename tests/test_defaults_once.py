"""Defaults live in one place, the config schema: no function or dataclass in the package carries a literal
default for a setting the schema defines (it would drift from the schema's, silently)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from h2htalk.config import REGISTRY_SCHEMA_FILE, load_schema

from .conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "src" / "h2htalk"


def schema_keys(schema: Any) -> set[str]:
    """Every property name anywhere in a schema that carries a default."""
    keys: set[str] = set()
    if isinstance(schema, dict):
        for name, sub in schema.get("properties", {}).items():
            if isinstance(sub, dict) and "default" in sub:
                keys.add(name)
        for value in schema.values():
            keys |= schema_keys(value)
    elif isinstance(schema, list):
        for value in schema:
            keys |= schema_keys(value)
    return keys


def literal_defaults(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(name, line) of every parameter or class attribute with a literal default other than None."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            positional = [*node.args.posonlyargs, *node.args.args]
            pairs = list(zip(positional[len(positional) - len(node.args.defaults) :], node.args.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d is not None]
            for arg, default in pairs:
                if _literal(default):
                    yield arg.arg, default.lineno
        elif isinstance(node, ast.ClassDef):
            for statement in node.body:
                named = isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
                if named and statement.value is not None and _literal(statement.value):
                    yield statement.target.id, statement.lineno


def _literal(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant) and node.value is not None


def test_schema_keys_are_found():
    keys = schema_keys(load_schema())
    assert {"timeout_s", "concurrency", "samples", "max_new_tokens", "resamples", "tau", "vote_seed"} <= keys


def test_no_literal_default_in_the_package_duplicates_a_schema_key():
    keys = schema_keys(load_schema()) | schema_keys(load_schema(REGISTRY_SCHEMA_FILE))
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(REPO_ROOT)
        found += [f"{where}:{line} {name}" for name, line in literal_defaults(tree) if name in keys]
    assert not found, "literal defaults of schema keys (take them from the validated config):\n" + "\n".join(found)


def test_the_check_finds_a_planted_default():
    planted = ast.parse("def call(url, timeout_s=120.0, *, retries: int = 3):\n    pass\nclass A:\n    seed: int = 7\n")
    assert sorted(literal_defaults(planted)) == [("retries", 1), ("seed", 4), ("timeout_s", 1)]
