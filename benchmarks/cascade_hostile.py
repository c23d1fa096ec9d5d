"""The judge cascade in a hostile world: coverage, false positives, power and width against full mode over a grid
of cheap judges, through the workflow's own code.

    python benchmarks/cascade_hostile.py [--seeds 200] [--sample 30] [--resamples 200] [--correlations 0.4 0.6 0.8]
        [--target-half-width 4.0]

The world (``tests/cascade_world.py``): Levels I-III at their released sizes (207, 444, 143 items), two models A and
B whose strong-judge scores (0-5) are the items' quality (SD 0.8) plus the model's effect plus noise (0.7), S from
the quality. The cheap judge has the strong judge's spread and correlation rho with it (0.4, 0.6, 0.8, before
clipping to 0-5); its bias is +1 on 0-5 for both models ("same") or for A alone ("A only"); it cannot be read on
10 % of A's items, at random or mostly on weak answers (the bottom third by the strong judge's score fails with
chance 25 %, the rest 2.5 %). Cells are combined by ``combine_records``, ``add_pseudo_values`` and ``summarise_j``,
sampled by ``cascade_sample`` (``--sample`` a cell), compared by ``compare_rows`` on ``compared_value``. With
``--target-half-width`` each cell's sample is sized as ``sample_per_cell: auto`` sizes it (``sized_sample``: a pilot
of ``--sample`` items measures the spread, the sample grows until its 95 % half-width on the judge reading meets the
target), and the table adds the sizes chosen and the realised half-width.

Per grid cell, over ``--seeds`` seeds, on the judge reading (the judge's score x 20) and on J (0-100):

- coverage: the share of A's cells (3 a seed) whose 95 % CI covers the cell the strong judge makes on every item
  (full mode's value), and the mean error of A's value (0-100);
- false positives: no true difference; the share of seeds in which Table 2's Holm-corrected pairs call any of the
  three columns separable (and the same of the cheap judge alone, uncorrected, its unread items left out);
- power: the same share with A better by 0.3 and by 0.5 on the strong judge's 0-5;
- width: the mean CI half-width of a cascade cell over full mode's (the strong judge on every item, bootstrapped
  with 1,000 resamples), all sizes pooled, with the range over the three sizes.

``--part shared`` says why one sample shared by the models buys little power: the correlation of the two models'
y - g on the same items at each rho, and in one grid cell (rho 0.6, the same bias, failures at random, A better by
0.3) the spread of the pair's difference over seeds and the share of seeds that find it, with the sample shared or
drawn per model, and the pair's degrees of freedom counted as one sample's or two samples'.

Full mode's own row does not depend on the cheap judge. A second table (``--part gate`` prints it alone) runs
review.mode gate with people on the cheap judge of rho 0.6, biased for A alone, failing on A's weak answers: the
share of items sent to people per model and the coverage of full mode's gated cell. Prints tables; nothing is asserted
(``tests/test_cascade.py`` asserts one hostile grid cell).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import NormalDist

Z = NormalDist().inv_cdf(0.975)
READINGS = ("judge", "J")
EFFECTS = (0.0, 0.3, 0.5)


@dataclass
class Tally:
    """What one grid cell (or full mode) gathers over the seeds."""

    covered: dict[str, int] = field(default_factory=lambda: dict.fromkeys(READINGS, 0))
    error: dict[str, float] = field(default_factory=lambda: dict.fromkeys(READINGS, 0.0))
    cells: int = 0
    claims: dict[tuple[float, str], int] = field(default_factory=dict)
    half: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (reading, subtask) -> half-widths
    sizes: dict[str, list[int]] = field(default_factory=dict)  # subtask -> the samples drawn (both models)

    def claim(self, effect: float, reading: str, found: bool) -> None:
        self.claims[(effect, reading)] = self.claims.get((effect, reading), 0) + found

    def width(self, reading: str, subtask: str, summary: dict) -> None:
        found = summary["readings"][reading]
        self.half.setdefault((reading, subtask), []).append((found["value_ci_high"] - found["value_ci_low"]) / 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--sample", type=int, default=30)
    parser.add_argument("--resamples", type=int, default=200, help="the paired comparisons' bootstrap")
    parser.add_argument("--correlations", type=float, nargs="+", default=[0.4, 0.6, 0.8])
    parser.add_argument(
        "--part", choices=("both", "matrix", "gate", "shared"), default="both", help="which table to print"
    )
    parser.add_argument(
        "--target-half-width", type=float, help="size each cell's sample for this half-width (0-100; --sample: pilot)"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    started = time.perf_counter()
    if args.part in ("both", "matrix"):
        matrix(args.seeds, _settings(args.sample, args.target_half_width), args.resamples, args.correlations)
    if args.part in ("both", "gate"):
        gate(args.seeds, _settings(args.sample, args.target_half_width))
    if args.part == "shared":
        shared(args.seeds, _settings(args.sample), args.resamples, args.correlations)
    print(f"\n{time.perf_counter() - started:.0f} s")


def grid(correlations: list[float]) -> dict[tuple[float, str, str], object]:
    """(rho, bias, failures) -> the world's cheap judge (``Hostile``)."""
    from tests.cascade_world import Failures, Hostile, Judges

    biases = {"same": {"a": 1.0, "b": 1.0}, "A only": {"a": 1.0}}
    failures = {"at random": Failures({"a": 0.1}), "weak answers": Failures({"a": 0.1}, weak=True)}
    return {
        (rho, bias, failing): Hostile(Judges(cheap_bias=0.0, correlation=rho), biases[bias], failures[failing])
        for rho in correlations
        for bias in biases
        for failing in failures
    }


