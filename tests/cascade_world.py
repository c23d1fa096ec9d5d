"""A synthetic world for the judge cascade, where the strong judge's full-mode cell means are known.

Each item has a quality shared by every model that answers it (its difficulty). The strong judge's score (0-5) is
the quality plus the model's effect plus noise; the cheap judge's is the strong judge's plus a bias (+0.8 on 0-5 by
default), a bias of its own for each model under test, and noise, clipped to 0-5 as a judge's score is, so that the
clipped bias is not even a constant. S (0-100) follows the quality. The files are the ones the workflow writes
(score items, the cheap judge's verdicts on every item, the strong judge's on the cascade's sample), and the cells
are combined by the workflow's own code (``h2htalk.judge.combine``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from h2htalk.io import write_jsonl_atomic
from h2htalk.judge.cascade import cascade_sample, sized_sample
from h2htalk.judge.combine import CellRecords, add_pseudo_values, combine_records, combine_to_files, summarise_j
from h2htalk.judge.readings import item_readings
from h2htalk.layout import Cell, Layout
from h2htalk.settings import BootstrapSettings, CascadeSettings, GateSettings, ReviewSettings
from h2htalk.tables.table2_pairs import RowItems, compare_rows
from h2htalk.tables.table2_pairs_files import compared_value

GATE = GateSettings(alpha=0.6, tau=3.5, max_spread=2.0, gate_on="J")
FULL_REVIEW = ReviewSettings(mode="gate", sample_per_cell=20, sample_seed=23)
BOOTSTRAP = BootstrapSettings(resamples=100, seed=5, confidence=0.95)
CHEAP, STRONG = "cheap-judge", "strong-judge"


QUALITY_SD = 0.8  # the items' quality, on 0-5


@dataclass(frozen=True)
class Judges:
    """The cheap judge is the strong judge's score plus its bias and ``cheap_noise``; or, with ``correlation``, a
    score with the strong judge's spread correlated ``correlation`` with it (before clipping) plus its bias: a
    weaker judge, not a noisier copy."""

    cheap_bias: float = 0.8  # on 0-5, for every model
    cheap_noise: float = 0.6
    strong_noise: float = 0.7
    correlation: float | None = None


@dataclass(frozen=True)
class Failures:
    """Cheap verdicts that cannot be read: ``share`` of each named model's items, at random or (``weak``) mostly
    on weak answers: an item in the bottom third by the strong judge's score fails with chance 2.5 x share, any
    other with 0.25 x share (5 of 6 failures weak)."""

    share: dict[str, float]
    weak: bool = False


@dataclass(frozen=True)
class World:
    """Items of one subtask answered by several models: their qualities, S, and both judges' scores."""

    ids: list[str]
    clusters: list[str]
    s: dict[str, np.ndarray]  # model -> S per item
    strong: dict[str, np.ndarray]
    cheap: dict[str, np.ndarray]


def make_world(
    seed: int,
    effects: dict[str, float],
    model_bias: dict[str, float],
    items: int = 300,
    judges: Judges = Judges(),
    cluster_size: int = 1,
    subtask: str = "itinerary_basic",
    failures: Failures | None = None,
) -> World:
    """``effects``: each model's true effect on the strong judge's score; ``model_bias``: the cheap judge's bias
    for each model on top of ``judges.cheap_bias``; ``failures``: the cheap verdicts that cannot be read (NaN)."""
    rng = np.random.default_rng(seed)
    quality = rng.normal(0.0, QUALITY_SD, items)
    ids = [f"{subtask}-{i:05d}" for i in range(items)]
    clusters = [f"c{i // cluster_size}" for i in range(items)]
    s, strong, cheap = {}, {}, {}
    spread = np.hypot(QUALITY_SD, judges.strong_noise)  # the strong judge's, before clipping
    for model, effect in effects.items():
        strong[model] = np.clip(2.5 + quality + effect + rng.normal(0.0, judges.strong_noise, items), 0.0, 5.0)
        bias = judges.cheap_bias + model_bias.get(model, 0.0)
        if judges.correlation is None:
            cheap[model] = np.clip(strong[model] + bias + rng.normal(0.0, judges.cheap_noise, items), 0.0, 5.0)
        else:
            rho = judges.correlation
            own = np.sqrt(1.0 - rho**2) * spread * rng.normal(0.0, 1.0, items)
            cheap[model] = np.clip(2.5 + bias + rho * (strong[model] - 2.5) + own, 0.0, 5.0)
        s[model] = np.clip(45.0 + 12.0 * quality + rng.normal(0.0, 10.0, items), 0.0, 100.0)
    for model, share in (failures.share if failures else {}).items():
        chance = np.full(items, share)
        if failures and failures.weak:
            weak = strong[model] <= np.quantile(strong[model], 1 / 3)
            chance = np.where(weak, 2.5 * share, 0.25 * share)
        cheap[model] = np.where(rng.uniform(size=items) < chance, np.nan, cheap[model])
    return World(ids, clusters, s, strong, cheap)


