"""Table 3: the SAP ablation (safety study) with paired bootstrap CIs, beside the paper's rows."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h2htalk.instances.sources import run_notes
from h2htalk.io import iter_jsonl, read_csv
from h2htalk.layout import Cell, Layout
from h2htalk.people.consensus import by_item, consensus, majority, median_score
from h2htalk.ratings import SAFETY_RATINGS, Rating, known_items, read_ratings
from h2htalk.settings import (
    CASCADE_MODE,
    FULL_MODE,
    STUDIES,
    VARIANT_NAMES,
    VARIANTS,
    WITH_SAP,
    WITHOUT_SAP,
    BootstrapSettings,
    JudgeMode,
)
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import RUN_NOTES, STUDY_JUDGE_MODE, config_files, study_cells, study_ladders
from h2htalk.stages.spec import Done, Each, Paths, Product, figure_files
from h2htalk.tabular import Files, records_frame, write_csv, write_table

if TYPE_CHECKING:  # the statistics (numpy, krippendorff) wait for Table 3's job
    from h2htalk.people.prediction_powered import Estimate

METRICS = ("bleu4", "rougeL", "ss", "safety_score", "violation_rate")
JUDGED_METRICS = ("safety_score", "violation_rate")  # the study judge's
SCALES = {"safety_score": (1.0, 5.0), "violation_rate": (0.0, 100.0)}  # where a corrected cell is kept
JUDGE_PARTS = ("judge_mode", "sample", "rectifier", "rectifier_ci_low", "rectifier_ci_high", "cheap_failures")
LABELS = {
    "bleu4": "BLEU-4",
    "rougeL": "ROUGE-L",
    "ss": "SS",
    "safety_score": "Safety (1-5)",
    "violation_rate": "Violation %",
}
PAPER_COLUMNS = {
    "bleu4": "bleu4",
    "rougeL": "rouge_l",
    "ss": "ss_percent",
    "safety_score": "safety_score_1to5",
    "violation_rate": "violation_rate_percent",
}


HumanValues = dict[str, Any]  # people's values of a turn: safety_score, violation (None: a tie), how many rated


def scenario_of(item_id: str) -> str:
    """The scenario of a safety turn id (``{scenario}-t{n}``); an id of another shape is its own scenario."""
    return item_id.rsplit("-t", 1)[0]


def _per_item(
    scores: Path, verdicts: Path, ratings: dict[str, HumanValues], sample: Path | None = None
) -> dict[str, dict[str, Any]]:
    """Per turn: the metric engine's scores, the safety values (people's where they decided one, else the
    judge's), whether people's values were used and how many ratings they rest on, its scenario and its
    answer's flags; in cascade mode (``sample``: the own judge's verdicts on the sample) also the own judge's
    values of the sampled turns (``own_safety_score``, ``own_violation_rate``; people's where they decided one)."""
    rows: dict[str, dict[str, Any]] = {
        r["id"]: {"bleu4": r["bleu4"], "rougeL": r["rougeL"], "ss": r["ss"], "flags": r.get("flags", [])}
        for _, r in iter_jsonl(scores)
    }
    for _, v in iter_jsonl(verdicts):
        row = rows.setdefault(v["id"], {"flags": []})
        row["scenario"] = v.get("scenario") or scenario_of(v["id"])
        row["judged"] = "unanswered" not in v.get("flags", [])  # a turn never sent has nothing to judge
        rated = ratings.get(v["id"], {})
        row["human"] = rated.get("safety_score") is not None or rated.get("violation") is not None
        row["human_ratings"] = rated.get("raters", 0) if row["human"] else 0
        row["violation_tied"] = bool(rated.get("violation_tied"))
        score, violation = (rated.get(k) if rated.get(k) is not None else v[k] for k in ("safety_score", "violation"))
        row["safety_score"] = score
        row["violation_rate"] = None if violation is None else 100.0 * bool(violation)
    for _, v in iter_jsonl(sample) if sample else ():
        row, rated = rows[v["id"]], ratings.get(v["id"], {})
        score, violation = (rated.get(k) if rated.get(k) is not None else v[k] for k in ("safety_score", "violation"))
        row["own_safety_score"] = score
        row["own_violation_rate"] = None if violation is None else 100.0 * bool(violation)
    for item_id, row in rows.items():
        row.setdefault("scenario", scenario_of(item_id))
    return rows


def corrected(
    items: dict[str, dict[str, Any]], metric: str, confidence: float
) -> tuple[Estimate, dict[str, float]] | None:
    """In cascade mode, a judged metric's cell: the cheap judge's mean over the turns it judged, corrected by the own
    judge's on the sampled ones (prediction-powered, scenarios as clusters), and each turn's pseudo-value (their
    mean is the estimate: the delta row pairs them); None with fewer than 2 sampled turns. A turn whose cheap
    verdict could not be read stays in the cell with the stand-in (``stand_in``)."""
    import numpy as np

    from h2htalk.people.prediction_powered import prediction_powered_mean, pseudo_values

    frame = [(item_id, row) for item_id, row in items.items() if judged(row, metric)]
    rated = [k for k, (_, row) in enumerate(frame) if row.get(f"own_{metric}") is not None]
    if len(rated) < 2:
        return None
    readable = [row[metric] for _, row in frame if row[metric] is not None]
    fixed = stand_in(readable, metric)
    predicted = np.array([fixed if row[metric] is None else row[metric] for _, row in frame], float)
    observed = np.array([frame[k][1][f"own_{metric}"] for k in rated], float)
    clusters = [row["scenario"] for _, row in frame]
    estimate = prediction_powered_mean(predicted, np.array(rated), observed, confidence, clusters)
    estimate = estimate.within(*SCALES[metric])
    values = pseudo_values(predicted, np.array(rated), observed)
    return estimate, {item_id: float(z) for (item_id, _), z in zip(frame, values, strict=True)}


def stand_in(readable: Sequence[float], metric: str) -> float:
    """The value that stands in for a cheap verdict that could not be read: the mean of the cell's readable ones
    (the scale's midpoint where none is), fixed before any strong verdict (``h2htalk.judge.combine.STAND_IN_RULE``)."""
    import numpy as np

    return float(np.mean(readable)) if readable else sum(SCALES[metric]) / 2.0


def judged(row: dict[str, Any], metric: str) -> bool:
    """Whether the judge was asked about a turn's ``metric``: it has a verdict, and the turn was sent."""
    return metric in row and row.get("judged", True)


def cheap_failures(items: dict[str, dict[str, Any]], metric: str) -> int:
    """The turns the cheap judge judged whose ``metric`` could not be read."""
    return sum(judged(row, metric) and row[metric] is None for row in items.values())


def _counts(items: dict[str, dict[str, Any]]) -> dict[str, int]:
    return {
        "scenarios": len({r["scenario"] for r in items.values()}),
        "human_rated": sum(bool(r.get("human")) for r in items.values()),
        "human_ratings": sum(r.get("human_ratings", 0) for r in items.values()),
        "violation_tied": sum(bool(r.get("violation_tied")) for r in items.values()),
        "cut_off": sum("cut_off" in r["flags"] for r in items.values()),
        "failed": sum("failed" in r["flags"] for r in items.values()),
    }


def table3_rows(
    runs: dict[str, dict[str, tuple[Path, ...]]],
    bootstrap: BootstrapSettings,
    ratings: dict[tuple[str, str, str], HumanValues] | None = None,
) -> list[dict[str, Any]]:
    """runs: model -> variant -> (score items, safety verdicts[, the own judge's verdicts on the sample: cascade
    mode]). Rows per (model, variant) and the paired delta.

    Intervals resample scenarios, not turns (the turns of one conversation are not independent); the delta is
    paired turn by turn and resampled by scenario too. Human ratings (model, variant, id) replace the judge's
    safety values of the turns they rate (both judges' in cascade mode, before the correction). In cascade mode
    the safety score and the violation rate are the cheap judge's corrected on the sample (``corrected``), and
    the delta pairs their pseudo-values."""
    import numpy as np

    from h2htalk.scoring.bootstrap import bootstrap_mean_ci, paired_bootstrap_diff

    ratings = ratings or {}
    resamples, seed, confidence = bootstrap.resamples, bootstrap.seed, bootstrap.confidence
    out = []
    for model, variants in sorted(runs.items()):
        items = {
            variant: _per_item(
                paths[0], paths[1], {i: r for (m, v, i), r in ratings.items() if (m, v) == (model, variant)}, *paths[2:]
            )
            for variant, paths in variants.items()
        }
        cascade = any(len(paths) > 2 for paths in variants.values())
        found = {
            (variant, metric): corrected(items[variant], metric, confidence) if cascade else None
            for variant in items
            for metric in JUDGED_METRICS
        }
        for variant in VARIANTS:
            if variant not in items:
                continue
            row: dict[str, Any] = {"model": model, "variant": VARIANT_NAMES[variant]}
            for metric in METRICS:
                if metric in JUDGED_METRICS:
                    row.update(_judge_parts(metric, cascade, found[(variant, metric)], confidence))
                    if found[(variant, metric)]:
                        row[f"{metric}_cheap_failures"] = cheap_failures(items[variant], metric)
                if found.get((variant, metric)):
                    estimate, _ = found[(variant, metric)]
                    row[metric], row[f"{metric}_ci_low"], row[f"{metric}_ci_high"] = (
                        estimate.value, estimate.ci_low, estimate.ci_high
                    )  # fmt: skip
                    row[f"{metric}_n"] = estimate.items
                    continue
                kept = [r for r in items[variant].values() if r.get(metric) is not None]
                values = np.array([r[metric] for r in kept], float)
                groups = [r["scenario"] for r in kept]
                row[metric] = float(values.mean()) if values.size else None
                low, high = (
                    bootstrap_mean_ci(values, resamples, seed, confidence, groups) if values.size else ([None], [None])
                )
                row[f"{metric}_ci_low"], row[f"{metric}_ci_high"] = low[0], high[0]
                row[f"{metric}_n"] = int(values.size)
            out.append({**row, **_counts(items[variant])})
        if set(VARIANTS) <= set(items):
            delta: dict[str, Any] = {"model": model, "variant": "delta (w/ - w/o)"}
            with_sap, without = items[WITH_SAP], items[WITHOUT_SAP]
            for metric in METRICS:
                both = found.get((WITH_SAP, metric)), found.get((WITHOUT_SAP, metric))
                # each turn's pseudo-value where both variants' cells are corrected, else its value
                value_a, value_b = (
                    cell[1] if all(both) else {i: r.get(metric) for i, r in rows.items()}  # type: ignore[index]
                    for cell, rows in zip(both, (with_sap, without), strict=True)
                )
                shared = [
                    i
                    for i in with_sap
                    if with_sap[i].get(metric) is not None and without.get(i, {}).get(metric) is not None
                ]
                a = np.array([value_a[i] for i in shared], float)
                b = np.array([value_b[i] for i in shared], float)
                groups = [with_sap[i]["scenario"] for i in shared]
                mean, low, high = paired_bootstrap_diff(a, b, resamples, seed, confidence, groups)
                delta[metric] = None if math.isnan(mean) else mean
                delta[f"{metric}_ci_low"] = None if math.isnan(low) else low
                delta[f"{metric}_ci_high"] = None if math.isnan(high) else high
                delta[f"{metric}_n"] = len(shared)
            out.append(delta)
    return out


def _judge_parts(
    metric: str, cascade: bool, found: tuple[Estimate, dict[str, float]] | None, confidence: float
) -> dict[str, Any]:
    """A judged metric's mode, the sample its correction rests on and the rectifier with its CI (JUDGE_PARTS)."""
    parts: dict[str, Any] = {f"{metric}_judge_mode": CASCADE_MODE if cascade else FULL_MODE}
    if found is not None:
        estimate = found[0]
        low, high = estimate.correction_ci(confidence)
        parts.update({
            f"{metric}_sample": estimate.rated, f"{metric}_rectifier": estimate.correction,
            f"{metric}_rectifier_ci_low": low, f"{metric}_rectifier_ci_high": high,
        })  # fmt: skip
    return parts


def paper_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    rows = read_csv(path, "the paper's Table 3: paper.table3")
    names = {"with_sap": "w/ SAP", "without_sap": "w/o SAP"}
    return [
        {
            "model": "paper",
            "variant": names.get(r["variant"], r["variant"]),
            **{m: float(r[PAPER_COLUMNS[m]]) for m in METRICS},
        }
        for r in rows
    ]


def read_safety_ratings(
    files: Sequence[str | os.PathLike[str]],
    verdict_files: dict[tuple[str, str], Path],
    store: str | os.PathLike[str] | None = None,
) -> list[Rating]:
    """People's safety ratings (CSV: model, variant, id, safety_score, violation, rater; either value may be
    empty; and those of the review desk's ``store``) of the turns the judge rated."""
    known = {(model, variant, v["id"]) for (model, variant), path in verdict_files.items() for _, v in iter_jsonl(path)}
    return read_ratings(files, SAFETY_RATINGS, known_items(known, "turn"), store)


def human_safety(ratings: Iterable[Rating]) -> dict[tuple[str, str, str], HumanValues]:
    """(model, variant, id) -> the median safety score and the majority violation of the turn's raters (a tie
    decides nothing: the turn keeps the judge's value and needs another rater)."""
    rated = by_item(ratings)
    every = [r for item in rated.values() for r in item]
    scores = consensus(every, "safety_score", median_score)
    violations = consensus(every, "violation", majority)
    out: dict[tuple[str, str, str], HumanValues] = {}
    for item in sorted(rated):
        score, violation = scores.get(item), violations.get(item)
        out[(item[0], item[1], item[2])] = {
            "safety_score": score.value if score else None,
            "violation": violation.value if violation else None,
            "violation_tied": bool(violation and violation.tied),
            "raters": len(rated[item]),
        }
    return out


def read_human_ratings(
    files: Sequence[str | os.PathLike[str]],
    verdict_files: dict[tuple[str, str], Path],
    store: str | os.PathLike[str] | None = None,
) -> dict[tuple[str, str, str], HumanValues]:
    """People's values of the turns the judge rated, by (model, variant, id): ``human_safety`` of the files and
    the store."""
    return human_safety(read_safety_ratings(files, verdict_files, store))


def agreement(
    verdict_files: dict[tuple[str, str], Path], ratings: Sequence[Rating], bootstrap: BootstrapSettings
) -> list[dict[str, Any]]:
    """Krippendorff's alpha of the safety score (ordinal) and the violation (nominal), between raters and between
    the judge and people's consensus, resampling scenarios."""
    from h2htalk.people.agreement import NOMINAL, ORDINAL, compare

    judge: dict[tuple[str, ...], dict[str, Any]] = {}
    for (model, variant), path in verdict_files.items():
        for _, v in iter_jsonl(path):
            judge[(model, variant, v["id"])] = v
    rows = []
    for field, level in (("safety_score", ORDINAL), ("violation", NOMINAL)):
        values = {item: verdict[field] for item, verdict in judge.items()}
        rows += compare("safety", field, level, ratings, values, bootstrap, lambda item: scenario_of(item[2]))
    return rows


COUNTS = ("scenarios", "human_rated", "human_ratings", "violation_tied", "cut_off", "failed")


def write_table3(
    rows: list[dict[str, Any]],
    paper: list[dict[str, Any]],
    agree: list[dict[str, Any]] | None,
    out: Files,
    confidence: float,
    run_notes: Sequence[str] = (),
    judge_notes: Sequence[str] = (),
    judge_mark: str = "",
) -> None:
    """Table 3's CSV (CIs and n in columns of their own), Markdown and LaTeX; ``run_notes`` (what the run is,
    e.g. a demo) open the notes, ``judge_notes`` (the safety judge's ladder) close them; ``judge_mark`` follows
    the judged columns' names (a judge at chance on its ladder made them)."""
    from h2htalk.people.agreement import note

    columns = ["model", "variant"]
    for metric in METRICS:
        columns += [metric, f"{metric}_ci_low", f"{metric}_ci_high", f"{metric}_n"]
        columns += [f"{metric}_{part}" for part in JUDGE_PARTS] if metric in JUDGED_METRICS else []
    columns += list(COUNTS)
    write_csv(records_frame([*rows, *paper], columns), out["csv"], float_format="{:.4f}")
    display = [
        {
            "model": r["model"],
            "variant": r["variant"],
            **{LABELS[m] + (judge_mark if m in JUDGED_METRICS else ""): _with_ci(r, m) for m in METRICS},
            "turns (scenarios)": f"{r['bleu4_n']} ({r['scenarios']})" if "scenarios" in r else "",
        }
        for r in [*rows, *paper]
    ]
    cut = sum(r.get("cut_off", 0) for r in rows)
    failed = sum(r.get("failed", 0) for r in rows)
    singles = [r for r in rows if not str(r["variant"]).startswith("delta")]
    rated, ratings = (sum(r.get(k, 0) for r in singles) for k in ("human_rated", "human_ratings"))
    tied = sum(r.get("violation_tied", 0) for r in singles)
    notes = [
        *run_notes,
        "BLEU-4, ROUGE-L, SS (x100): the metric engine against each turn's safe reference; Safety (1-5) and "
        "Violation %: people's rating wherever they rated, as the paper's (the median score and the majority "
        "verdict of a turn's raters), the safety judge's (k samples a response) elsewhere; "
        f"{rated} turns rest on {ratings} ratings by people"
        + (f", {tied} with tied violation verdicts (the judge's kept; they need another rater)" if tied else "")
        + " (per row in the CSV), in either review.mode (which sets how Table 2's judged cells use people). "
        "Each variant answers every turn after its own earlier answers.",
        f"Brackets: {confidence:.0%} bootstrap CI resampling scenarios (a conversation's turns together); the "
        "delta row's CI is a paired bootstrap by scenario.",
        f"Answers cut off at the token limit: {cut}; items with no answer (scored as empty): {failed} "
        "(per row in the CSV).",
        "paper: the published Table 3 (w/ SAP, w/o SAP) for comparison.",
    ]
    notes += cascade_note(rows)
    if agree is not None:
        notes.append(note(agree, "turns", confidence))
    notes += judge_notes
    labels = [LABELS[m] + (judge_mark if m in JUDGED_METRICS else "") for m in METRICS]
    write_table(
        records_frame(display, ["model", "variant", *labels, "turns (scenarios)"]),
        out,
        caption="Table 3: performance with and without SAP",
        label="tab:table3",
        notes=notes,
        csv=False,  # the CSV above holds the CI bounds and n in columns of their own
    )


def cascade_note(rows: Sequence[dict[str, Any]]) -> list[str]:
    """What Table 3 says of rows whose study judge ran in cascade mode."""
    cells = [r for r in rows if r.get("safety_score_judge_mode") == CASCADE_MODE]
    if not cells:
        return []
    parts = []
    for metric in JUDGED_METRICS:
        known = [r for r in cells if r.get(f"{metric}_rectifier") is not None]
        if known:
            low, high = (f(r[f"{metric}_rectifier"] for r in known) for f in (min, max))
            sizes = sorted({r[f"{metric}_sample"] for r in known})
            parts.append(f"{LABELS[metric]} rectifier {low:+.2f} to {high:+.2f} on {sizes[0]}-{sizes[-1]} turns a row")
    unread = sum(r.get(f"{m}_cheap_failures") or 0 for r in cells for m in JUDGED_METRICS)
    return [
        "Safety (1-5) and Violation % in cascade mode (study_judge.mode: cascade): the cheap judge rated every turn"
        " and the study judge a seeded sample of each row's; each value is the cheap judge's mean corrected by the"
        " sample (prediction-powered, scenarios as clusters, its CI counts both); "
        + ("; ".join(parts) or "no row had 2 sampled turns: the cheap judge's alone")
        + " (per row in the CSV: _judge_mode, _sample, _rectifier and its CI); the delta pairs the corrected turns."
        + f" Cheap verdicts that could not be read: {unread} (a value and a row's count shown as (k stand-in)); such"
        " a turn stays in its row with a stand-in, the mean of the row's readable cheap values, and its strong"
        " verdict is used where sampled."
    ]


def _with_ci(row: dict[str, Any], metric: str) -> str:
    value = row.get(metric)
    if value is None:
        return ""
    low, high = row.get(f"{metric}_ci_low"), row.get(f"{metric}_ci_high")
    unread = row.get(f"{metric}_cheap_failures")
    return (
        f"{value:.2f}"
        + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else "")
        + (f" ({unread} stand-in)" if unread else "")
    )


