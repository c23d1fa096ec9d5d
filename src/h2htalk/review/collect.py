"""The desk's items, read from the results tree: what each rater is shown, and what is hidden until they rate.

Each item shows what the model was shown, except what would tell the variant: the system prompt without the
SAP layer (the persona, or the neutral task line), the task or the conversation so far (the one this model
made, for the safety study), and the answer. Beside it, what the rater judges by:

- gated Level I-III plans (the J items the review gate sent to people): the rubric, the level's rules and the
  reference answer, as the judge had them;
- safety turns (every judged turn of the safety study): the study's definitions of safety perception and of
  a violation with its categories; no reference, since the paper's safety scores are the users' perception;
- instruction following (every judged item): the user's unspoken need, as the need judge had it;
- reconstructed instances the vote did not settle: the reconstructed fields, the task they render to, the
  subtask's fields with what each holds, and the reference they were made from.

The model, the variant and the item's key are never shown; the judge's verdict (or the voters') is shown
once the rater has rated.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.desk_store.store import DeskItem
from h2htalk.desk_store.tasks import GATED, INSTANCE, NEED, SAFETY
from h2htalk.errors import DataError
from h2htalk.io import iter_jsonl, read_csv
from h2htalk.judge.combine import reviewed_verdict
from h2htalk.judge.rubric import system_text
from h2htalk.judge.study import judge_system
from h2htalk.layout import Cell, Layout
from h2htalk.prompts.render import render_instance, sap_text
from h2htalk.settings import WITHOUT_SAP
from h2htalk.subtasks import field_catalogue, get_subtask


def blind_system(system: str) -> str:
    """The system prompt as both variants share it: without the SAP layer, which would tell the variant."""
    return system.removesuffix(f"\n\n{sap_text()}")


def section(text: str, heading: str) -> str:
    """The paragraph of a judge's instructions that starts with ``heading`` (such as 【评分细则】)."""
    found = [part.strip() for part in text.split("\n\n") if part.strip().startswith(heading)]
    if len(found) != 1:
        raise DataError(f"the judge's instructions have {len(found)} paragraphs starting with {heading}")
    return found[0]


def _present(paths: list[str], what: str) -> bool:
    """Whether the results for a task are there: all of them (True) or none (False); some is an error."""
    missing = [p for p in paths if not os.path.exists(p)]
    if missing and len(missing) < len(paths):
        raise DataError(f"{what}: {len(missing)} of {len(paths)} result files are missing, e.g. {missing[0]}")
    return bool(paths) and not missing


def _by_id(path: str) -> dict[str, dict[str, Any]]:
    return {record["id"]: record for _, record in iter_jsonl(path)}


def gated_items(run: RunCells, results: Layout) -> list[DeskItem]:
    cells = [c.scored_by(run.embedder) for m in run.judged_models for c in run.judged(m)]
    if not _present([results.j_items(c) for c in cells], "gated items"):
        return []
    rubric = section(system_text(), "【评分细则】")
    items = []
    for cell in cells:
        prompts = _by_id(results.prompts(cell.variant, cell.task))
        rules = get_subtask(cell.task).judge
        for _, item in iter_jsonl(results.j_items(cell)):
            if not item["review"]:
                continue
            shown = {
                "rubric": rubric, "level": rules, "system": blind_system(prompts[item["id"]]["messages"][0]["content"]),
                "task": item["task"], "answer": item["response"], "reference": item["reference"],
            }  # fmt: skip
            verdict = reviewed_verdict(item)  # in cascade mode the role's own judge's, which gated it
            after = {
                "judge_scores": verdict["judge_scores"], "judge_mean": verdict["judge_mean"],
                "judge_evidence": verdict["judge_evidence"], "S": item["S"], "reasons": item["review_reasons"],
            }  # fmt: skip
            items.append(DeskItem(GATED, (cell.model, cell.variant, cell.task, item["id"]), shown, after))
    return items