def _verdict(item_id: str, score: float) -> dict[str, Any]:
    """A judge's verdict on an item; NaN: its answer could not be read."""
    read = None if np.isnan(score) else float(score)
    return {
        "id": item_id, "task": "t", "response": "r", "reference": "ref", "judge_mean": read,
        "judge_spread": 0.0 if read is not None else None, "samples": [{"score": read, "evidence": ""}], "flags": [],
    }  # fmt: skip


def cell_records(world: World, cell: Cell, cascade: CascadeSettings | None) -> CellRecords:
    """One model's records as its files would hold them: scores, the cheap judge's verdicts on every item and (in
    cascade mode) the strong judge's on the cascade's sample; in full mode the strong judge's on every item."""
    model = cell.model
    found = zip(world.ids, world.s[model], world.clusters, strict=True)
    scores = {i: {"id": i, "S": float(v), "cluster": c} for i, v, c in found}
    if cascade is None:
        return CellRecords(scores, list(enumerate(map(_verdict, world.ids, world.strong[model]))), None, "full")
    sample = set(
        cascade_sample(cell, world.ids, cascade) if cascade.auto is None else auto_sample(world, cell, cascade)
    )
    strong = {i: _verdict(i, v) for i, v in zip(world.ids, world.strong[model], strict=True) if i in sample}
    return CellRecords(scores, list(enumerate(map(_verdict, world.ids, world.cheap[model]))), strong, "cheap")


def auto_sample(world: World, cell: Cell, cascade: CascadeSettings | None) -> list[str]:
    """The cell's sample as the rubric job sizes it with ``sample_per_cell: auto``: the cheap judge's readable
    values of every item and the strong judge's of the pilot, on the judge reading (0-100), set its size."""
    model, at = cell.model, {i: k for k, i in enumerate(world.ids)}
    cheap = {i: 20.0 * float(v) for i, v in zip(world.ids, world.cheap[model], strict=True) if not np.isnan(v)}
    pilot = cascade_sample(cell, world.ids, cascade)
    strong = {i: 20.0 * float(world.strong[model][at[i]]) for i in pilot}
    return sized_sample(cell, world.ids, cascade, cheap, strong)[0]


def world_cells(world: World, variant: str = "sap") -> list[Cell]:
    subtask = world.ids[0].rsplit("-", 1)[0]
    return [Cell(model, variant, subtask, "usem3") for model in world.strong]


def combine_in_memory(
    world: World,
    cascade: CascadeSettings | None,
    review: ReviewSettings = FULL_REVIEW,
    bootstrap: BootstrapSettings = BOOTSTRAP,
) -> dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]:
    """Every model's J items and summary, as ``combine_to_files`` makes them, without files: model -> both."""
    out = {}
    for cell in world_cells(world):
        items = combine_records(
            cell.model, cell.variant, cell.task, cell_records(world, cell, cascade), GATE, {}, review
        )
        add_pseudo_values(items, review.mode, cascade is not None)
        out[cell.model] = (items, summarise_j(items, bootstrap, review.mode, cascade is not None))
    return out