def _settings(sample: int, target: float | None = None):
    """The rubric judge's cascade: ``sample`` a cell, or (``target``) a pilot of ``sample`` and the size that meets
    the target half-width (the assumed correlation and spread are the schema's defaults, used by no measured cell)."""
    from h2htalk.settings import AutoSample, CascadeSettings

    auto = AutoSample(target, sample, 0.6, 20.0) if target is not None else None
    return CascadeSettings(sample, 31, auto)


def matrix(seeds: int, cascade, resamples: int, correlations: list[float]) -> None:
    import numpy as np

    from h2htalk.settings import BootstrapSettings
    from tests.cascade_world import LEVELS, any_claim, combine_in_memory, compared_rows, full_mode_mean, levels_worlds

    full = None  # full mode: no sample
    worlds_of = grid(correlations)
    tallies = {key: Tally() for key in worlds_of}
    plain = Tally()
    first = next(iter(worlds_of.values()))
    for seed in range(seeds):
        if seed and seed % 20 == 0:
            print(f"{seed} seeds", file=sys.stderr, flush=True)
        for effect in EFFECTS:
            effects = {"a": effect, "b": 0.0}
            # full mode: the strong judge on every item, the same in every grid cell (the cheap judge is drawn
            # after it, so a grid cell's world has the same strong judge and S)
            worlds = levels_worlds(seed, effects, first)
            resampled = BootstrapSettings(1000 if effect == 0 else 100, 5, 0.95)
            combined = {task: combine_in_memory(w, full, bootstrap=resampled) for task, w in worlds.items()}
            for reading in READINGS:
                plain.claim(effect, reading, any_claim(compared_rows(combined, reading), resamples, seed))
                for task in LEVELS if effect == 0 else ():
                    plain.width(reading, task, combined[task]["a"][1])
            for key, hostile in worlds_of.items():
                tally = tallies[key]
                worlds = levels_worlds(seed, effects, hostile)
                combined = {task: combine_in_memory(w, cascade) for task, w in worlds.items()}
                for reading in READINGS:
                    tally.claim(effect, reading, any_claim(compared_rows(combined, reading), resamples, seed))
                if effect != 0:
                    continue
                for reading in READINGS:  # the cheap judge alone, uncorrected (its failures left out)
                    alone = any_claim(compared_rows(combined, reading, corrected=False), resamples, seed)
                    tally.claim(-1.0, reading, alone)
                for task, world in worlds.items():
                    tally.sizes.setdefault(task, []).extend(
                        combined[task][m][1]["cascade"]["sample_size"] for m in "ab"
                    )
                    summary = combined[task]["a"][1]
                    tally.cells += 1
                    for reading in READINGS:
                        found, truth = summary["readings"][reading], full_mode_mean(world, "a", reading)
                        tally.covered[reading] += found["value_ci_low"] <= truth <= found["value_ci_high"]
                        tally.error[reading] += found["value"] - truth
                        tally.width(reading, task, summary)

    def width(tally: Tally, reading: str) -> str:
        ratios = [np.mean(tally.half[(reading, t)]) / np.mean(plain.half[(reading, t)]) for t in LEVELS]
        pooled = np.mean([h for t in LEVELS for h in tally.half[(reading, t)]])
        ratio = pooled / np.mean([h for t in LEVELS for h in plain.half[(reading, t)]])
        return f"{ratio:.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"

    def share(tally: Tally, effect: float, reading: str) -> str:
        return f"{tally.claims[(effect, reading)] / seeds:.1%}"

    def sizes(tally: Tally) -> str:
        """The samples chosen, median [10th-90th percentile], by cell size from the smallest; the mean half-width."""
        chosen = " / ".join(
            "{:.0f} [{:.0f}-{:.0f}]".format(*np.percentile(tally.sizes[t], [50, 10, 90]))
            for t in sorted(LEVELS, key=LEVELS.get)
        )
        return f" {chosen} | {np.mean([h for t in LEVELS for h in tally.half[('judge', t)]]):.2f} |"

    auto = cascade.auto
    drawn = f"sample {cascade.sample_per_cell} a cell" if auto is None else (
        f"each cell's sample sized for a half-width of {auto.target_half_width:g} (judge reading) from a"
        f" {cascade.sample_per_cell}-item pilot"
    )  # fmt: skip
    print(
        f"The cascade in a hostile world: Levels I-III at {'/'.join(map(str, LEVELS.values()))} items, {drawn},"
        f" {seeds} seeds, pairs with {resamples} resamples; per reading judge / J"
    )
    sized = (
        ("", "")
        if auto is None
        else (
            " sample chosen, median [10th-90th] by cell size 143 / 207 / 444 | half-width, judge reading |",
            "--:|--:|",
        )
    )
    print(
        "| rho | cheap bias | A's failures | coverage | error of A (0-100) | false positives | power at 0.3 "
        f"| power at 0.5 | half-width / full mode's | false positives, the cheap judge alone |{sized[0]}"
        f"\n|---|---|---|--:|--:|--:|--:|--:|--:|--:|{sized[1]}"
    )
    for (rho, bias, failing), tally in tallies.items():
        cover = " / ".join(f"{tally.covered[r] / tally.cells:.1%}" for r in READINGS)
        error = " / ".join(f"{tally.error[r] / tally.cells:+.2f}" for r in READINGS)
        claims = [" / ".join(share(tally, e, r) for r in READINGS) for e in EFFECTS]
        widths = " / ".join(width(tally, r) for r in READINGS)
        alone = " / ".join(share(tally, -1.0, r) for r in READINGS)
        chosen = sizes(tally) if auto else ""
        print(
            f"| {rho:g} | {bias} | {failing} | {cover} | {error} | {' | '.join(claims)} | {widths} | {alone} |{chosen}"
        )
    claims = [" / ".join(share(plain, e, r) for r in READINGS) for e in EFFECTS]
    half = " / ".join(f"{np.mean([h for t in LEVELS for h in plain.half[(r, t)]]):.2f}" for r in READINGS)
    print(f"| full mode | | | | | {' | '.join(claims)} | half-width {half} | |{' all | |' if auto else ''}")