def _study_cells(run: RunCells, study: str) -> list[Cell]:
    return [c for m in run.study_models for c in run.studies(m, (study,))]


def _study_records(run: RunCells, results: Layout, study: str) -> Iterable[tuple[Cell, dict, dict, dict, str]]:
    """(cell, verdict, generation, item, blind system prompt) of every judged answer of a study."""
    cells = _study_cells(run, study)
    if not _present([results.verdicts(c) for c in cells], f"{study} verdicts"):
        return
    for cell in cells:
        generations, items = _by_id(results.generations(cell)), _by_id(results.references(cell.variant, study))
        system = blind_system(next(iter_jsonl(results.prompts(cell.variant, study)))[1]["messages"][0]["content"])
        for _, verdict in iter_jsonl(results.verdicts(cell)):
            if "unanswered" not in verdict["flags"]:
                yield cell, verdict, generations[verdict["id"]], items[verdict["id"]], system


def safety_items(run: RunCells, results: Layout) -> list[DeskItem]:
    definitions = judge_system("safety")
    guide = {"score": section(definitions, "【安全感】"), "violation": section(definitions, "【违规】")}
    items = []
    for cell, verdict, generation, item, system in _study_records(run, results, "safety"):
        shown = {
            "guide": guide, "system": system, "conversation": generation.get("conversation") or item["turns"],
            "answer": generation["response"],
        }  # fmt: skip
        after = {k: verdict[k] for k in ("safety_score", "violation", "violation_category")}
        items.append(DeskItem(SAFETY, (cell.model, cell.variant, verdict["id"]), shown, after))
    return items


def need_items(run: RunCells, results: Layout) -> list[DeskItem]:
    items = []
    for cell, verdict, generation, item, system in _study_records(run, results, "instruction_following"):
        shown = {
            "system": system, "conversation": item["turns"], "answer": generation["response"], "need": item["need"],
        }  # fmt: skip
        after = {
            "success": verdict["success"],
            "samples": [{k: s[k] for k in ("recognized", "met", "evidence")} for s in verdict["samples"]],
        }
        items.append(DeskItem(NEED, (cell.model, cell.variant, verdict["id"]), shown, after))
    return items


def instance_items(config: dict[str, Any], run: RunCells, results: Layout) -> list[DeskItem]:
    if config["instances"]["source"] != "reconstructed":
        return []
    files = [results.path("instance_review", subtask=s) for s in run.subtasks]
    if not _present(files, "instances in review"):
        return []
    catalogue = field_catalogue()
    help_of = {s: {name: catalogue[name]["describe"] for name in get_subtask(s).fields} for s in run.subtasks}
    items = []
    for path in files:
        for row in read_csv(path):
            fields = json.loads(row["fields"]) if row["fields"] else None
            instance = {"id": row["id"], "subtask": row["subtask"], "fields": fields or {}}
            try:
                rendered = render_instance(instance, WITHOUT_SAP)
                task, system = rendered.user, rendered.system
            except DataError:  # a failed reconstruction: no fields to render
                task, system = None, None
            shown = {
                "id": row["id"], "subtask": row["subtask"], "instruction": get_subtask(row["subtask"]).reconstruction,
                "fields": fields, "field_help": help_of[row["subtask"]], "system": system, "task": task,
                "reference": row["reference"],
            }  # fmt: skip
            after = {k: row[k] for k in ("status", "votes", "reasons")}
            items.append(DeskItem(INSTANCE, (row["id"],), shown, after))
    return items


def desk_items(config: dict[str, Any], results: Layout, tasks: Iterable[str]) -> dict[str, list[DeskItem]]:
    """task -> its items in the results tree (none where the run has not made them)."""
    run = RunCells(config)
    collect = {
        GATED: lambda: gated_items(run, results),
        SAFETY: lambda: safety_items(run, results),
        NEED: lambda: need_items(run, results),
        INSTANCE: lambda: instance_items(config, run, results),
    }
    return {task: collect[task]() for task in tasks}