def write_world(world: World, results: Layout, cascade: CascadeSettings | None) -> list[Cell]:
    """The world's files for every model: scores, the cheap judge's verdicts, the strong judge's on the sample."""
    cells = world_cells(world)
    for cell in cells:
        records = cell_records(world, cell, cascade)
        write_jsonl_atomic(results.score_items(cell), list(records.scores.values()))
        write_jsonl_atomic(results.judge_samples(cell), [v for _, v in records.verdicts])
        write_jsonl_atomic(results.judge_sample(cell), list((records.sample or {}).values()))
    return cells


def full_mode_mean(world: World, model: str, reading: str = "J") -> float:
    """The cell as the strong judge on every item would have it (J100, or the judge's score x 20)."""
    judge = world.strong[model]
    values = 20.0 * (GATE.alpha * world.s[model] / 20.0 + (1 - GATE.alpha) * judge) if reading == "J" else 20 * judge
    return float(values.mean())


def combine_world(
    world: World, root: Path, cascade: CascadeSettings | None, review: ReviewSettings = FULL_REVIEW
) -> dict[str, dict[str, Any]]:
    """Every model's cell combined as the workflow does: model -> its summary."""
    results = Layout(str(root))
    judges = (CHEAP, STRONG) if cascade is not None else None
    return {
        cell.model: combine_to_files(cell, results.cell_path, GATE, BOOTSTRAP, {}, review, judges)
        for cell in write_world(world, results, cascade)
    }


LEVELS = {"itinerary_basic": 207, "itinerary_middle": 444, "itinerary_advanced": 143}  # released sizes


@dataclass(frozen=True)
class Hostile:
    """A world the cascade may meet: a cheap judge ``judges``, its bias per model (on 0-5, on top of
    ``judges.cheap_bias``) and its unreadable verdicts."""

    judges: Judges
    model_bias: dict[str, float]
    failures: Failures | None = None


def levels_worlds(seed: int, effects: dict[str, float], hostile: Hostile) -> dict[str, World]:
    """Levels I-III's worlds at their released sizes (subtask -> world), each from its own seed."""
    return {
        subtask: make_world(
            1000 * k + seed, effects, hostile.model_bias, items, hostile.judges, 1, subtask, hostile.failures
        )
        for k, (subtask, items) in enumerate(LEVELS.items())
    }


def compared_rows(
    combined: dict[str, dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]], reading: str, corrected: bool = True
) -> list[RowItems]:
    """Table 2's rows as ``table2_pairs`` compares them, from each subtask's cells (subtask -> ``combine_in_memory``):
    every item's ``compared_value`` under ``reading``, and each corrected cell's sample; not ``corrected``: the
    judge of every item's own readings (the cheap judge alone, in cascade mode)."""
    models = next(iter(combined.values()))

    def read(item: dict[str, Any]) -> float | None:
        return compared_value(item, reading) if corrected else item_readings(item)[reading]

    values = {m: {t: {i["id"]: v for i in cells[m][0] if (v := read(i)) is not None} for t, cells in combined.items()}
              for m in models}  # fmt: skip
    rated = {m: {t: sum(i["ppi_rated"] for i in cells[m][0]) for t, cells in combined.items()
                 if corrected and any(i["ppi_rated"] for i in cells[m][0])} for m in models}  # fmt: skip
    measures = dict.fromkeys(combined, reading)
    return [RowItems("e", m, m, "g", "sap", values[m], measures, rated=rated[m]) for m in models]


def any_claim(rows: list[RowItems], resamples: int, seed: int) -> bool:
    """Whether Table 2's Holm-corrected comparisons of ``rows`` call any pair separable."""
    return any(p["separable"] for p in compare_rows(rows, {}, BootstrapSettings(resamples, seed, 0.95)).pairs)