def gate(seeds: int, cascade) -> None:
    """review.mode gate in cascade mode: people rate the sampled items the strong judge put under tau."""
    import numpy as np

    from h2htalk.judge.combine import combine_j, combine_records, summarise_j
    from tests.cascade_world import (
        BOOTSTRAP,
        FULL_REVIEW,
        GATE,
        LEVELS,
        Failures,
        Hostile,
        Judges,
        cell_records,
        levels_worlds,
        world_cells,
    )

    gate_at = replace(GATE, tau=2.4)  # this world's J centres on 2.35: tau 3.5 would send nearly every item
    hostile = Hostile(Judges(cheap_bias=0.0, correlation=0.6), {"a": 1.0}, Failures({"a": 0.1}, weak=True))
    sent = {m: {"cascade": [], "full": [], "cheap": []} for m in ("a", "b")}
    covered = {(m, r): 0 for m in ("a", "b") for r in READINGS}
    for seed in range(seeds):
        for task, world in levels_worlds(seed, {"a": 0.0, "b": 0.0}, hostile).items():
            rng = np.random.default_rng(50_000 + seed)
            for cell in world_cells(world):
                model, strong, s = cell.model, world.strong[cell.model], world.s[cell.model]
                people = np.clip(strong + 0.4 + rng.normal(0.0, 0.4, strong.size), 0.0, 5.0)
                records = cell_records(world, cell, cascade)
                first = combine_records(model, cell.variant, task, records, gate_at, {}, FULL_REVIEW)
                asked = {i["id"] for i in first if i["review"]}
                sent[model]["cascade"].append(len(asked) / sum(i["cascade_sampled"] for i in first))
                full_gated = combine_j(s, strong, gate_at.alpha) < gate_at.tau
                sent[model]["full"].append(float(full_gated.mean()))
                cheap = world.cheap[model]
                sent[model]["cheap"].append(float(np.mean(np.isnan(cheap) | (combine_j(s, cheap, 0.6) < gate_at.tau))))
                rated = {
                    (model, cell.variant, task, i): {"score": float(p), "ratings": [{"file": "q", "score": float(p)}]}
                    for i, p in zip(world.ids, people, strict=True)
                    if i in asked
                }
                items = combine_records(model, cell.variant, task, records, gate_at, rated, FULL_REVIEW)
                summary = summarise_j(items, BOOTSTRAP, "gate", True)
                judged = np.where(full_gated, people, strong)
                truth = {"judge": 20.0 * judged.mean(), "J": 20.0 * combine_j(s, judged, gate_at.alpha).mean()}
                for reading in READINGS:
                    found = summary["readings"][reading]
                    covered[(model, reading)] += found["value_ci_low"] <= truth[reading] <= found["value_ci_high"]
    cells = seeds * len(LEVELS)
    print(
        f"\nreview.mode gate (tau {gate_at.tau} on J, this world's median; people the strong judge + 0.4, noise 0.4):"
        " rho 0.6, the cheap judge +1 for A alone, 10 % of A's cheap verdicts unread, mostly weak answers;"
        f" {seeds} seeds x 3 cells a model"
    )
    print(
        "| model | sent to people: cascade (of its sample) | full mode (of the cell) | the cheap judge's J would send"
        " | coverage of full mode's gated cell, judge / J |\n|---|--:|--:|--:|--:|"
    )
    for model in ("a", "b"):
        shares = " | ".join(f"{np.mean(sent[model][k]):.1%}" for k in ("cascade", "full", "cheap"))
        cover = " / ".join(f"{covered[(model, r)] / cells:.1%}" for r in READINGS)
        print(f"| {model.upper()} | {shares} | {cover} |")


