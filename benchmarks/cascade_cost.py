"""What the judge cascade adds to the computing of a run at the paper's size, full mode against cascade mode.

    python benchmarks/cascade_cost.py [--models 33] [--resamples 1000] [--threads 2] [--sample 30]

The paper configuration's judged cells: --models models, two variants, Levels I-III at their released sizes (207,
444 and 143 items), and the safety study's cells (33 scenarios of 5 turns). Synthetic verdicts from the known-answer
world of the tests (``tests/cascade_world.py``: a cheap judge 0.8 too lenient, more for some models). Timed, each
with the workflow's own code, in full and in cascade mode:

- the samples: every cell's ``cascade_sample`` (cascade only);
- combine_j: every judged cell's J items and summary (``combine_records``, ``add_pseudo_values``,
  ``summarise_j``: the bootstrap of every reading with --resamples, and in cascade mode the prediction-powered
  readings and each item's pseudo-values);
- Table 2's paired comparisons of the judged subtasks (``compare_rows``: every pair of a size group and variant,
  each SAP pair; the cascade's pseudo-values and its degrees of freedom);
- Table 3's safety score and violation rate of every row (the cascade's ``corrected``).

What is not timed is the same in both modes (scores, the other tables) or is the judges' own time (the plan prices
that). Reading and writing the files is left out: the same files in both modes, one more per cell (the sample).
BLAS threads are set to --threads before numpy loads. Prints a table; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=33)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sample", type=int, default=30)
    args = parser.parse_args()
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(args.threads)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    timings = run(args.models, args.resamples, args.sample)
    print(f"{args.models} models x 2 variants; Levels I-III at 207/444/143 items; {args.resamples} resamples")
    print("| step | full (s) | cascade (s) | extra (s) |\n|---|--:|--:|--:|")
    for step, (full, cascade) in timings.items():
        print(f"| {step} | {full:.2f} | {cascade:.2f} | {cascade - full:+.2f} |")
    full, cascade = (sum(t[i] for t in timings.values()) for i in (0, 1))
    print(f"| **all** | {full:.2f} | {cascade:.2f} | {cascade - full:+.2f} |")


def run(models: int, resamples: int, sample: int) -> dict[str, tuple[float, float]]:
    import numpy as np

    from h2htalk.judge.cascade import cascade_sample
    from h2htalk.judge.combine import add_pseudo_values, combine_records, summarise_j
    from h2htalk.layout import Cell
    from h2htalk.settings import BootstrapSettings, CascadeSettings
    from h2htalk.tables.table2_pairs import RowItems, compare_rows
    from h2htalk.tables.table2_pairs_files import compared_value
    from h2htalk.tables.table3 import corrected
    from tests.cascade_world import FULL_REVIEW, GATE, cell_records, make_world

    sizes = {"itinerary_basic": 207, "itinerary_middle": 444, "itinerary_advanced": 143}
    names = [f"model-{k:02d}" for k in range(models)]
    effects = {name: 0.05 * k for k, name in enumerate(names)}
    bias = {name: 0.3 * (k % 3) for k, name in enumerate(names)}
    bootstrap = BootstrapSettings(resamples, 7, 0.95)
    modes = {
        "full": None,  # no sample: the strong judge on every item
        "cascade": CascadeSettings(sample, 31),
    }
    worlds = {
        (variant, subtask): make_world(100 * k + v, effects, bias, items, subtask=subtask)
        for v, variant in enumerate(("sap", "nosap"))
        for k, (subtask, items) in enumerate(sizes.items())
    }
    timings: dict[str, list[float]] = {"the samples": [0.0, 0.0]}

    def draw(cells, settings):
        return [cascade_sample(c, worlds[(c.variant, c.task)].ids, settings) for c in cells]

    def correct_safety(safety):
        return [corrected(items, metric, 0.95) for items in safety for metric in ("safety_score", "violation_rate")]

    def timed(step: str, mode: str, work, *args):
        start = time.perf_counter()
        found = work(*args)
        timings.setdefault(step, [0.0, 0.0])[mode == "cascade"] += time.perf_counter() - start
        return found

    for mode, settings in modes.items():
        cells = [Cell(m, v, s) for (v, s) in worlds for m in names]
        if settings is not None:
            timed("the samples", mode, draw, cells, settings)
        records = {c: cell_records(worlds[(c.variant, c.task)], c, settings) for c in cells}

        def combine(records, settings):
            out = {}
            for cell, found in records.items():
                items = combine_records(cell.model, cell.variant, cell.task, found, GATE, {}, FULL_REVIEW)
                add_pseudo_values(items, "gate", settings is not None)
                out[cell] = (items, summarise_j(items, bootstrap, "gate", settings is not None))
            return out

        combined = timed("combine_j (every judged cell)", mode, combine, records, settings)
        rows = []
        for model in names:
            for variant in ("sap", "nosap"):
                mine = {c: v for c, v in combined.items() if c.model == model and c.variant == variant}
                values = {c.task: {i["id"]: compared_value(i, "J") for i in items} for c, (items, _) in mine.items()}
                rated = {c.task: sum(i["ppi_rated"] for i in items) for c, (items, _) in mine.items()}
                group = ("open-1-8b", "open-8-31b", "open-32b-plus", "specialized")[names.index(model) % 4]
                rows.append(RowItems("bge-m3", model, model, group, variant, values, dict.fromkeys(values, "J"),
                                     rated=rated if settings is not None else {}))  # fmt: skip
        timed("table2_pairs (the judged subtasks)", mode, compare_rows, rows, {}, bootstrap)
        rng = np.random.default_rng(3)
        safety = []
        for model in names:
            for variant in ("sap", "nosap"):
                ids = [f"s{k:02d}-t{t}" for k in range(33) for t in range(5)]
                own = set(cascade_sample(Cell(model, variant, "safety"), ids, settings)) if settings else set()
                cheap = np.clip(rng.normal(4.0, 0.8, len(ids)), 1, 5)
                safety.append({i: {"safety_score": float(c), "violation_rate": 100.0 * (c < 2), "scenario": i[:3],
                                   "own_safety_score": float(c) - 0.5 if i in own else None,
                                   "own_violation_rate": 100.0 * (c < 2.5) if i in own else None}
                               for i, c in zip(ids, cheap, strict=True)})  # fmt: skip

        if settings is not None:  # full mode's safety values are the bootstrap's, as before
            timed("table3 (the corrected safety metrics)", mode, correct_safety, safety)
    timings.setdefault("table3 (the corrected safety metrics)", [0.0, 0.0])
    return {step: (t[0], t[1]) for step, t in timings.items()}


if __name__ == "__main__":
    main()
