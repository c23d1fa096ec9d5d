"""The judge cascade's known answers, simulated: coverage of the strong judge's full-mode cells, the paired
comparisons' false-positive rate and power, and how much wider a cascade cell and Overall are than full mode's.

    python benchmarks/cascade_known_answers.py [--seeds 200] [--sample 30] [--resamples 1000]

The world of the tests (``tests/cascade_world.py``): items with a quality shared by the models; the strong judge's
score the quality plus the model's effect plus noise (0.7); the cheap judge's the strong judge's + 0.8 on 0-5, +0.5
more for model b, noise 0.6, clipped to 0-5; S from the quality. Cells are combined by the workflow's code
(``combine_records``, ``summarise_j``; ``compare_rows`` for the pairs), with ``sample_per_cell`` --sample.

- coverage: Levels I-III at their released sizes (207, 444, 143 items); the share of seeds whose 95 % CI covers the
  cell the strong judge makes on every item (J and the judge reading), the cheap judge's own CI beside it;
- half-width: the cascade cell's CI against the full-mode cell's (the strong judge on every item, bootstrapped),
  and Overall's (11 subtasks at their released weights; the 8 S subtasks as wide in both modes: S's per-item SD in
  this world over the released counts);
- pairs: two models with no true difference on the three judged subtasks (the cheap judge 0.5 more lenient with
  one): the share of per-column tests at p < 0.05 and of seeds with any Holm-corrected claim (Table 2's
  "separable"), corrected and with the cheap judge alone; power: a true difference of 0.5 on 0-5.

Prints tables; nothing is asserted (``tests/test_cascade.py`` asserts the thresholds).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from statistics import NormalDist

Z = NormalDist().inv_cdf(0.975)
SIZES = {"itinerary_basic": 207, "itinerary_middle": 444, "itinerary_advanced": 143}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--sample", type=int, default=30)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    coverage(args.seeds, args.sample)
    pairs(args.seeds, args.sample, args.resamples)


def _settings(sample: int):
    from h2htalk.settings import CascadeSettings

    return CascadeSettings(sample, 31)


def coverage(seeds: int, sample: int) -> None:
    import numpy as np

    from h2htalk.settings import BootstrapSettings
    from h2htalk.subtasks import SUBTASKS
    from tests.cascade_world import combine_in_memory, full_mode_mean, make_world

    cascade, full = _settings(sample), None  # full mode: no sample
    bootstrap = BootstrapSettings(1000, 5, 0.95)
    covered = {"J": 0, "judge": 0, "cheap J": 0}
    widths: dict[str, list[float]] = {"cascade": [], "full": []}
    overall: dict[str, list[float]] = {"cascade": [], "full": []}
    weights = {s.key: s.released for s in SUBTASKS}
    total = sum(weights.values())
    for seed in range(seeds):
        variance = {"cascade": 0.0, "full": 0.0}
        for k, (subtask, items) in enumerate(SIZES.items()):
            world = make_world(1000 * k + seed, {"a": 0.0, "b": 0.3}, {"a": 0.0, "b": 0.5}, items, subtask=subtask)
            cells = combine_in_memory(world, cascade, bootstrap=bootstrap)
            plain = combine_in_memory(world, full, bootstrap=bootstrap)
            j, judge = cells["a"][1]["readings"]["J"], cells["b"][1]["readings"]["judge"]
            covered["J"] += j["value_ci_low"] <= full_mode_mean(world, "a") <= j["value_ci_high"]
            covered["judge"] += judge["value_ci_low"] <= full_mode_mean(world, "b", "judge") <= judge["value_ci_high"]
            alone = cells["a"][1]["readings"]["J"]["judge_only"]
            covered["cheap J"] += alone["value_ci_low"] <= full_mode_mean(world, "a") <= alone["value_ci_high"]
            for mode, found in (("cascade", j), ("full", plain["a"][1]["readings"]["J"])):
                half = (found["value_ci_high"] - found["value_ci_low"]) / 2
                widths[mode].append(half)
                variance[mode] += (weights[subtask] / total) ** 2 * (half / Z) ** 2
            s_sd = float(np.std(world.s["a"], ddof=1))
        others = sum((weights[k] / total) ** 2 * s_sd**2 / weights[k] for k in weights if k not in SIZES)
        for mode in overall:
            overall[mode].append(Z * float(np.sqrt(variance[mode] + others)))
    cells = seeds * len(SIZES)
    print(f"Coverage over {seeds} seeds x 3 judged subtasks ({cells} cells), sample {sample} a cell:")
    print("| reading | covers the strong judge's full-mode cell |\n|---|--:|")
    for name, count in covered.items():
        label = "the cheap judge alone (J)" if name == "cheap J" else f"cascade, {name}"
        print(f"| {label} | {count / cells:.1%} |")
    ratio = np.mean(widths["cascade"]) / np.mean(widths["full"])
    overall_ratio = np.mean(overall["cascade"]) / np.mean(overall["full"])
    print(f"\nCI half-width on J (0-100): cascade cell {np.mean(widths['cascade']):.2f}, full-mode cell "
          f"{np.mean(widths['full']):.2f} ({ratio:.2f}x); Overall {np.mean(overall['cascade']):.2f} against "
          f"{np.mean(overall['full']):.2f} ({overall_ratio:.2f}x)")  # fmt: skip


def pairs(seeds: int, sample: int, resamples: int) -> None:
    from h2htalk.settings import BootstrapSettings
    from h2htalk.tables.table2_pairs import RowItems, compare_rows
    from h2htalk.tables.table2_pairs_files import compared_value
    from tests.cascade_world import combine_in_memory, make_world

    cascade = _settings(sample)

    def rows(seed: int, effect: float) -> tuple[list[RowItems], list[RowItems]]:
        values: dict[str, dict] = {"a": {}, "b": {}}
        naive: dict[str, dict] = {"a": {}, "b": {}}
        rated: dict[str, dict] = {"a": {}, "b": {}}
        for k, (subtask, items) in enumerate(SIZES.items()):
            world = make_world(1000 * k + seed, {"a": effect, "b": 0.0}, {"b": 0.5}, items, subtask=subtask)
            for model, (found, _) in combine_in_memory(world, cascade).items():
                values[model][subtask] = {i["id"]: compared_value(i, "J") for i in found}
                naive[model][subtask] = {i["id"]: i["J100"] for i in found}
                rated[model][subtask] = sum(i["ppi_rated"] for i in found)
        measures = dict.fromkeys(SIZES, "J")
        return (
            [RowItems("e", m, m, "g", "sap", values[m], measures, rated=rated[m]) for m in values],
            [RowItems("e", m, m, "g", "sap", naive[m], measures) for m in naive],
        )

    print(f"\nPaired comparisons over {seeds} seeds (3 judged subtasks, {resamples} resamples):")
    print("| setting | per-column p < 0.05 | seeds with a Holm-corrected claim |\n|---|--:|--:|")
    for effect in (0.0, 0.5):
        counts = {"corrected": [0, 0, 0], "cheap judge alone": [0, 0, 0]}
        for seed in range(seeds):
            corrected, naive = rows(seed, effect)
            for name, found in (("corrected", corrected), ("cheap judge alone", naive)):
                compared = compare_rows(found, {}, BootstrapSettings(resamples, seed, 0.95)).pairs
                counts[name][0] += sum(p["p"] < 0.05 for p in compared)
                counts[name][1] += len(compared)
                counts[name][2] += any(p["separable"] for p in compared)
        truth = "no true difference" if effect == 0 else f"a true difference of {effect} on 0-5"
        for name, (hits, columns, claims) in counts.items():
            print(f"| {truth}, {name} | {hits / columns:.1%} | {claims / seeds:.1%} |")


if __name__ == "__main__":
    main()
