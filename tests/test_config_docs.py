"""config/README.md documents every key of the config schema and of the model registry schema.

Every property path of the config schema (as ``load_schema()`` completes it from the subtask definitions; the
keys of an ``embedders`` definition as ``embedders.NAME.key``) and of a registry entry must appear in the
README, each leaf in a row of a key table (a table whose first column is ``key``) with the schema's default.
Every documented key must exist, the paper and laptop columns must show what the shipped configs set, and the
README's examples must validate. A key added to a schema without documentation fails here.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from h2htalk.config import REGISTRY_SCHEMA_FILE, load_registry, load_schema, merge_layers, validate_config

from .conftest import REPO_ROOT

README = REPO_ROOT / "config" / "README.md"
PAPER, LAPTOP = REPO_ROOT / "config" / "config.yaml", REPO_ROOT / "config" / "local.yaml"
REGISTRY_HEADING = "\n## The model registry\n"
NAME = "NAME"  # stands for the name of an entry in a mapping of named entries (embedders.NAME.kind)
SUBTASK_DEFAULTS = "from the subtask definition"  # a default load_schema() derives (singular or plural)


def resolve(sub: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """``sub`` with its ``$ref`` (a ``#/$defs/...`` definition) merged in; its own property defaults win."""
    ref = sub.get("$ref")
    if not ref:
        return sub
    target = root
    for part in ref.removeprefix("#/").split("/"):
        if part not in target:  # a part of the schema walked on its own: its definitions are out of reach
            return sub
        target = target[part]
    merged = {**target, **{k: v for k, v in sub.items() if k not in ("$ref", "properties")}}
    properties = {name: dict(s) for name, s in target.get("properties", {}).items()}
    for name, s in sub.get("properties", {}).items():
        properties[name] = {**properties.get(name, {}), **s}
    if properties:
        merged["properties"] = properties
    return merged


def walk(
    schema: dict[str, Any], prefix: str = "", root: dict[str, Any] | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(dotted path, subschema) of every property under ``schema``, including those of if/then/else and allOf
    branches (so a path can come more than once). Named entries (``additionalProperties``, and properties that
    refer to the same definition, such as the built-in embedders) continue as ``NAME``, the mappings of a list
    as ``path[]``; ``$defs`` are not properties."""
    root = schema if root is None else root
    extra = schema.get("additionalProperties")
    named_ref = extra.get("$ref") if isinstance(extra, dict) else None
    for name, sub in schema.get("properties", {}).items():
        path = f"{prefix}{NAME if named_ref and sub.get('$ref') == named_ref else name}"
        sub = resolve(sub, root)
        yield path, sub
        yield from walk(sub, f"{path}.", root)
    if isinstance(extra, dict):
        extra = resolve(extra, root)
        if "properties" in extra:
            yield from walk(extra, f"{prefix}{NAME}.", root)
    items = schema.get("items")
    if isinstance(items, dict) and "properties" in items:
        yield from walk(items, f"{prefix[:-1]}[].", root)
    for keyword in ("allOf", "anyOf", "oneOf"):
        for branch in schema.get(keyword, []):
            yield from walk(branch, prefix, root)
    for keyword in ("if", "then", "else"):
        if isinstance(schema.get(keyword), dict):
            yield from walk(schema[keyword], prefix, root)


def schema_paths(schema: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    paths: dict[str, list[dict[str, Any]]] = {}
    for path, sub in walk(schema):
        paths.setdefault(path, []).append(sub)
    return paths


def is_leaf(subschemas: list[dict[str, Any]]) -> bool:
    """A key without keys of its own (a value, a list of values, or a free mapping such as instances.files)."""
    return not any(path for sub in subschemas for path, _ in walk(sub))


def key_rows(text: str) -> dict[str, dict[str, str]]:
    """The rows of the key tables in ``text``: documented key -> {column name: cell}."""
    rows: dict[str, dict[str, str]] = {}
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if set(line) <= set("|-: ") or header[0] != "key":
            continue
        match = re.fullmatch(r"`([^`]+)`", cells[0])
        assert match, f"config/README.md: the first cell of a key table must be one `key`: {line}"
        assert len(cells) == len(header), f"config/README.md: {len(cells)} cells, {len(header)} columns: {line}"
        assert match.group(1) not in rows, f"config/README.md: {match.group(1)} has two rows"
        rows[match.group(1)] = dict(zip(header, cells, strict=True))
    return rows


def values(cell: str) -> list[Any]:
    """The values written in backticks in a cell, read as YAML (text that is not YAML stays text)."""
    found = []
    for text in re.findall(r"`([^`]+)`", cell):
        try:
            found.append(yaml.safe_load(text))
        except yaml.YAMLError:
            found.append(text)
    return found


def documentation_problems(schema: dict[str, Any], part: str) -> list[str]:
    """What ``part`` of the README fails to say about ``schema``'s keys (empty when it documents them all)."""
    paths, rows, problems = schema_paths(schema), key_rows(part), []
    for path, subschemas in paths.items():
        if f"`{path}`" not in part:
            problems.append(f"{path}: not documented")
        elif is_leaf(subschemas) and path not in rows:
            problems.append(f"{path}: no row in a key table")
    for key, row in rows.items():
        if key not in paths:
            problems.append(f"{key}: documented, but the schema has no such key")
            continue
        cell = row["default"]
        defaults = [sub["default"] for sub in paths[key] if "default" in sub]
        if SUBTASK_DEFAULTS in cell and not values(cell):
            continue
        if not defaults and not cell.startswith(("—", "required")):
            problems.append(f"{key}: the schema gives no default, the README says {cell!r}")
        problems += [f"{key}: default {d!r} is not in {cell!r}" for d in defaults if d not in values(cell)]
    return problems


@pytest.fixture(scope="module")
def readme() -> tuple[str, str]:
    """The README's two parts: the configuration, and the model registry."""
    text = README.read_text(encoding="utf-8")
    assert REGISTRY_HEADING in text, f"config/README.md has no heading {REGISTRY_HEADING.strip()!r}"
    config_part, registry_part = text.split(REGISTRY_HEADING, 1)
    return config_part, registry_part


def registry_entry_schema() -> dict[str, Any]:
    return load_schema(REGISTRY_SCHEMA_FILE)["additionalProperties"]


def test_the_walk_finds_nested_named_and_derived_keys():
    config_paths, registry_paths = schema_paths(load_schema()), schema_paths(registry_entry_schema())
    assert {
        "generation.concurrency", "generation.decoding.seed", "generation.max_new_tokens.itinerary_advanced",
        "data.curate.anonymise.person_name", "embedders.NAME.kind", "embedders.NAME.batch_size",
    } <= set(config_paths)  # fmt: skip
    assert not any(path.startswith("$defs") or ".subtask_key" in path for path in config_paths)
    assert {"display_name", "api.api_key_env", "gguf.parts[].module", "resources.mem_mb"} <= set(registry_paths)
    assert len(config_paths) > 100 and len(registry_paths) > 40


def test_every_config_key_is_documented(readme):
    assert documentation_problems(load_schema(), readme[0]) == []


def test_every_registry_key_is_documented(readme):
    assert documentation_problems(registry_entry_schema(), readme[1]) == []


def test_a_key_added_without_documentation_fails(readme):
    schema = copy.deepcopy(load_schema())
    schema["properties"]["rubric_judge"]["properties"]["rounds"] = {"type": "integer", "default": 1}
    schema["$defs"]["embedder"]["properties"]["pooling"] = {"type": "string"}
    registry = copy.deepcopy(registry_entry_schema())
    registry["properties"]["llamacpp"]["properties"]["mlock"] = {"type": "boolean", "default": False}
    assert documentation_problems(schema, readme[0]) == [
        "rubric_judge.rounds: not documented",
        "embedders.NAME.pooling: not documented",
    ]
    assert documentation_problems(registry, readme[1]) == ["llamacpp.mlock: not documented"]


def set_keys(
    overlay: dict[str, Any], schema: dict[str, Any], prefix: str = "", root: dict[str, Any] | None = None
) -> Iterator[tuple[str, Any]]:
    """(documented key, value) of every value a config file sets; a built-in named entry (embedders.bge-m3)
    is documented as any named entry (embedders.NAME)."""
    root = schema if root is None else root
    named = schema.get("additionalProperties")
    named_ref = named.get("$ref") if isinstance(named, dict) else None
    for key, value in overlay.items():
        if key in schema.get("properties", {}):
            sub, path = schema["properties"][key], f"{prefix}{key}"
            if named_ref and sub.get("$ref") == named_ref:
                path = f"{prefix}{NAME}"
        else:
            sub, path = named, f"{prefix}{NAME}"
        sub = resolve(sub, root)
        if isinstance(value, dict) and ("properties" in sub or "properties" in (sub.get("additionalProperties") or {})):
            yield from set_keys(value, sub, f"{path}.", root)
        else:
            yield path, value


@pytest.mark.parametrize(("column", "path"), [("paper", PAPER), ("laptop", LAPTOP)])
def test_the_paper_and_laptop_columns_show_what_the_shipped_configs_set(readme, column, path):
    rows = key_rows(readme[0])
    assert all(column in row for row in rows.values()), f"every config key table needs a {column!r} column"
    written = dict(set_keys(yaml.safe_load(path.read_text(encoding="utf-8")), load_schema()))
    shown = {key for key, row in rows.items() if row[column]}
    assert sorted(shown - set(written)) == [], f"shown in the {column} column, but {path.name} does not set it"
    assert sorted(set(written) - shown) == [], f"set in {path.name}, but the {column} column is blank"
    for key, value in written.items():
        cell = rows[key][column]
        if values(cell):  # a value in backticks must be the file's; prose (the 33 models) is not checked
            assert values(cell)[0] == value, f"{key}: {path.name} sets {value!r}, the README shows {cell!r}"


def examples(text: str, kind: str) -> list[Any]:
    """The YAML blocks marked ``<!-- example: KIND -->``."""
    blocks = re.findall(rf"<!-- example: {kind} -->\n```yaml\n(.*?)```", text, flags=re.DOTALL)
    return [yaml.safe_load(block) for block in blocks]


def test_the_overlay_examples_are_valid_overlays_of_the_laptop_config(readme):
    overlays = examples(readme[0], "overlay")
    assert len(overlays) >= 2
    for overlay in overlays:
        registry = {"model_registry": str(REPO_ROOT / "config" / "models.yaml")}
        validate_config(merge_layers([PAPER, LAPTOP], [overlay, registry]))


def test_the_registry_examples_are_valid_and_cover_every_engine(readme, tmp_path):
    (entries,) = examples(readme[1], "registry")
    path = tmp_path / "my-models.yaml"
    path.write_text(yaml.safe_dump(entries, allow_unicode=True), encoding="utf-8")
    registry = load_registry(path)
    assert {spec["engine"] for spec in registry.values()} == {"vllm", "api", "llamacpp", "baseline"}
    shipped = load_registry(REPO_ROOT / "config" / "models.yaml")
    assert not set(registry) & set(shipped), "an example would shadow a shipped entry"
    # the overlay that lists the examples as the user's registry overlay, and names one of them
    (overlay,) = examples(readme[1], "overlay")
    assert overlay["model_registry_overlays"] == [path.name]
    files = {"model_registry": str(REPO_ROOT / "config" / "models.yaml"), "model_registry_overlays": [str(path)]}
    config = validate_config(merge_layers([PAPER, LAPTOP], [overlay, files]))
    assert set(config["models"]) <= set(registry)
