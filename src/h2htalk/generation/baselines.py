"""Baseline "models" that answer without a language model, for calibrating what a score means.

- ``random_reference``: a seeded random reference of another item of the same subtask (never the item's own,
  and never a text identical to its own): the chance floor.
- ``majority_reference``: the most frequent reference of the subtask (ties: the first seen).
- ``echo_input``: the last input text the model would see (the last dialogue turn, or the last field).
- ``oracle``: the reference itself: the ceiling (100 by construction), and an end-to-end correctness check.

They write the same generation records as real models, so they pass through the same score and table path.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from h2htalk.subtasks import get_subtask

KINDS: tuple[str, ...] = ("random_reference", "majority_reference", "echo_input", "oracle")


def last_input_text(instance: dict[str, Any]) -> str:
    fields = instance["fields"]
    name = get_subtask(instance["subtask"]).fields[-1]
    value = fields[name]
    if name == "history_dialogues":
        users = [turn["text"] for turn in value if turn["speaker"] == "user"]
        return users[-1] if users else value[-1]["text"]
    if isinstance(value, list):
        return "、".join(value)
    return value


def baseline_responses(kind: str, instances: list[dict[str, Any]], seed: int, subtask: str) -> list[str]:
    """One response per instance, in order."""
    if kind == "oracle":
        return [i["reference"] for i in instances]
    if kind == "echo_input":
        return [last_input_text(i) for i in instances]
    if kind == "majority_reference":
        counts = Counter(i["reference"] for i in instances)
        best = max(counts.values()) if counts else 0
        majority = next(i["reference"] for i in instances if counts[i["reference"]] == best) if instances else ""
        return [majority] * len(instances)
    if kind == "random_reference":
        rng = random.Random(f"{seed}:{subtask}")
        responses = []
        for index, instance in enumerate(instances):
            others = [
                j for j, other in enumerate(instances) if j != index and other["reference"] != instance["reference"]
            ]
            if not others:  # every other reference is identical: any other item is the best chance answer left
                others = [j for j in range(len(instances)) if j != index]
            responses.append(instances[rng.choice(others)]["reference"] if others else "")
        return responses
    raise ValueError(f"unknown baseline {kind!r}; known: {', '.join(KINDS)}")
