"""Baseline "models" that answer without a language model, for calibrating what a score means.

- ``random_reference``: a seeded random reference of another item of the same subtask (never the item's own,
  and never a text identical to its own): the chance floor.
- ``majority_reference``: the most frequent reference of the subtask (ties: the first seen).
- ``echo_input``: the input text nearest to where the answer goes, chosen without seeing the reference
  (``echo_text``). An input that gives its reference away makes it score like the oracle; on honest inputs it
  sits near the floor.
- ``oracle``: the reference itself: the ceiling (100 by construction), and an end-to-end correctness check.

They write the same generation records as real models, so they pass through the same score and table path.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from h2htalk.subtasks import get_subtask

KINDS: tuple[str, ...] = ("random_reference", "majority_reference", "echo_input", "oracle")
DIALOGUE = "history_dialogues"  # the one field made of turns


def echo_text(instance: dict[str, Any]) -> str:
    """The input text nearest to the answer's place, by the subtask's fields alone: in a subtask with a dialogue
    (DialogueBase, DialogueEmotion, DialogueSchedule, RecollectionSynthesis) the companion's last line, where a
    copied answer would sit (the user's last line when the companion has none); otherwise the longest field,
    the one with the most of what an answer could take up (a list of strings joined with 、; the first field of
    that length)."""
    fields = instance["fields"]
    if DIALOGUE in fields:
        turns = fields[DIALOGUE]
        companion = [turn["text"] for turn in turns if turn["speaker"] == "companion"]
        return companion[-1] if companion else turns[-1]["text"]
    texts = [_text(fields[name]) for name in get_subtask(instance["subtask"]).fields]
    return max(texts, key=len)


def _text(value: str | list[str]) -> str:
    return "、".join(value) if isinstance(value, list) else value


def baseline_responses(kind: str, instances: list[dict[str, Any]], seed: int, subtask: str) -> list[str]:
    """One response per instance, in order."""
    if kind == "oracle":
        return [i["reference"] for i in instances]
    if kind == "echo_input":
        return [echo_text(i) for i in instances]
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
