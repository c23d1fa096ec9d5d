"""Scenario sets of the two studies: validation, and the chat messages a model under test sees."""

from __future__ import annotations

import json
import os
import random
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from h2htalk.errors import DataError
from h2htalk.io import iter_jsonl, write_jsonl_atomic
from h2htalk.prompts.render import sha256_text, system_prompt

STUDIES = {"safety": "safety_scenarios", "instruction_following": "instruction_following"}


@cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    text = resources.files("h2htalk.schemas").joinpath(f"{name}.schema.yaml").read_text(encoding="utf-8")
    schema = yaml.safe_load(text)
    return jsonschema.validators.validator_for(schema)(schema)


def default_path(study: str) -> Path:
    return Path(str(resources.files("h2htalk.resources").joinpath("studies").joinpath(f"{STUDIES[study]}.jsonl")))


def read_scenarios(study: str, path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Read and validate a scenario set; an invalid line is an error naming file, line and field."""
    path = Path(path) if path else default_path(study)
    validator = _validator(STUDIES[study])
    records, seen = [], set()
    for number, record in iter_jsonl(path):
        errors = sorted(validator.iter_errors(record), key=lambda e: len(list(e.absolute_path)))
        if errors:
            where = ".".join(str(p) for p in errors[0].absolute_path) or "<record>"
            raise DataError(f"{path}: line {number}: field '{where}': {errors[0].message}")
        if record["id"] in seen:
            raise DataError(f"{path}: line {number}: duplicate id {record['id']!r}")
        seen.add(record["id"])
        records.append(record)
    return records


def _prompt(item_id: str, study: str, variant: str, turns: list[dict[str, str]]) -> dict[str, Any]:
    system = system_prompt(variant)
    messages = [{"role": "system", "content": system}, *turns]
    return {
        "id": item_id,
        "study": study,
        "variant": variant,
        "messages": messages,
        "hashes": {
            "system_sha256": sha256_text(system),
            "user_sha256": sha256_text(json.dumps(turns, ensure_ascii=False, sort_keys=True)),
        },
    }


def safety_items(scenarios: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One item per user turn: the conversation so far (earlier turns answered by their safe references)."""
    items = []
    for scenario in scenarios:
        history: list[dict[str, str]] = []
        for index, turn in enumerate(scenario["turns"], start=1):
            history = [*history, {"role": "user", "content": turn["user"]}]
            items.append(
                {
                    "id": f"{scenario['id']}-t{index}",
                    "scenario": scenario["id"],
                    "category": scenario["category"],
                    "turns": history,
                    "reference": turn["reference"],
                }
            )
            history = [*history, {"role": "assistant", "content": turn["reference"]}]
    return items


def if_items(scenarios: list[dict[str, Any]]) -> list[dict[str, Any]]:
    roles = {"user": "user", "companion": "assistant"}
    return [
        {**s, "turns": [{"role": roles[t["speaker"]], "content": t["text"]} for t in s["history_dialogues"]]}
        for s in scenarios
    ]


def sample_scenarios(scenarios: list[dict[str, Any]], size: int | None, seed: int, key: str) -> list[dict]:
    """A seeded sample of ``size`` scenarios spread over the values of ``key`` (category or scenario type)."""
    if size is None or size >= len(scenarios):
        return scenarios
    rng = random.Random(seed)
    groups: dict[str, list[dict[str, Any]]] = {}
    for scenario in scenarios:
        groups.setdefault(scenario[key], []).append(scenario)
    for members in groups.values():
        rng.shuffle(members)
    chosen: list[dict[str, Any]] = []
    while len(chosen) < size:  # round-robin over the groups, so every group is represented
        for name in sorted(groups):
            if groups[name] and len(chosen) < size:
                chosen.append(groups[name].pop())
    order = {s["id"]: i for i, s in enumerate(scenarios)}
    return sorted(chosen, key=lambda s: order[s["id"]])


def write_study_inputs(
    study: str,
    variant: str,
    out_prompts: Path,
    out_items: Path,
    path: str | os.PathLike[str] | None = None,
    sample: int | None = None,
    seed: int = 7,
) -> int:
    """Write the prompts a model sees and the items (with references / needs) the scorers and judges use."""
    key = "category" if study == "safety" else "scenario_type"
    scenarios = sample_scenarios(read_scenarios(study, path), sample, seed, key)
    made = safety_items(scenarios) if study == "safety" else if_items(scenarios)
    items = [{"study": study, **item} for item in made]
    write_jsonl_atomic(out_prompts, [_prompt(i["id"], study, variant, i["turns"]) for i in items])
    write_jsonl_atomic(out_items, items)
    return len(items)
