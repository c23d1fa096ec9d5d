"""Baseline "models" that answer without a language model, for calibrating what a score means.

- ``random_reference``: a seeded random reference of another item of the same subtask (never the item's own,
  and never a text identical to its own): the chance floor. A one-item set has no other reference: there is
  no answer to give (None, ``NO_ANSWER``), and the item is missing, not scored 0.
- ``majority_reference``: the most frequent reference of the subtask (ties: the first seen).
- ``echo_input``: the input text nearest to the reference (``echo_text``): every dialogue turn, the user's as
  well as the companion's, and every other field is tried. An input that gives its reference away, wherever
  it puts it, makes it score like the oracle; on honest inputs it sits near the floor.
- ``oracle``: the reference itself: the ceiling (100 by construction), and an end-to-end correctness check.

They write the same generation records as real models, so they pass through the same score and table path.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from h2htalk.instances.leaks import DIALOGUE, field_overlap
from h2htalk.subtasks import get_subtask

KINDS: tuple[str, ...] = ("random_reference", "majority_reference", "echo_input", "oracle")
ECHO_NGRAM = 4  # the leak check's default n-gram (instances.reconstruct.leak.ngram)
NO_ANSWER = {"random_reference": "a one-item set has no other item's reference to draw: no chance floor"}


def echo_text(instance: dict[str, Any]) -> str:
    """The input text that holds most of the reference (the leak check's per-text overlap, ``ECHO_NGRAM``-grams):
    each dialogue turn, the user's as well as the companion's, and each other field (a list of strings joined
    with 、). Ties, as on an input that holds none of it, go to the text nearest the answer's place: the
    companion's last line in a subtask with a dialogue (the user's last when the companion has none), else the
    longest field (the first of that length)."""
    candidates = _echo_candidates(instance)
    reference = instance["reference"]
    return max(candidates, key=lambda text: field_overlap(text, reference, ECHO_NGRAM).overlap)


def _echo_candidates(instance: dict[str, Any]) -> list[str]:
    """The input's texts, the one nearest the answer's place first."""
    fields = instance["fields"]
    texts = [_text(fields[name]) for name in get_subtask(instance["subtask"]).fields if name != DIALOGUE]
    if DIALOGUE not in fields:
        return sorted(texts, key=len, reverse=True)
    turns = fields[DIALOGUE]
    companion = [turn["text"] for turn in turns if turn["speaker"] == "companion"]
    first = companion[-1] if companion else turns[-1]["text"]
    return [first, *(turn["text"] for turn in reversed(turns)), *texts]


def _text(value: str | list[str]) -> str:
    return "、".join(value) if isinstance(value, list) else value


def baseline_responses(kind: str, instances: list[dict[str, Any]], seed: int, subtask: str) -> list[str | None]:
    """One response per instance, in order; None where the baseline has none to give (``NO_ANSWER[kind]``)."""
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
        responses: list[str | None] = []
        for index, instance in enumerate(instances):
            others = [
                j for j, other in enumerate(instances) if j != index and other["reference"] != instance["reference"]
            ]
            if not others:  # every other reference is identical: any other item is the best chance answer left
                others = [j for j in range(len(instances)) if j != index]
            responses.append(instances[rng.choice(others)]["reference"] if others else None)
        return responses
    raise ValueError(f"unknown baseline {kind!r}; known: {', '.join(KINDS)}")
