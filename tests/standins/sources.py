"""What the stand-ins read: settings from the environment, the corpus, the model registry and the instance fields'
shapes. Only the standard library, except PyYAML to read a YAML registry or schema (a JSON registry works without)."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTANCE_SCHEMA = next(
    iter(sorted((REPO_ROOT / "src" / "h2htalk").rglob("instance.schema.yaml"))),
    REPO_ROOT / "src" / "h2htalk" / "schemas" / "instance.schema.yaml",
)


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    return float(value) if value else default


def _split_fragments(text: str) -> list[str]:
    pieces = re.findall(r"[^。！？!?…\n]+[。！？!?…]*", text)
    return [p.strip() for p in pieces if len(p.strip()) >= 2]


@cache
def load_corpus(folder: str | None) -> tuple[str, ...]:
    """Sentence fragments from ``*.jsonl`` files with ``{"response": ...}`` or ``{"text": ...}`` lines."""
    if not folder:
        return ()
    fragments: list[str] = []
    for path in sorted(Path(folder).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            text = record.get("response", record.get("text")) if isinstance(record, dict) else None
            if isinstance(text, str):
                fragments.extend(_split_fragments(text))
    return tuple(fragments)


def load_mapping(path: str | os.PathLike[str]) -> Any:
    text = Path(path).read_text(encoding="utf-8")
    if str(path).endswith(".json"):
        return json.loads(text)
    try:
        import yaml
    except ImportError:  # pragma: no cover - depends on the interpreter
        sys.exit(f"stand-in: reading {path} needs PyYAML (pip install pyyaml), or give a .json file")
    return yaml.safe_load(text)


@cache
def load_registry(path: str | None) -> dict[str, dict[str, Any]]:
    """The model registry (format of config/models.yaml): name -> entry."""
    if not path:
        return {}
    data = load_mapping(path) or {}
    if isinstance(data, dict) and isinstance(data.get("models"), dict):
        data = data["models"]
    return {str(name): entry for name, entry in data.items() if isinstance(entry, dict)}


def find_vllm_entry(registry: Mapping[str, dict[str, Any]], model: str, names: Iterable[str]) -> dict | None:
    """The entry served by ``vllm serve MODEL`` (an entry named like a served name wins over one by hf_id)."""
    names = set(names)
    for name, entry in registry.items():
        if name in names or (entry.get("served_name") and entry["served_name"] in names):
            return {"name": name, **entry}
    for name, entry in registry.items():
        if entry.get("hf_id") == model:
            return {"name": name, **entry}
    return None


def find_api_entry(registry: Mapping[str, dict[str, Any]], model: str) -> dict | None:
    for name, entry in registry.items():
        if isinstance(entry.get("api"), dict) and entry["api"].get("model") == model:
            return {"name": name, **entry}
    return None


def is_reasoning(entry: Mapping[str, Any] | None) -> bool:
    """A registry entry that thinks in <think> tags: a ``reasoning`` key (``{}`` takes the defaults), unless its
    ``parser`` is null (models that think in plain text, such as QwQ-Preview, answer without tags)."""
    reasoning = entry.get("reasoning") if entry else None
    return isinstance(reasoning, Mapping) and reasoning.get("parser", "deepseek_r1") is not None


def _shape(spec: Mapping[str, Any]) -> str:
    if spec.get("type") == "array":
        return "dialogue" if spec.get("items", {}).get("type") == "object" else "strings"
    return "text"


@cache
def field_shapes() -> dict[str, str]:
    """Instance field -> "dialogue" (list of {speaker, text}), "strings" (list of str) or "text" (a string).

    Read from the project's field definitions: a field catalogue (``fields.yaml``: name -> {schema, describe}) or
    the instance schema's ``fields`` properties, whichever the project has; built-in shapes otherwise.
    """
    shapes = {"history_dialogues": "dialogue", "hobbies": "strings"}
    package = REPO_ROOT / "src" / "h2htalk"
    for path in [*sorted(package.rglob("fields.yaml")), INSTANCE_SCHEMA]:
        try:
            data = load_mapping(path)
        except (OSError, SystemExit, ValueError):
            continue
        if path.name == "fields.yaml" and isinstance(data, dict):
            specs = {k: v.get("schema") for k, v in data.items() if isinstance(v, dict)}
        else:
            try:
                specs = data["properties"]["fields"]["properties"]
            except (KeyError, TypeError):
                continue
        shapes.update({name: _shape(spec) for name, spec in specs.items() if isinstance(spec, dict)})
    return shapes
