"""One benchmark item as the exports show it: what the model was given, what it answered and how that ended,
the metric components and S, the judge's score and evidence, and every flag, read from the results tree."""

from __future__ import annotations

import os
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.errors import DataError
from h2htalk.io import iter_jsonl
from h2htalk.layout import Cell, Layout

# The seven components of S and S (scoring.metrics.COLUMNS), named here so that the exports do not load the
# scoring stack (embedders, tokenizers); a test keeps the two equal.
COMPONENTS: tuple[str, ...] = ("bleu1", "bleu2", "bleu3", "bleu4", "rouge1", "rougeL", "ss")
COLUMNS: tuple[str, ...] = (*COMPONENTS, "S")
REVIEW = "review"  # the flag of an item the gate sends to people


def read_prompts(path: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """``id -> {system, user}`` of a subtask's rendered prompts (one variant)."""
    prompts = {}
    for number, record in iter_jsonl(path):
        roles = {message["role"]: message["content"] for message in record.get("messages", [])}
        if "user" not in roles:
            raise DataError(f"{path}: line {number}: a prompt without a user message")
        prompts[record["id"]] = {"system": roles.get("system", ""), "user": roles["user"]}
    return prompts


def read_references(path: str | os.PathLike[str]) -> dict[str, str]:
    """``id -> reference`` of a subtask's instances."""
    return {record["id"]: record["reference"] for _, record in iter_jsonl(path)}


def item_flags(generation: dict[str, Any], score: dict[str, Any], judged: dict[str, Any] | None) -> list[str]:
    """Every flag an item carries, once each: what generation flagged (reasoning without an answer, ...), what
    scoring flagged (an answer cut off at its token limit or failed, an empty one), what the judge flagged, and
    ``review`` when the gate sends the item to people."""
    flags = [*generation.get("flags", []), *score.get("flags", [])]
    if judged is not None:
        flags += [*judged.get("flags", []), *([REVIEW] if judged.get("review") else [])]
    return list(dict.fromkeys(flags))


def judge_part(judged: dict[str, Any]) -> dict[str, Any]:
    """What the judge (or the people who replaced it) said of one item, and what the gate did with it."""
    return {
        "score": judged["judge_score"],
        "judge_mean": judged["judge_mean"],
        "samples": judged["judge_scores"],
        "evidence": judged["judge_evidence"],
        "J5": judged["J5"],
        "J100": judged["J100"],
        "human": judged["human"] is not None,
        "review": judged["review"],
        "review_reasons": judged["review_reasons"],
    }


def answer_items(results: Layout, cell: Cell, judged: bool) -> list[dict[str, Any]]:
    """Every item of a scored cell (``cell.embedder`` set) in the order of its answers: the answer, how it ended,
    its reasoning, the metric components and S (None where unscored), the judge's part (``judged``: the cell's
    J items are read) and its flags."""
    generations = {record["id"]: record for _, record in iter_jsonl(results.generations(cell))}
    scores = {record["id"]: record for _, record in iter_jsonl(results.score_items(cell))}
    verdicts = {record["id"]: record for _, record in iter_jsonl(results.j_items(cell))} if judged else {}
    items = []
    for item_id, generation in generations.items():
        score = scores.get(item_id)
        if score is None:
            raise DataError(f"{results.score_items(cell)}: no score for item {item_id!r}")
        verdict = verdicts.get(item_id) if judged else None
        items.append({
            "id": item_id,
            "answer": generation["response"],
            "finish_reason": generation.get("finish_reason"),
            "failure": generation.get("failure"),
            "reasoning": generation.get("reasoning"),
            "tokens": {"prompt": generation.get("prompt_tokens"), "completion": generation.get("completion_tokens")},
            "latency_s": generation.get("latency_s"),
            "params": (generation.get("provenance") or {}).get("params"),
            "scores": {column: score.get(column) for column in COLUMNS},
            "judge": judge_part(verdict) if verdict else None,
            "flags": item_flags(generation, score, verdict),
        })  # fmt: skip
    return items


def item_files(run: RunCells, results: Layout) -> list[str]:
    """Every file the per-item exports read: each variant's prompts and each subtask's references, and each
    Table 2 cell's answers, scores and (judged cells) J items."""
    files = [results.prompts(v, s) for v in run.variants for s in run.subtasks]
    files += [results.references(run.variants[0], s) for s in run.subtasks]
    for cell in run.table2():
        files += [results.generations(cell), results.score_items(cell)]
        if run.is_judged(cell):
            files.append(results.j_items(cell))
    return list(dict.fromkeys(files))
