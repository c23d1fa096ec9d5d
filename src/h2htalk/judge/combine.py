"""Combine metrics and judge into J, apply the human-review gate, and import human scores.

Scale: J_judge is on 0-5 and S on 0-100, so S is put on 0-5 first (S/20):

    J = alpha * (S / 20) + (1 - alpha) * J_judge        (0-5; alpha = 0.6 in the paper)

Two names keep the two scales apart: ``J5`` is J on 0-5 (what tau gates), ``J100`` = 20 * J5 is J on S's 0-100
scale (what summaries and tables report). An item goes to human review when J5 < tau (3.5 on 0-5),
when its judge samples spread by more than ``max_spread``, or when the judge's answer could not be parsed
(its J is then missing, never 0), and never when it has no S (an empty answer left unscored,
``scoring.empty_answers: skip``: there is nothing a reviewer could change). People's scores (filled-in review
queues and the review desk's store; an item's score is the median of its raters) do one of two things
(``review.mode``):

- gate (the paper's): an item's score from people replaces the judge's mean for that item, recorded with where
  it came from; the cell's mean mixes people's and the judge's scores.
- sample: people score a seeded random sample of each cell (``review.sample_per_cell`` of the items that have a
  J), and the cell's mean is the judge's over all those items corrected by the mean people-minus-judge
  difference on the sample, with an interval that accounts for both (``h2htalk.people.prediction_powered``).
  Only the sample goes to the review queue, and only the sample's scores enter the correction (a score of
  another item is counted, not used: a hand-picked item would bias it).

In cascade mode (``rubric_judge.mode``) the judge of every item is the cheap one, and the role's own judge scores
a seeded sample of each cell (``h2htalk.judge.cascade``); J and judge are then the cheap judge's cell mean
corrected by the own judge's on the sample, by the same estimator. Every item with an S stays in its cell: an
unreadable cheap verdict is predicted by a fixed stand-in (``cheap_stand_in``), and a sampled item's own judge's
verdict is used whatever the cheap judge said. People compose with it: in gate mode the gate is full mode's, on the
own judge's verdicts of the sample (what the cheap judge says, biased or not, never chooses what people rate), and
a person's score replaces the own judge's there; in sample mode people's sample is drawn within the own judge's,
and corrects it there first (``Correction``). Each corrected cell's items
carry pseudo-values (``ppi``) whose mean is the corrected mean, for Table 2's paired comparisons.

The paper does not say how Eq. 3 mixes S (0-100) with a judge score (0-5), so a judged cell's summary carries
three readings of it, each with its CI: ``J`` (J100 above), ``S`` (the metric alone) and ``judge`` (the judge's
score x 20). Its ``value`` is J; Table 2 shows the reading ``tables.judged_cell`` names, so switching it
reruns neither the judge nor this stage. People's scores enter J and judge (``PEOPLE_READINGS``), never S: in
sample mode J moves by (1 - alpha) * 20 * mean(people - judge) and judge by 20 * mean(people - judge).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h2htalk.cells import RunCells
from h2htalk.errors import DataError
from h2htalk.io import iter_jsonl, write_json_atomic, write_jsonl_atomic
from h2htalk.judge.readings import READINGS, item_readings
from h2htalk.layout import Cell, Layout
from h2htalk.people.consensus import consensus, median_score
from h2htalk.ratings import REVIEW_SCORES, Rating, read_ratings
from h2htalk.settings import (
    CASCADE_MODE,
    FULL_MODE,
    GATE,
    PEOPLE_READINGS,
    SAMPLE,
    BootstrapSettings,
    GateSettings,
    JudgeMode,
    ReviewSettings,
)
from h2htalk.stages import declared
from h2htalk.stages.declare import stage
from h2htalk.stages.spec import Done, Each, EachFile, Over

if TYPE_CHECKING:  # numpy, scipy and the metric libraries, imported when a job runs, not when the registry loads
    import numpy as np

    from h2htalk.people.prediction_powered import Estimate

SAMPLED = "sampled for review (review.mode sample)"


def combine_j(s_score: float, judge_score: float, alpha: float) -> float:
    """J5 (J on 0-5) from S (0-100) and the judge (0-5)."""
    return alpha * (s_score / 20.0) + (1.0 - alpha) * judge_score


def review_reasons(j5: float | None, judge_score: float | None, spread: float | None, gate: GateSettings) -> list[str]:
    """Why an item goes to human review: no usable judge answer, the gated score below tau (J5, or the judge's
    own score: ``gate.gate_on``), or judge samples that disagree."""
    reasons = []
    if j5 is None:
        reasons.append("judge answer unparseable")
    elif gate.gate_on == "J" and j5 < gate.tau:
        reasons.append(f"J5 {j5:.2f} < tau {gate.tau}")
    elif gate.gate_on == "judge" and judge_score is not None and judge_score < gate.tau:
        reasons.append(f"judge {judge_score:.2f} < tau {gate.tau}")
    if spread is not None and spread > gate.max_spread:
        reasons.append(f"judge samples spread {spread:.1f} > {gate.max_spread}")
    return reasons


HumanScores = dict[tuple[str, str, str, str], dict[str, Any]]


def read_human_scores(
    paths: Sequence[str | os.PathLike[str]],
    cells: Sequence[Cell],
    results: Layout,
    judged_models: Collection[str],
    store: str | os.PathLike[str] | None = None,
) -> HumanScores:
    """Scores people gave in filled-in review queues and at the review desk (``store``) for the items of
    ``cells`` (one model's judged cells): (model, variant, subtask, id) -> the median of the item's raters, and
    each rating. Every rating must name an item of this run: a judged model, a judged cell, and, for this model,
    an item it was judged on."""
    model = cells[0].model
    judged = {(c.model, c.variant, c.task, r["id"]) for c in cells for _, r in iter_jsonl(results.judge_samples(c))}
    cell_names = {(c.variant, c.task) for c in cells}

    def check(item: tuple[str, ...]) -> str | None:
        if item[0] not in judged_models:
            return f"model {item[0]!r} is not judged in this run"
        if (item[1], item[2]) not in cell_names:
            return f"{item[1]}/{item[2]} is not a judged cell of this run"
        if item[0] == model and item not in judged:
            return f"item {item[3]!r} of {'/'.join(item[:3])} was not judged"
        return None

    return human_scores(read_ratings(paths, REVIEW_SCORES, check, store), model)


def human_scores(ratings: Iterable[Rating], model: str) -> HumanScores:
    """People's review scores of ``model``'s items: (model, variant, subtask, id) -> the median of the item's
    raters, and each rating."""
    found = consensus((r for r in ratings if r.item[0] == model), "human_score", median_score)
    return {
        item: {"score": c.value, "ratings": [{**r.source(), "score": r.values["human_score"]} for r in c.ratings]}
        for item, c in found.items()
    }


def combine_items(
    model: str,
    variant: str,
    subtask: str,
    score_items: Path,
    judgments: Path,
    gate: GateSettings,
    human: HumanScores,
    review: ReviewSettings,
    sample_verdicts: Path | None = None,
) -> list[dict[str, Any]]:
    """J of every judged item, its review flag and people's score. In gate mode ``J5`` uses people's score
    where there is one; in sample mode ``J5`` is always the judge's and ``J5_people`` holds people's. In cascade
    mode ``judgments`` are the cheap judge's, and ``sample_verdicts`` the role's own judge's on the cascade's
    sample (``J5_strong``: J with its score, or people's in gate mode; people's sample is then drawn within it)."""
    records = CellRecords(
        {r["id"]: r for _, r in iter_jsonl(score_items)},
        list(iter_jsonl(judgments)),
        {v["id"]: v for _, v in iter_jsonl(sample_verdicts)} if sample_verdicts else None,
        str(judgments),
    )
    return combine_records(model, variant, subtask, records, gate, human, review)


@dataclass(frozen=True)
class CellRecords:
    """What a judged cell is combined from: its score records by id, the (line, verdict) of the judge of every
    item, in cascade mode the own judge's verdicts on the sample by id, and the verdicts' file (for errors)."""

    scores: dict[str, dict[str, Any]]
    verdicts: list[tuple[int, dict[str, Any]]]
    sample: dict[str, dict[str, Any]] | None
    source: str


def combine_records(
    model: str,
    variant: str,
    subtask: str,
    records: CellRecords,
    gate: GateSettings,
    human: HumanScores,
    review: ReviewSettings,
) -> list[dict[str, Any]]:
    """``combine_items`` of records already read."""
    from h2htalk.people.prediction_powered import review_sample
    from h2htalk.scoring.score_files import ANSWER_FLAGS

    s_by_id, verdicts, judgments = records.scores, records.verdicts, records.source
    strong, cascade = records.sample or {}, records.sample is not None
    stand_in = cheap_stand_in(verdicts) if cascade else None
    sampled: set[str] = set()
    if review.mode == SAMPLE:
        # drawn among the items that have a J: a judge's score and an S (an empty answer left unscored has none);
        # in cascade mode among the sample's items whose own judge's score is known (a sample within it: the
        # correction it makes is of the own judge, so the cheap judge's verdict does not matter)
        scored = {item_id for item_id, r in s_by_id.items() if r["S"] is not None}
        judged = strong if cascade else {v["id"]: v for _, v in verdicts}
        with_j = [v["id"] for _, v in verdicts if judged.get(v["id"], {}).get("judge_mean") is not None]
        with_j = [item_id for item_id in with_j if item_id in scored]
        sampled = set(review_sample(Cell(model, variant, subtask), with_j, review.sample_per_cell, review.sample_seed))
    items = []
    for number, verdict in verdicts:
        item_id = verdict["id"]
        if item_id not in s_by_id:
            raise DataError(f"{judgments}: line {number}: id {item_id!r} has no score")
        s_score = s_by_id[item_id]["S"]  # None: an empty answer not scored (scoring.empty_answers: skip)
        override = human.get((model, variant, subtask, item_id))
        people = None if override is None or s_score is None else combine_j(s_score, override["score"], gate.alpha)
        # in cascade mode people's score never replaces the cheap judge's: the items they rate are drawn from the
        # sample, and a prediction that moved with the sample would bias the correction
        judge_score = override["score"] if override and review.mode == GATE and not cascade else verdict["judge_mean"]
        j5 = None if judge_score is None or s_score is None else combine_j(s_score, judge_score, gate.alpha)
        strong_mean = strong[item_id]["judge_mean"] if item_id in strong else None
        strong_score = override["score"] if override and review.mode == GATE and item_id in strong else strong_mean
        j5_strong = None if strong_score is None or s_score is None else combine_j(s_score, strong_score, gate.alpha)
        if review.mode == SAMPLE:
            reasons = [SAMPLED] if item_id in sampled and not override else []
        elif cascade:  # full mode's gate on what the strong judge saw: its verdicts on the sample
            gated = item_id in strong and not override and s_score is not None
            own = (j5_strong, strong_score, strong[item_id].get("judge_spread")) if gated else None
            reasons = review_reasons(*own, gate) if own else []
        else:  # a person decided, or there is no S to mix (nothing a reviewer could change): no review
            gated = not override and s_score is not None
            reasons = review_reasons(j5, judge_score, verdict["judge_spread"], gate) if gated else []
        unread = cascade and verdict["judge_mean"] is None and s_score is not None
        items.append({
            "id": item_id, "model": model, "variant": variant, "subtask": subtask,
            "task": verdict["task"], "response": verdict["response"], "reference": verdict["reference"],
            "S": s_score, "judge_mean": verdict["judge_mean"], "judge_spread": verdict["judge_spread"],
            "judge_score": judge_score,
            "judge_scores": [s["score"] for s in verdict["samples"]],
            "judge_evidence": _evidence(verdict),
            "human": override, "J5": j5, "J100": None if j5 is None else 20.0 * j5,
            "sampled": item_id in sampled, "J5_people": people,
            **({"cascade_sampled": item_id in strong, "strong_mean": strong_mean, "strong_score": strong_score,
                "J5_strong": j5_strong,
                "strong_scores": [s["score"] for s in strong[item_id]["samples"]] if item_id in strong else None,
                "strong_evidence": _evidence(strong[item_id]) if item_id in strong else None,
                "stand_in": {"judge": stand_in, "J5": combine_j(s_score, stand_in, gate.alpha)} if unread else None,
                } if cascade else {}),
            "review": bool(reasons), "review_reasons": reasons,
            "flags": verdict["flags"] + [f for f in s_by_id[item_id].get("flags", []) if f in ANSWER_FLAGS],
            "cluster": s_by_id[item_id].get("cluster", item_id),  # the conversation it belongs to, as scored
        })  # fmt: skip
    return items


def _evidence(verdict: dict[str, Any]) -> str:
    """The evidence of a verdict's first sample that gave a score."""
    return next((s["evidence"] for s in verdict["samples"] if s["score"] is not None), "")


def reviewed_verdict(item: dict[str, Any]) -> dict[str, Any]:
    """The verdict a person checks on an item sent to review: the role's own judge's on an item of the cascade's
    sample (its verdict gated the item, and people's score replaces it), else the item's judge's: its mean, its
    samples' scores, the J they make and its evidence."""
    if item.get("cascade_sampled"):
        return {
            "judge_mean": item["strong_mean"], "judge_scores": item["strong_scores"], "J5": item["J5_strong"],
            "judge_evidence": item["strong_evidence"],
        }  # fmt: skip
    return {k: item[k] for k in ("judge_mean", "judge_scores", "J5", "judge_evidence")}


STAND_IN_RULE = (
    "the mean of the cell's readable cheap verdicts (the scale's midpoint where none is readable), fixed from the"
    " cheap judge's verdicts alone, before any strong verdict"
)


def cheap_stand_in(verdicts: Sequence[tuple[int, dict[str, Any]]]) -> float:
    """The judge score (0-5) that stands in for a cheap verdict that could not be read (STAND_IN_RULE). Any value
    fixed before the sample's verdicts keeps the corrected mean unbiased, since the correction learns y - g on a
    random sample whatever g is; this one makes the unread items' y - g like the others' (both carry the cheap
    judge's bias), so they add little to its variance."""
    import numpy as np

    readable = [v["judge_mean"] for _, v in verdicts if v["judge_mean"] is not None]
    return float(np.mean(readable)) if readable else 2.5


def predicted_readings(item: dict[str, Any]) -> dict[str, float | None]:
    """An item's cheap-judge prediction under each reading: its own verdict's, or the stand-in's where the cheap
    judge's verdict could not be read."""
    found = item.get("stand_in")
    if found is None:
        return item_readings(item)
    return {"J": 20.0 * found["J5"], "S": item["S"], "judge": 20.0 * found["judge"]}


def people_readings(item: dict[str, Any]) -> dict[str, float]:
    """A rated item's value under the readings people's score enters, with people's score for the judge's."""
    return {"J": 20.0 * item["J5_people"], "judge": 20.0 * item["human"]["score"]}


def summarise_reading(
    values: Sequence[float | None], bootstrap: BootstrapSettings, clusters: Sequence[str] | None = None
) -> dict[str, Any]:
    """Mean of the items' values with a bootstrap CI, resampling whole ``clusters`` (one label an item) where items
    share one; items without a value are counted as missing, not zeroed."""
    import numpy as np

    from h2htalk.scoring.bootstrap import bootstrap_mean_ci
    from h2htalk.scoring.metrics import cell_value

    present = np.array([v for v in values if v is not None], dtype=np.float64)
    kept = [c for v, c in zip(values, clusters, strict=True) if v is not None] if clusters else None
    groups = kept if kept and len(set(kept)) < len(kept) else None
    low, high = bootstrap_mean_ci(present, bootstrap.resamples, bootstrap.seed, bootstrap.confidence, groups)
    mean = (float(present.mean()), float(low[0]), float(high[0])) if present.size else (None, None, None)
    return {"n": int(present.size), **cell_value(*mean), "missing": len(values) - int(present.size)}


def strong_readings(item: dict[str, Any]) -> dict[str, float]:
    """A cascade-sampled item's value under the readings a judge's score enters, with the role's own judge's."""
    return {"J": 20.0 * item["J5_strong"], "judge": 20.0 * item["strong_score"]}


@dataclass(frozen=True)
class Correction:
    """What corrects a cell's judge on every item: the ``frame`` the mean is over (the items with a J), the
    positions in it of the ``rated`` items, and per reading their ``observed`` values: people's (review sample
    mode), the role's own judge's (cascade mode), or in both the own judge's corrected by people on a random part
    of its sample (the second phase's pseudo-values)."""

    frame: list[dict[str, Any]]
    rated: list[int]
    observed: dict[str, np.ndarray]
    estimator: str
    people_items: list[dict[str, Any]]  # the items whose people's score the correction uses

    def predicted(self, name: str) -> np.ndarray:
        import numpy as np

        return np.array([predicted_readings(i)[name] for i in self.frame], dtype=np.float64)

    def clusters(self) -> list[str] | None:
        labels = [i.get("cluster", i["id"]) for i in self.frame]
        return labels if len(set(labels)) < len(labels) else None

    def estimate(self, name: str, confidence: float) -> Estimate:
        """The cell's reading ``name`` corrected, kept to its 0-100 scale."""
        import numpy as np

        from h2htalk.people.prediction_powered import prediction_powered_mean

        return prediction_powered_mean(
            self.predicted(name), np.array(self.rated), self.observed[name], confidence, self.clusters()
        ).within(0.0, 100.0)


def correction(items: Sequence[dict[str, Any]], mode: str, cascade: bool) -> Correction | None:
    """How the cell's judge is corrected, or None: gate mode without a cascade, or fewer than 2 items to correct
    it with (the cell is then the judge's alone). In cascade mode every item with an S is in the frame, an unread
    cheap verdict with its stand-in (``cheap_stand_in``)."""
    import numpy as np

    from h2htalk.people.prediction_powered import pseudo_values

    frame = [i for i in items if i["J100"] is not None or (cascade and i["stand_in"] is not None)]
    people = [k for k, i in enumerate(frame) if i["sampled"] and i["J5_people"] is not None] if mode == SAMPLE else []
    if not cascade:
        if len(people) < 2:
            return None
        observed = {name: np.array([people_readings(frame[k])[name] for k in people]) for name in PEOPLE_READINGS}
        return Correction(frame, people, observed, "prediction-powered J", [frame[k] for k in people])
    rated = [k for k, i in enumerate(frame) if i["cascade_sampled"] and i["J5_strong"] is not None]
    if len(rated) < 2:
        return None
    observed = {name: np.array([strong_readings(frame[k])[name] for k in rated]) for name in PEOPLE_READINGS}
    nested = [p for p, k in enumerate(rated) if k in people]  # people's sample: within the own judge's
    if len(nested) >= 2:
        for name in PEOPLE_READINGS:
            rated_by_people = np.array([people_readings(frame[rated[p]])[name] for p in nested])
            observed[name] = pseudo_values(observed[name], np.array(nested), rated_by_people)
        by_people = [frame[rated[p]] for p in nested]
        return Correction(frame, rated, observed, "prediction-powered J, cascade and people", by_people)
    return Correction(frame, rated, observed, "prediction-powered J, cascade", [])


def corrected_reading(
    items: Sequence[dict[str, Any]], found: Correction, name: str, confidence: float
) -> dict[str, Any]:
    """The reading ``name`` of a corrected cell: prediction-powered over the frame, with the rectifier (the mean
    correction) and its interval."""
    from h2htalk.scoring.metrics import cell_value

    estimate = found.estimate(name, confidence)
    low, high = estimate.correction_ci(confidence)
    return {
        "n": len(found.frame), **cell_value(estimate.value, estimate.ci_low, estimate.ci_high),
        "missing": len(items) - len(found.frame), "correction": estimate.correction, "se": estimate.se,
        "rectifier": {"value": estimate.correction, "ci_low": low, "ci_high": high, "n": estimate.rated},
    }  # fmt: skip


def summarise_j(
    items: Sequence[dict[str, Any]], bootstrap: BootstrapSettings, mode: str, cascade: bool = False
) -> dict[str, Any]:
    """Every reading of the cell (J, S, judge): the mean over the items that have a value, with its CI; missing
    ones are counted, not zeroed. In gate mode each is a mean with a bootstrap CI (people's score in place of the
    judge's where rated); in sample mode J and judge are prediction-powered (the judge's values corrected on the
    rated sample), or the judge's alone while fewer than two sampled items are rated. In cascade mode J and judge
    are the cheap judge's corrected on the own judge's sample (itself corrected by people in sample mode). The
    summary's own value is J's."""
    from h2htalk.scoring.score_files import ANSWER_FLAGS

    per_item = [item_readings(i) for i in items]
    clusters = [i.get("cluster", i["id"]) for i in items]
    readings = {name: summarise_reading([r[name] for r in per_item], bootstrap, clusters) for name in READINGS}
    # in cascade mode people's score is used on the sample only (it stands for the own judge's there)
    counted = [i for i in items if i["human"] is not None and (not cascade or i["cascade_sampled"])]
    review: dict[str, Any] = {"review_mode": mode, "estimator": "J (people's score replacing the judge's where rated)"}
    if mode == SAMPLE:
        rated = [i for i in items if i["sampled"] and i["J5_people"] is not None and i["J100"] is not None]
        review.update(
            sample_size=sum(i["sampled"] for i in items),
            sample_rated=len(rated),
            ratings_outside_sample=sum(i["human"] is not None and not i["sampled"] for i in items),
        )
        review["estimator"] = "the judge's J alone (fewer than 2 sampled items rated)"
    found = correction(items, mode, cascade)
    if found is not None:
        for name in PEOPLE_READINGS:
            judge_only = {k: readings[name][k] for k in ("value", "value_ci_low", "value_ci_high")}
            readings[name] = {**corrected_reading(items, found, name, bootstrap.confidence), "judge_only": judge_only}
    if mode == SAMPLE:
        counted = rated
        if found is not None and found.people_items:
            review["estimator"] = "prediction-powered J"
    summary_cascade = cascade_summary(items, found) if cascade else {"mode": FULL_MODE}
    return {
        "measure": "J",
        **readings["J"],
        "readings": readings,
        "to_review": sum(i["review"] for i in items),
        "review_share": sum(i["review"] for i in items) / len(items) if items else None,
        "answers": {flag: sum(flag in i["flags"] for i in items) for flag in ANSWER_FLAGS},
        "human_scored": sum(i["human"] is not None for i in items),
        "human_items": len(counted),
        "human_ratings": sum(len(i["human"]["ratings"]) for i in counted),
        **review,
        "cascade": summary_cascade,
    }


def cascade_summary(items: Sequence[dict[str, Any]], found: Correction | None) -> dict[str, Any]:
    """The cascade's part of a cell: its sample drawn, judged (a verdict of the own judge), used (with the own
    judge's J and an S); the items whose cheap verdict could not be read, kept in the cell with the stand-in."""
    unread = [i for i in items if i["stand_in"] is not None]
    return {
        "mode": CASCADE_MODE,
        "sample_size": sum(i["cascade_sampled"] for i in items),
        "sample_judged": sum(i["cascade_sampled"] and i["strong_mean"] is not None for i in items),
        "sample_used": len(found.rated) if found else 0,
        "estimator": found.estimator if found else "the cheap judge's alone (fewer than 2 sampled items judged)",
        "cheap_failures": len(unread),
        "stand_in": {"judge": unread[0]["stand_in"]["judge"] if unread else None, "rule": STAND_IN_RULE},
    }


def combine_to_files(
    cell: Cell,
    each: EachFile,
    gate: GateSettings,
    bootstrap: BootstrapSettings,
    human: HumanScores,
    review: ReviewSettings,
    cascade: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """J for every item of a judged cell, the review flags (the gate, or the sample), people's scores, and the
    summary; ``cascade``: (the cheap judge, the role's own) in cascade mode. ``each``: its files by their kinds (a
    results tree's ``cell_path``)."""
    scores, judgments = Path(each("score_items", cell)), Path(each("judge_samples", cell))
    sample = Path(each("judge_sample", cell)) if cascade else None
    items = combine_items(cell.model, cell.variant, cell.task, scores, judgments, gate, human, review, sample)
    add_pseudo_values(items, review.mode, cascade is not None)
    write_jsonl_atomic(each("j_items", cell), items)
    summary = {
        **cell.labels(),
        "human_imports": sorted({r["file"] for h in human.values() for r in h["ratings"]}),
        **summarise_j(items, bootstrap, review.mode, cascade is not None),
        "bootstrap": vars(bootstrap),
        "gate": vars(gate),
        "review": vars(review),
        "scale": "J5 = alpha*(S/20) + (1-alpha)*J_judge on 0-5; J100 = 20*J5, on S's scale",
    }
    if cascade:
        summary["cascade"].update(every_item_judge=cascade[0], sample_judge=cascade[1])
    write_json_atomic(each("j_summary", cell), summary)
    return summary


def add_pseudo_values(items: Sequence[dict[str, Any]], mode: str, cascade: bool) -> None:
    """Give each item of a corrected cell its pseudo-values (``ppi``: per reading people's score enters), whose mean
    is the cell's corrected mean: what Table 2's paired comparisons compare, so that a judge's bias that differs
    between two rows is corrected in their difference too."""
    import numpy as np

    from h2htalk.people.prediction_powered import pseudo_values

    found = correction(items, mode, cascade)
    for item in items:
        item["ppi"], item["ppi_rated"] = None, False
    if found is None:
        return
    for name in PEOPLE_READINGS:
        values = pseudo_values(found.predicted(name), np.array(found.rated), found.observed[name])
        for item, value in zip(found.frame, values, strict=True):
            item["ppi"] = {**(item["ppi"] or {}), name: float(value)}
    for position in found.rated:  # the items the correction rests on (their count bounds its degrees of freedom)
        found.frame[position]["ppi_rated"] = True


@stage(
    "combine_j",
    "J from S and the judge (corrected on the role's own judge's sample in cascade mode), the review gate or"
    " sample, people's scores",
    reads=(
        *declared.GATE, "scoring.bootstrap", "review.imports", "review.store", *declared.REVIEW_MODE, "subtasks",
        "variants", "models", "baselines", "rubric_judge.baselines", *declared.RUBRIC_JUDGE_MODE,
    ),
    jobs=Over(model=lambda run: run.judged_models if run.judged_subtasks else (), embedder=lambda run: run.embedders),
    cells=lambda run, w: [c.scored_by(w["embedder"]) for c in run.judged(w["model"])],
    ratings=(REVIEW_SCORES,), env="metrics", memory_mb=1000, minutes=10,
    options=("bootstrap",),
    inputs={
        **{kind: Each(kind) for kind in ("score_items", "judge_samples", "judge_sample")},
        "human": declared.config_files("review.imports"),
    },
    outputs={kind: Each(kind) for kind in ("j_items", "j_summary")},
)  # fmt: skip
def combine_model(
    model: str, human: list[str], config: dict[str, Any], run: RunCells, cells: list[Cell], results: Layout,
    each: EachFile, gate: GateSettings, bootstrap: BootstrapSettings, review: ReviewSettings,
) -> Done:  # fmt: skip
    """J of every judged cell of ``model`` (``combine_to_files``), with people's scores from the review imports
    (``human``) and the desk."""
    mode = JudgeMode.from_config(config, "rubric_judge")
    judges = (mode.cheap_model, mode.model) if mode.cascade else None
    scores = read_human_scores(human, cells, results, run.judged_models, config["review"]["store"])
    found = [combine_to_files(cell, each, gate, bootstrap, scores, review, judges) for cell in cells]
    return Done(
        f"{len(found)} cells, {sum(r['n'] for r in found)} items ({review.mode} mode, {mode.mode} judge); "
        f"{sum(r['to_review'] for r in found)} to review, {sum(r['human_items'] for r in found)} rated by "
        f"people, {sum(r['missing'] for r in found)} missing",
        subject=model,
    )
