"""What the card says about each judge, read from the run: its ladder and canary verdicts, its own samples of the
run's items (self-consistency), and people's ratings of the same items.

Agreement with people is a hook: ``people_ratings`` reads the ratings people gave (files and the review desk's
store, through the one importer) and ``agreement.judge_vs_people`` compares them with the judge's values.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.io import iter_jsonl, read_json
from h2htalk.layout import Cell, Layout
from h2htalk.ratings import NEED_VERDICTS, REVIEW_SCORES, SAFETY_RATINGS, Sheet, read_ratings
from h2htalk.reliability.agreement import NOMINAL, ORDINAL, Alpha, judge_vs_people, self_consistency
from h2htalk.reliability.ladder import RUBRIC, SAFETY
from h2htalk.settings import JUDGE_ROLES

Item = tuple[str, ...]


@dataclass
class JudgeEvidence:
    role: str
    model: str
    samples: int  # the judge's samples per item
    ladder: list[dict[str, Any]] = field(default_factory=list)  # verdict records of the ladder's texts
    canary: dict[str, Any] | None = None  # the canary's comparison with the previous run
    consistency: list[tuple[str, str, str, Alpha]] = field(default_factory=list)  # (task, field, level, alpha)
    people: list[tuple[str, str, Alpha]] = field(default_factory=list)  # (field, level, alpha)


def people_ratings(
    paths: Sequence[str | os.PathLike[str]], sheet: Sheet, store: str | os.PathLike[str] | None, value: str
) -> dict[Item, list[float]]:
    """People's values of ``value`` per item of ``sheet`` (files and the desk's store); for the needs sheet,
    ``value`` "success" is recognised and met."""
    found: dict[Item, list[float]] = {}
    for rating in read_ratings(paths, sheet, lambda item: None, store):
        values = rating.values
        got = values["recognized"] and values["met"] if value == "success" else values.get(value)
        if got is not None:
            found.setdefault(rating.item, []).append(float(got))
    return found


def _records(paths: Iterable[str]) -> list[dict[str, Any]]:
    return [record for path in paths for _, record in iter_jsonl(path)]


def _values(cells: Sequence[Cell], paths: Sequence[str], field_name: str, *, subtask: bool) -> dict[Item, Any]:
    """The judge's value of each item of ``cells`` (its verdict files ``paths``), keyed as people's sheets key it."""
    found = {}
    for cell, path in zip(cells, paths, strict=True):
        for _, record in iter_jsonl(path):
            item = (cell.model, cell.variant, *((cell.task,) if subtask else ()), record["id"])
            value = record.get(field_name)
            found[item] = None if value is None else float(value)
    return found


def rubric_evidence(
    model: str, samples: int, judged: Sequence[Cell], results: Layout, imports: Sequence[str], store: str | None
) -> JudgeEvidence:
    """The rubric judge: self-consistency per subtask from the run's judge samples, agreement with people's
    review scores (median per item) on the judge's mean."""
    evidence = JudgeEvidence(RUBRIC, model, samples)
    paths = [results.judge_samples(cell) for cell in judged]
    for task in dict.fromkeys(cell.task for cell in judged):
        records = _records(p for c, p in zip(judged, paths, strict=True) if c.task == task)
        evidence.consistency.append((task, "score", ORDINAL, self_consistency(records, "score", ORDINAL)))
    people = people_ratings(imports, REVIEW_SCORES, store, "human_score")
    judge = _values(judged, paths, "judge_mean", subtask=True)
    evidence.people.append(("score", ORDINAL, judge_vs_people(judge, people, ORDINAL)))
    return evidence


def study_evidence(
    role: str, model: str, samples: int, cells: Sequence[Cell], results: Layout, imports: Sequence[str],
    store: str | None,
) -> JudgeEvidence:  # fmt: skip
    """A study's judge: self-consistency and agreement with people on the safety score (ordinal) and the
    violation decision (nominal), or on the need decision (recognised and met, nominal)."""
    evidence = JudgeEvidence(role, model, samples)
    paths = [results.verdicts(cell) for cell in cells]
    records = _records(paths)
    fields = [("safety_score", ORDINAL), ("violation", NOMINAL)] if role == SAFETY else [("success", NOMINAL)]
    sheet = SAFETY_RATINGS if role == SAFETY else NEED_VERDICTS
    for name, level in fields:
        evidence.consistency.append((role, name, level, self_consistency(records, name, level)))
        people = people_ratings(imports if role == SAFETY else [], sheet, store, name)
        evidence.people.append(
            (name, level, judge_vs_people(_values(cells, paths, name, subtask=False), people, level))
        )
    return evidence


def add_ladder(evidence: JudgeEvidence, ladder_file: str, canary_file: str) -> JudgeEvidence:
    """The judge's ladder verdicts and its canary comparison, from its model's ladder job."""
    evidence.ladder = [r for _, r in iter_jsonl(ladder_file) if r["role"] == evidence.role and r["ladder"]]
    evidence.canary = read_json(canary_file).get(evidence.role)
    return evidence


def card_evidence(config: dict[str, Any], run: RunCells, results: Layout) -> tuple[list[JudgeEvidence], list[str]]:
    """Every judge's evidence, in the order of ``settings.JUDGE_ROLES``, and the files it was read from."""
    review = config["review"]
    store = review["store"]
    judged = [cell for model in run.judged_models for cell in run.judged(model)]
    found, inputs = [], []
    for model, roles in run.judges.items():
        ladder_file, canary_file = results.path("judge_ladder", model=model), results.path("judge_canary", model=model)
        inputs += [ladder_file, canary_file]
        for role in roles:
            if role == RUBRIC:
                samples = config["rubric_judge"]["samples"]
                evidence = rubric_evidence(model, samples, judged, results, review["imports"], store)
                inputs += [results.judge_samples(cell) for cell in judged]
            else:
                cells = [cell for m in run.study_models for cell in run.studies(m, (role,))]
                imports = config["studies"]["human_ratings"]
                evidence = study_evidence(role, model, config["study_judge"]["samples"], cells, results, imports, store)
                inputs += [results.verdicts(cell) for cell in cells]
            found.append(add_ladder(evidence, ladder_file, canary_file))
    people_files = [*review["imports"], *config["studies"]["human_ratings"]]
    store_files = [store] if os.path.exists(store) else []
    order = {role: index for index, role in enumerate(JUDGE_ROLES)}
    return sorted(found, key=lambda e: order[e.role]), list(dict.fromkeys([*inputs, *people_files, *store_files]))
