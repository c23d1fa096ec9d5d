"""The 11 H2HTalk subtasks, each defined once in ``resources/subtasks/{key}.yaml``.

A definition holds the paper name and Table 2 column, the upstream file and template, the released and paper
counts, the dimension, the measure (S, or J when a rubric judge is mixed in), the default completion limit,
the instance fields, the user-message template, the reconstruction instruction, the judge's level texts and
hand-written demo instances. The config schema, the instance schema, the prompts, the judge, the data stage and
the tables all read it from here. Adding a subtask means adding one such file (and its paper numbers, if any).

Two upstream file names are swapped relative to the paper's Table 1: ``itinerary_initialize.jsonl`` holds
the 533 DialogueSchedule references and ``dialogue_schedule.jsonl`` the 76 ItineraryInitialization
references (counts and content both say so).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

from h2htalk.errors import ConfigError
from h2htalk.io import parse_yaml

DIMENSIONS: tuple[str, ...] = ("dialogue", "itinerary", "recollection")
FIELDS_FILE = "fields.yaml"


@dataclass(frozen=True)
class Subtask:
    key: str
    position: int
    paper_name: str
    table2_column: str
    upstream_file: str
    upstream_template: str
    released: int
    paper_count: int
    dimension: str
    measure: str  # "S" (metrics only) or "J" (metrics mixed with a rubric judge)
    persona: bool  # the system prompt is the persona, or a neutral task line
    max_new_tokens: int
    fields: tuple[str, ...]
    reconstruction: str
    template: str
    demo: tuple[dict[str, Any], ...]
    judge: dict[str, str] | None = None


def _folder() -> Any:
    return resources.files("h2htalk.resources").joinpath("subtasks")


def _definition_schema() -> dict[str, Any]:
    return parse_yaml(resources.files("h2htalk.schemas").joinpath("subtask.schema.yaml").read_text("utf-8"))


@cache
def field_catalogue() -> dict[str, dict[str, Any]]:
    """Field name -> {schema, describe}: every instance field any subtask may use."""
    return parse_yaml(_folder().joinpath(FIELDS_FILE).read_text(encoding="utf-8"))


def load_definitions(folder: Any) -> tuple[Subtask, ...]:
    """Every ``{key}.yaml`` definition in ``folder``, validated, in table order; errors name file and key."""
    schema = _definition_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    known_fields = parse_yaml(folder.joinpath(FIELDS_FILE).read_text(encoding="utf-8"))
    subtasks = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml") or entry.name == FIELDS_FILE:
            continue
        key = entry.name.removesuffix(".yaml")
        definition = parse_yaml(entry.read_text(encoding="utf-8"))
        problems = [
            f"{'.'.join(map(str, e.absolute_path)) or '<top level>'}: {e.message}"
            for e in validator.iter_errors(definition)
        ]
        problems += [f"fields: {name!r} is not in {FIELDS_FILE}" for name in definition.get("fields", [])
                     if name not in known_fields]  # fmt: skip
        if problems:
            raise ConfigError(f"subtask definition {entry.name}: " + "; ".join(problems))
        definition["fields"] = tuple(definition["fields"])
        definition["demo"] = tuple(definition["demo"])
        subtasks.append(Subtask(key=key, **definition))
    subtasks.sort(key=lambda s: s.position)
    positions = [s.position for s in subtasks]
    if len(set(positions)) != len(positions):
        raise ConfigError(f"subtask definitions in {folder}: two share a position ({positions})")
    return tuple(subtasks)


SUBTASKS: tuple[Subtask, ...] = load_definitions(_folder())
SUBTASK_KEYS: tuple[str, ...] = tuple(s.key for s in SUBTASKS)
JUDGED: tuple[str, ...] = tuple(s.key for s in SUBTASKS if s.measure == "J")

_BY_KEY = {s.key: s for s in SUBTASKS}


def get_subtask(key: str) -> Subtask:
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown subtask {key!r}; known: {', '.join(SUBTASK_KEYS)}") from None


def by_dimension() -> list[tuple[str, list[str]]]:
    """[(dimension, [subtask keys])] in the paper's column order (Dialogue, Itinerary, Recollection)."""
    return [(d, [s.key for s in SUBTASKS if s.dimension == d]) for d in DIMENSIONS]