STUDY_READS = ("models", "variants", "review.store", "judge_reliability.every_run", *RUN_NOTES, *STUDY_JUDGE_MODE)


@stage(
    "table3", "Table 3: the SAP ablation with paired bootstrap CIs and the paper's rows",
    reads=("scoring", "studies.models", "studies.human_ratings", "paper.table3", *STUDY_READS),
    cells=lambda run, w: [c.scored_by(run.embedder) for c in study_cells("safety")(run, w)],
    ratings=(SAFETY_RATINGS,), env="figures", memory_mb=1000, minutes=10, options=("bootstrap",),
    product=Product("table", "Table 3", "the SAP ablation on high-risk scenarios: similarity, safety, violations",
                    main="md", shown=("csv",)),
    inputs={
        "scores": Each("score_items"), "verdicts": Each("verdicts"), "sample": Each("judge_sample"),
        "paper": config_files("paper.table3"), "human": config_files("studies.human_ratings"),
        "ladders": Paths(study_ladders),
    },
    outputs=figure_files("table3", csv=".csv", md=".md", tex=".tex"),
)  # fmt: skip
def write_table3_files(
    scores: list[str], verdicts: list[str], sample: list[str], paper: list[str], human: list[str], ladders: list[str],
    cells: list[Cell], config: dict[str, Any], results: Layout, bootstrap: BootstrapSettings,
    outputs: dict[str, str],
) -> Done:  # fmt: skip
    """Table 3 from the safety study's cells (one per model and variant, scored by one embedder) and people's
    ratings (``human``, and the review desk's store): its csv, md and tex files, the run's notes under them. In the
    study judge's cascade mode the own judge's verdicts on each cell's ``sample`` correct it; the safety judge's
    ``ladders`` give its notes and mark (``write_table3``)."""
    from h2htalk.reliability.standing import study_judge_notes

    judge_notes, judge_mark = study_judge_notes(config, results, ladders, bootstrap, STUDIES[0],
                                                "Safety and Violation cells")  # fmt: skip
    cascade = JudgeMode.from_config(config, "study_judge").cascade
    runs: dict[str, dict[str, tuple[Path, ...]]] = {}
    for cell in cells:
        paths = (Path(results.score_items(cell)), Path(results.verdicts(cell)))
        runs.setdefault(cell.model, {})[cell.variant] = (*paths, Path(results.judge_sample(cell))) if cascade else paths
    verdict_files = {(model, variant): paths[1] for model, pair in runs.items() for variant, paths in pair.items()}
    ratings = read_safety_ratings(human, verdict_files, config["review"]["store"])
    rows = table3_rows(runs, bootstrap, human_safety(ratings))
    agree = agreement(verdict_files, ratings, bootstrap)
    (paper_file,) = paper
    write_table3(rows, paper_rows(paper_file), agree, outputs, bootstrap.confidence, run_notes(config), judge_notes,
                 judge_mark)  # fmt: skip
    return Done(f"{len(rows)} rows")
