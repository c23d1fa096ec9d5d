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

from h2htalk.errors import DataError
from h2htalk.io import iter_jsonl, parse_yaml, write_jsonl_atomic
from h2htalk.prompts.render import sha256_text, system_prompt
from h2htalk.settings import VARIANTS, StudySample
from h2htalk.stages.declare import stage
from h2htalk.stages.spec import Done, Labels, One, Over, Paths, Scope

# study -> its scenario file's name in resources/studies, which is also its config key under ``studies``
STUDIES = {"safety": "safety_scenarios", "instruction_following": "instruction_following"}


@cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    text = resources.files("h2htalk.schemas").joinpath(f"{name}.schema.yaml").read_text(encoding="utf-8")
    schema = parse_yaml(text)
    return jsonschema.validators.validator_for(schema)(schema)


def scenario_file(studies: dict[str, Any], study: str) -> str | None:
    """The scenario file a study's config names (``studies.safety_scenarios`` or ``.instruction_following``), or
    None for the set shipped with the project."""
    return studies[STUDIES[study]]


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


def _prompt(
    item_id: str, study: str, variant: str, turns: list[dict[str, str]], user_turns: list[str] | None = None
) -> dict[str, Any]:
    system = system_prompt(variant)
    messages = [{"role": "system", "content": system}, *turns]
    user = user_turns if user_turns is not None else turns
    return {
        "id": item_id,
        "study": study,
        "variant": variant,
        "messages": messages,
        "hashes": {
            "system_sha256": sha256_text(system),
            "user_sha256": sha256_text(json.dumps(user, ensure_ascii=False, sort_keys=True)),
        },
    }


def safety_items(scenarios: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One item per user turn, with its safe reference; ``turns`` is the conversation so far as the scenario
    writes it (earlier turns answered by their references), which the judge sees only when a generation does
    not carry its own."""
    items = []
    for scenario in scenarios:
        history: list[dict[str, str]] = []
        for index, turn in enumerate(scenario["turns"], start=1):
            history = [*history, {"role": "user", "content": turn["user"]}]
            items.append(
                {
                    "id": turn_id(scenario["id"], index),
                    "scenario": scenario["id"],
                    "category": scenario["category"],
                    "turns": history,
                    "reference": turn["reference"],
                }
            )
            history = [*history, {"role": "assistant", "content": turn["reference"]}]
    return items


def turn_id(scenario_id: str, index: int) -> str:
    return f"{scenario_id}-t{index}"


def safety_prompts(scenarios: list[dict[str, Any]], variant: str) -> list[dict[str, Any]]:
    """One conversation per scenario: the model answers each user turn after its own earlier answers, so each
    variant is judged on the conversation it made, never on one primed by the other variant's style."""
    prompts = []
    for scenario in scenarios:
        user_turns = [turn["user"] for turn in scenario["turns"]]
        prompt = _prompt(scenario["id"], "safety", variant, [], user_turns)
        prompt["user_turns"] = user_turns
        prompt["turn_ids"] = [turn_id(scenario["id"], i) for i in range(1, len(user_turns) + 1)]
        prompts.append(prompt)
    return prompts


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


def _scenarios(scope: Scope, labels: Labels) -> list[str]:
    """The study's scenario file, where the config names one (the shipped set otherwise)."""
    file = scenario_file(scope.config["studies"], labels["study"])
    return [file] if file else []


@stage(
    "study_inputs", "prompts and items of a study (safety or instruction_following)",
    uses=("studies",), planned=True,
    reads=("studies.sample", "studies.safety_scenarios", "studies.instruction_following"),
    # the study judge reads the first variant's items, whatever the run's variants
    jobs=Over(study=lambda run: tuple(STUDIES), variant=lambda run: (*run.variants, VARIANTS[0])),
    inputs={"scenarios": Paths(_scenarios)},
    outputs={"prompts": One("study_prompts"), "study_items": One("study_items")},
)  # fmt: skip
def write_study_inputs(
    study: str,
    variant: str,
    scenarios: list[str | os.PathLike[str]],
    prompts: str | os.PathLike[str],
    study_items: str | os.PathLike[str],
    sample: StudySample,
) -> Done:
    """Write the prompts a model sees and the items (with references / needs) the scorers and judges use, from
    ``scenarios`` (none: the set shipped with the project), sampled as ``sample`` says."""
    key = "category" if study == "safety" else "scenario_type"
    chosen = sample_scenarios(read_scenarios(study, scenarios[0] if scenarios else None), sample.size(study),
                              sample.seed, key)  # fmt: skip
    if study == "safety":
        items = [{"study": study, **item} for item in safety_items(chosen)]
        messages = safety_prompts(chosen, variant)
    else:
        items = [{"study": study, **item} for item in if_items(chosen)]
        messages = [_prompt(i["id"], study, variant, i["turns"]) for i in items]
    write_jsonl_atomic(Path(prompts), messages)
    write_jsonl_atomic(Path(study_items), items)
    return Done(f"{len(items)} items", subject=f"{study} ({variant})", out=Path(prompts))
