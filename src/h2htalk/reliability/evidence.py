"""What the card says about each judge, read from the run: its ladder and canary verdicts, its own samples of the
run's items (self-consistency), and its agreement with people where they rated the same items: the judge-vs-people
rows of the agreement report (``paper_figures/agreement.csv``, ``h2htalk.tables.human_review``)."""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.io import iter_jsonl, read_json
from h2htalk.layout import Layout
from h2htalk.people.agreement import JUDGE_VS_PEOPLE
from h2htalk.reliability.agreement import NOMINAL, ORDINAL, Alpha, self_consistency
from h2htalk.reliability.ladder import NEEDS, RUBRIC, SAFETY
from h2htalk.settings import JUDGE_ROLES
from h2htalk.tables.human_review import ALL_JUDGED
from h2htalk.tables.human_review import COLUMNS as AGREEMENT_COLUMNS

# The agreement report's scopes of each judge's rows (the rubric judge's: its judged subtasks and all of them).
PEOPLE_SCOPES = {SAFETY: ("safety",), NEEDS: ("instruction following",)}


@dataclass
class JudgeEvidence:
    role: str
    model: str
    samples: int  # the judge's samples per item
    ladder: list[dict[str, Any]] = field(default_factory=list)  # verdict records of the ladder's texts
    canary: dict[str, Any] | None = None  # the canary's comparison with the previous run
    consistency: list[tuple[str, str, str, Alpha]] = field(default_factory=list)  # (task, field, level, alpha)
    people: list[dict[str, Any]] | None = None  # the agreement report's judge-vs-people rows; None: no report


def consistency(role: str, records: Sequence[dict[str, Any]]) -> list[tuple[str, str, Alpha]]:
    """Self-consistency of ``role``'s judge over its verdict records of one task, (field, level, alpha): the rubric
    score (ordinal); the safety score (ordinal) and the violation (nominal); the need recognised and met."""
    fields = {RUBRIC: [("score", ORDINAL)], SAFETY: [("safety_score", ORDINAL), ("violation", NOMINAL)]}
    return [
        (name, level, self_consistency(records, name, level))
        for name, level in fields.get(role, [("success", NOMINAL)])
    ]


def add_ladder(evidence: JudgeEvidence, ladder_file: str, canary_file: str) -> JudgeEvidence:
    """The judge's ladder verdicts and its canary comparison, from its model's ladder job."""
    evidence.ladder = [r for _, r in iter_jsonl(ladder_file) if r["role"] == evidence.role and r["ladder"]]
    evidence.canary = read_json(canary_file).get(evidence.role)
    return evidence


def read_agreement(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The agreement report's rows (its CSV), numbers read back; no report: no rows."""
    if not os.path.exists(path):
        return []
    numbers = {"value": float, "value_ci_low": float, "value_ci_high": float, "items": int, "ratings": int}
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [
        {column: (numbers[column](row[column]) if row[column] else None) if column in numbers else row[column]
         for column in AGREEMENT_COLUMNS}
        for row in rows
    ]  # fmt: skip


def people_rows(rows: Sequence[dict[str, Any]], role: str, judged_subtasks: Sequence[str]) -> list[dict[str, Any]]:
    """The judge-vs-people rows of the agreement report that are about ``role``'s judge."""
    scopes = PEOPLE_SCOPES.get(role) or (*judged_subtasks, ALL_JUDGED)
    return [row for row in rows if row["comparison"] == JUDGE_VS_PEOPLE and row["scope"] in scopes]


def verdict_files(run: RunCells, results: Layout, role: str) -> dict[str, list[str]]:
    """Task -> the files of the judge's verdicts on the run's items: the rubric judge's samples per judged subtask
    (every judged model and variant), or a study's verdicts."""
    if role == RUBRIC:
        judged = [cell for model in run.judged_models for cell in run.judged(model)]
        return {task: [results.judge_samples(c) for c in judged if c.task == task] for task in run.judged_subtasks}
    return {role: [results.verdicts(c) for m in run.study_models for c in run.studies(m, (role,))]}


def card_evidence(
    config: dict[str, Any], run: RunCells, results: Layout, agreement_file: str | os.PathLike[str]
) -> tuple[list[JudgeEvidence], list[str]]:
    """Every judge's evidence, in the order of ``settings.JUDGE_ROLES``, and the files it was read from."""
    report = os.path.exists(agreement_file)
    agreement = read_agreement(agreement_file) if report else []
    found, inputs = [], ([str(agreement_file)] if report else [])
    for model, roles in run.judges.items():
        ladder_file, canary_file = results.path("judge_ladder", model=model), results.path("judge_canary", model=model)
        inputs += [ladder_file, canary_file]
        for role in roles:
            samples = config["rubric_judge" if role == RUBRIC else "study_judge"]["samples"]
            evidence = JudgeEvidence(role, model, samples)
            for task, paths in verdict_files(run, results, role).items():
                records = [record for path in paths for _, record in iter_jsonl(path)]
                evidence.consistency += [(task, *found) for found in consistency(role, records)]
                inputs += paths
            evidence.people = people_rows(agreement, role, run.judged_subtasks) if report else None
            found.append(add_ladder(evidence, ladder_file, canary_file))
    order = {role: index for index, role in enumerate(JUDGE_ROLES)}
    return sorted(found, key=lambda e: order[e.role]), list(dict.fromkeys(inputs))