def shared(seeds: int, cascade, resamples: int, correlations: list[float]) -> None:
    """One sample shared by the models against a sample per model, and the pair's degrees of freedom counted as
    one sample's (the code's) or two samples' (its count before the samples were shared)."""
    from unittest import mock

    import numpy as np

    import h2htalk.tables.table2_pairs as pairs
    from h2htalk.judge.cascade import cascade_sample
    from h2htalk.layout import Cell
    from h2htalk.people.prediction_powered import sample_order
    from h2htalk.settings import BootstrapSettings
    from tests.cascade_world import LEVELS, combine_in_memory, compared_rows, levels_worlds, make_world

    print("| rho | correlation of A's and B's y - g on the same items (444 items, 0-5) |\n|--:|--:|")
    for (rho, bias, failing), hostile in grid(correlations).items():
        if bias == "same" and failing == "at random":
            effects = {"a": 0.0, "b": 0.0}
            worlds = [make_world(seed, effects, hostile.model_bias, 444, hostile.judges) for seed in range(seeds)]
            found = [np.corrcoef(w.strong["a"] - w.cheap["a"], w.strong["b"] - w.cheap["b"])[0, 1] for w in worlds]
            print(f"| {rho:g} | {np.mean(found):+.3f} |")

    def own_sample(cell: Cell, ids: list[str], settings, size: int | None = None) -> list[str]:
        """Each model's sample from its own order of the items (the cascade before the samples were shared)."""
        return sample_order(cell, ids, settings.sample_seed)[: settings.sample_per_cell]

    one_sample = pairs._sample_df

    def two_samples(rows, task, index):
        """A pair's degrees of freedom as the sum of its rows' samples'."""
        own, _ = one_sample(rows, task, index)
        finite = np.where(np.isinf(own), 0.0, own)
        either = ~np.isinf(own[index[:, 0]]) | ~np.isinf(own[index[:, 1]])
        return own, np.where(either, finite[index[:, 0]] + finite[index[:, 1]], np.inf)

    hostile = grid([0.6])[(0.6, "same", "at random")]
    print(
        f"\nrho 0.6, the same bias, A's failures at random, A better by 0.3; {seeds} seeds, pairs with {resamples}"
        " resamples, judge reading (0-100)\n| sample | the difference's spread over seeds, Levels I / II / III "
        "| found, one sample's degrees of freedom | found, two samples' |\n|---|--:|--:|--:|"
    )
    for name, sampler in (("shared", cascade_sample), ("per model", own_sample)):
        differences, found = [], {one_sample: 0, two_samples: 0}
        for seed in range(seeds):
            with mock.patch("tests.cascade_world.cascade_sample", sampler):
                worlds = levels_worlds(seed, {"a": 0.3, "b": 0.0}, hostile)
                rows = compared_rows({t: combine_in_memory(w, cascade) for t, w in worlds.items()}, "judge")
            for df in found:
                with mock.patch.object(pairs, "_sample_df", df):
                    compared = pairs.compare_rows(rows, {}, BootstrapSettings(resamples, seed, 0.95)).pairs
                found[df] += any(p["separable"] for p in compared)
            differences.append([p["difference"] for p in compared if p["column"] in LEVELS])
        spread = " / ".join(f"{v:.2f}" for v in np.std(differences, axis=0, ddof=1))
        shares = " | ".join(f"{count / seeds:.1%}" for count in found.values())
        print(f"| {name} | {spread} | {shares} |")


if __name__ == "__main__":
    main()
