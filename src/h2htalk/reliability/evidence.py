"""What the card says about each judge, read from the run: its ladder and canary verdicts, its own samples of the
run's items (self-consistency), and its agreement with people where they rated the same items: the judge-vs-people
rows of the agreement report (``paper_figures/agreement.csv``, ``h2htalk.tables.human_review``)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.io import iter_jsonl, read_csv, read_json
from h2htalk.layout import Cell, Layout
from h2htalk.people.agreement import ALL_JUDGED, JUDGE_VS_PEOPLE
from h2htalk.people.agreement import COLUMNS as AGREEMENT_COLUMNS
from h2htalk.reliability.agreement import NOMINAL, ORDINAL, Alpha, self_consistency
from h2htalk.reliability.judge_pairs import Item, JudgeVerdicts, judge_verdicts
from h2htalk.reliability.ladder import NEEDS, RUBRIC, SAFETY
from h2htalk.settings import JUDGE_ROLES, JUDGE_SECTIONS, JudgeMode, ladder_part

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
    rows = read_csv(path)
    return [
        {column: (numbers[column](row[column]) if row[column] else None) if column in numbers else row[column]
         for column in AGREEMENT_COLUMNS}
        for row in rows
    ]  # fmt: skip


def people_rows(rows: Sequence[dict[str, Any]], role: str, judged_subtasks: Sequence[str]) -> list[dict[str, Any]]:
    """The judge-vs-people rows of the agreement report that are about ``role``'s judge."""
    scopes = PEOPLE_SCOPES.get(role) or (*judged_subtasks, ALL_JUDGED)
    return [row for row in rows if row["comparison"] == JUDGE_VS_PEOPLE and row["scope"] in scopes]


def role_cells(run: RunCells, role: str) -> list[Cell]:
    """The cells a role's judge judges: every judged model's Level I-III cells, or a study's."""
    if role == RUBRIC:
        return [cell for model in run.judged_models for cell in run.judged(model)]
    return [cell for model in run.study_models for cell in run.studies(model, (role,))]


def verdict_file(results: Layout, cell: Cell, sample: bool) -> str:
    """A cell's verdicts by the judge of every item, or (``sample``) by the role's own judge on the cascade's
    sample."""
    if sample:
        return results.judge_sample(cell)
    return results.verdicts(cell) if cell.is_study else results.judge_samples(cell)


def verdict_files(run: RunCells, results: Layout, role: str, own_sample: bool = False) -> dict[str, list[str]]:
    """Task -> the files of the judge's verdicts on the run's items: the rubric judge's samples per judged subtask
    (every judged model and variant), or a study's verdicts; ``own_sample``: the own judge's on the cascade's
    sample."""
    cells = role_cells(run, role)
    tasks = run.judged_subtasks if role == RUBRIC else (role,)
    return {task: [verdict_file(results, c, own_sample) for c in cells if c.task == task] for task in tasks}


ON_SAMPLE, ON_LADDER = "the cascade's sample", "the ladder's texts"  # where two judges met
Meeting = tuple[str, JudgeVerdicts, JudgeVerdicts, str]  # (role, the other judge's, the own judge's, where)


def ladder_meetings(evidence: Sequence[JudgeEvidence], config: dict[str, Any]) -> list[Meeting]:
    """Each role's own judge against every other judge with a ladder in that role (the cascade's cheap judge, the
    panel's judges), on the ladder's texts (their records in ``evidence``): the rungs stand where the models stand
    on the cascade's sample."""
    found = []
    for role in JUDGE_ROLES:
        own = config[JUDGE_SECTIONS[role]]["model"]
        judged = {e.model: ladder_verdicts(e) for e in evidence if e.role == role and e.ladder}
        if own in judged:
            found += [(role, verdicts, judged[own], ON_LADDER) for model, verdicts in judged.items() if model != own]
    return found


def ladder_verdicts(evidence: JudgeEvidence) -> JudgeVerdicts:
    """A judge's ladder verdicts as judge against judge reads them: each text an item, its rung where a model
    stands."""
    items = {(r["rung"], "", r["task"], r["item"]): r for r in evidence.ladder}
    samples = {item: [s["value"] for s in r["samples"]] for item, r in items.items()}
    return JudgeVerdicts(evidence.model, {item: r["value"] for item, r in items.items()}, samples)


def cascades(config: dict[str, Any], run: RunCells, results: Layout) -> list[Meeting]:
    """Each role in cascade mode that the run has work for (``RunCells.judged_roles``) with its two judges' verdicts,
    (role, the cheap judge's, the own judge's, where): both judged every item of the cascade's sample."""
    found = []
    for role in run.judged_roles:
        mode = JudgeMode.from_config(config, JUDGE_SECTIONS[role])
        if not mode.cascade:
            continue
        cells = role_cells(run, role)

        def records(sample: bool, cells: list[Cell] = cells) -> Iterator[tuple[Item, dict[str, Any]]]:
            for c in cells:
                path = verdict_file(results, c, sample)
                yield from (((c.model, c.variant, c.task, r["id"]), r) for _, r in iter_jsonl(path))

        cheap = judge_verdicts(mode.cheap_model, role, records(False))
        found.append((role, cheap, judge_verdicts(mode.model, role, records(True)), ON_SAMPLE))
    return found


def card_evidence(
    config: dict[str, Any], run: RunCells, results: Layout, agreement_file: str | os.PathLike[str]
) -> tuple[list[JudgeEvidence], list[str]]:
    """Every judge's evidence, in the order of ``settings.JUDGE_ROLES``, and the files it was read from."""
    report = os.path.exists(agreement_file)
    agreement = read_agreement(agreement_file) if report else []
    found, inputs = [], ([str(agreement_file)] if report else [])
    for model, roles in run.ladder_judges.items():
        for role in roles:
            part = ladder_part(role)
            ladder_file = results.path("judge_ladder", model=model, part=part)
            canary_file = results.path("judge_canary", model=model, part=part)
            inputs += [path for path in (ladder_file, canary_file) if path not in inputs]
            section, mode = config[JUDGE_SECTIONS[role]], JudgeMode.from_config(config, JUDGE_SECTIONS[role])
            own_sample = mode.cascade and model == mode.model  # it judged the sample only
            evidence = JudgeEvidence(role, model, section["samples"])
            judged = verdict_files(run, results, role, own_sample) if role in run.judges.get(model, ()) else {}
            for task, paths in judged.items():  # a panel's judge judged the ladder only
                # only the samples: a record's texts (prompt, answer, reference) would be held for every item
                records = [{"samples": record["samples"]} for path in paths for _, record in iter_jsonl(path)]
                evidence.consistency += [(task, *found) for found in consistency(role, records)]
                inputs += paths
            evidence.people = people_rows(agreement, role, run.judged_subtasks) if report and judged else None
            found.append(add_ladder(evidence, ladder_file, canary_file))
    order = {role: index for index, role in enumerate(JUDGE_ROLES)}
    return sorted(found, key=lambda e: order[e.role]), list(dict.fromkeys(inputs))
