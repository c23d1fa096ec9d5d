"""Figure 7: instruction following (need recognised and met) by scenario type, with bootstrap CIs; people's
verdicts at the review desk, where there are, replace the judge's."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from h2htalk.instances.sources import run_notes
from h2htalk.io import iter_jsonl, write_png_atomic
from h2htalk.layout import Cell, Layout
from h2htalk.people.consensus import majority
from h2htalk.ratings import NEED_VERDICTS, Rating, known_items, read_ratings
from h2htalk.settings import CASCADE_MODE, FULL_MODE, STUDIES, BootstrapSettings, JudgeMode
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import RUN_NOTES, STUDY_JUDGE_MODE, study_cells, study_ladders
from h2htalk.stages.spec import Done, Each, Paths, Product, figure_files
from h2htalk.tabular import records_frame, write_csv


def read_need_ratings(store: str | os.PathLike[str] | None, verdicts: dict[tuple[str, str], Path]) -> list[Rating]:
    """People's verdicts at the review desk (recognized, met) on the judged items."""
    known = {(model, variant, r["id"]) for (model, variant), path in verdicts.items() for _, r in iter_jsonl(path)}
    return read_ratings([], NEED_VERDICTS, known_items(known, "item"), store)


def read_need_verdicts(
    store: str | os.PathLike[str] | None, verdicts: dict[tuple[str, str], Path]
) -> dict[tuple[str, ...], bool]:
    """People's verdicts at the review desk on the judged items, by (model, variant, id): success (need
    recognised and met) by the majority of the item's raters; a tie decides nothing and is left out."""
    said: dict[tuple[str, ...], list[bool]] = {}
    for rating in read_need_ratings(store, verdicts):
        said.setdefault(rating.item, []).append(rating.values["recognized"] and rating.values["met"])
    decided = {item: majority(votes) for item, votes in said.items()}
    return {item: success for item, success in decided.items() if success is not None}


def fig7_rows(
    verdicts: dict[tuple[str, str], Path],
    bootstrap: BootstrapSettings,
    human: dict[tuple[str, ...], bool] | None = None,
    samples: dict[tuple[str, str], Path] | None = None,
) -> list[dict[str, Any]]:
    """Success rate (need recognised and met) per (model, variant, scenario type), with a bootstrap CI; ``human``
    (model, variant, id) -> people's decision replaces the judge's. In cascade mode (``samples``: the own judge's
    verdicts on each cell's sample) a bar with 2 sampled items is the cheap judge's rate corrected by them
    (prediction-powered: the sample is random within the cell, so within each scenario type too)."""
    import numpy as np

    from h2htalk.people.prediction_powered import prediction_powered_mean
    from h2htalk.scoring.bootstrap import bootstrap_mean_ci

    resamples, seed, confidence = bootstrap.resamples, bootstrap.seed, bootstrap.confidence
    human = human or {}
    out = []
    for (model, variant), path in sorted(verdicts.items()):
        records = [{**r, "success": human.get((model, variant, r["id"]), r["success"])} for _, r in iter_jsonl(path)]
        own = {
            r["id"]: human.get((model, variant, r["id"]), r["success"])
            for _, r in (iter_jsonl(samples[(model, variant)]) if samples else ())
        }
        for scenario in ("implicit_help", "ambiguous", "context_aware"):
            kept = [r for r in records if r["scenario_type"] == scenario and r["success"] is not None]
            decided = np.array([100.0 * r["success"] for r in kept], float)
            missing = sum(1 for r in records if r["scenario_type"] == scenario and r["success"] is None)
            low, high = bootstrap_mean_ci(decided, resamples, seed, confidence) if decided.size else ([None], [None])
            # in cascade mode every judged turn is in the bar, an undecided cheap verdict with the stand-in (the
            # bar's decided rate, fixed before the sample's verdicts: h2htalk.judge.combine.STAND_IN_RULE)
            asked = [r for r in records if r["scenario_type"] == scenario and "unanswered" not in r.get("flags", [])]
            rated = [k for k, r in enumerate(asked) if own.get(r["id"]) is not None]
            mode = CASCADE_MODE if samples else FULL_MODE
            unread = sum(r["success"] is None for r in asked) if samples else None
            if len(rated) >= 2:
                fixed = float(decided.mean()) if decided.size else 50.0
                predicted = np.array([fixed if r["success"] is None else 100.0 * r["success"] for r in asked], float)
                observed = np.array([100.0 * own[asked[k]["id"]] for k in rated], float)
                estimate = prediction_powered_mean(predicted, np.array(rated), observed, confidence).within(0.0, 100.0)
                decided = np.array([estimate.value])
                low, high = [estimate.ci_low], [estimate.ci_high]
            out.append(
                {
                    "model": model,
                    "variant": variant,
                    "scenario_type": scenario,
                    "n": len(kept),
                    "missing": missing,
                    "success_rate": float(decided.mean()) if decided.size else None,
                    "ci_low": low[0],
                    "ci_high": high[0],
                    "judge_mode": mode,
                    "sample": len(rated) if samples else None,
                    "cheap_failures": unread,
                }
            )
    return out


def write_fig7(
    rows: list[dict[str, Any]], png: Path, csv_path: Path, confidence: float, run_notes: Sequence[str] = ()
) -> list[tuple[str, ...]]:
    """Figure 7 and its CSV, ``run_notes`` (e.g. the demo note) under its title; returns the (model, variant,
    scenario type) cells drawn as labelled gaps."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = ["model", "variant", "scenario_type", "n", "missing", "success_rate", "ci_low", "ci_high"]
    columns += ["judge_mode", "sample", "cheap_failures"]
    write_csv(records_frame(rows, columns), csv_path, float_format="{:.2f}")
    scenarios = ["implicit_help", "ambiguous", "context_aware"]
    series = sorted({(r["model"], r["variant"]) for r in rows})
    fig, ax = plt.subplots(figsize=(max(7, 2.2 * len(scenarios) + 0.6 * len(series)), 4.8))
    width = 0.8 / max(1, len(series))
    gaps = []
    for index, (model, variant) in enumerate(series):
        cells = [
            next(r for r in rows if (r["model"], r["variant"], r["scenario_type"]) == (model, variant, scenario))
            for scenario in scenarios
        ]
        # a cell without a decided verdict is a gap with a label, never a 0 % bar
        values = [c["success_rate"] if c["success_rate"] is not None else np.nan for c in cells]
        lows = [0.0 if c["ci_low"] is None else c["success_rate"] - c["ci_low"] for c in cells]
        highs = [0.0 if c["ci_high"] is None else c["ci_high"] - c["success_rate"] for c in cells]
        positions = [i + (index - (len(series) - 1) / 2) * width for i in range(len(scenarios))]
        bars = ax.bar(positions, values, width, yerr=[lows, highs], capsize=3, label=f"{model} [{variant}]")
        labels = ["" if c["success_rate"] is None else f"{c['success_rate']:.0f}" for c in cells]
        ax.bar_label(bars, labels=labels, fontsize=7, padding=2)  # zero-height bars still say 0
        for position, cell in zip(positions, cells, strict=True):
            if cell["success_rate"] is None:
                gaps.append((model, variant, cell["scenario_type"]))
                ax.text(position, 1, f"n/a\n({cell['missing']} undecided)", ha="center", va="bottom", fontsize=6)
    ax.set_xticks(range(len(scenarios)), ["Implicit-Help", "Ambiguous/Contradictory", "Context-Aware"])
    ax.set_ylabel("needs recognised and met (%)")
    ax.set_ylim(0, 105)
    title = f"Figure 7: instruction following by scenario type ({confidence:.0%} bootstrap CI)"
    # a ladder note is long: wrapped, never between a number and its "%" (a no-break space is not a break)
    ax.set_title("\n".join([title, *(textwrap.fill(note.replace(" %", "\u00a0%"), 110) for note in run_notes)]))
    if series:
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    else:  # no model answered the study (studies.models: [])
        ax.text(1, 50, "no model answered the study in this run", ha="center", va="center")
    fig.tight_layout()
    write_png_atomic(fig, png, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return gaps


@stage(
    "fig7", "Figure 7: instruction following by scenario type",
    reads=("scoring.bootstrap", "studies.models", "models", "variants", "review.store", *RUN_NOTES,
           "judge_reliability.every_run", *STUDY_JUDGE_MODE),
    cells=study_cells("instruction_following"), ratings=(NEED_VERDICTS,), env="figures", memory_mb=1000,
    minutes=10, options=("bootstrap",),
    product=Product("figure", "Figure 7", "instruction following per scenario type", main="png", shown=("png",)),
    inputs={"verdicts": Each("verdicts"), "sample": Each("judge_sample"), "ladders": Paths(study_ladders)},
    outputs=figure_files("fig7_instruction_following", png=".png", csv=".csv"),
)  # fmt: skip
def write_fig7_files(
    verdicts: list[str], sample: list[str], ladders: list[str], cells: list[Cell], config: dict[str, Any],
    results: Layout, bootstrap: BootstrapSettings, outputs: dict[str, str],
) -> Done:  # fmt: skip
    """Figure 7 (``png``) and its ``csv`` from the instruction-following cells (one per model and variant) and
    people's verdicts in the review desk's store; the run's notes and the need judge's ladder (``ladders``) under
    its title. In the study judge's cascade mode each cell's ``sample`` corrects its bars."""
    from h2htalk.reliability.standing import study_judge_notes

    notes, _ = study_judge_notes(config, results, ladders, bootstrap, STUDIES[1], "Figure 7's bars")
    cascade = JudgeMode.from_config(config, "study_judge").cascade
    verdict_files = {(cell.model, cell.variant): Path(results.verdicts(cell)) for cell in cells}
    samples = {(cell.model, cell.variant): Path(results.judge_sample(cell)) for cell in cells} if cascade else None
    rows = fig7_rows(verdict_files, bootstrap, read_need_verdicts(config["review"]["store"], verdict_files), samples)
    write_fig7(rows, Path(outputs["png"]), Path(outputs["csv"]), bootstrap.confidence, [*run_notes(config), *notes])
    return Done(f"{len(rows)} bars")
