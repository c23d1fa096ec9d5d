"""Table 2's paired comparisons at the paper's size: the vectorised engine against a per-pair loop, one run.

    python benchmarks/paired_tests.py [--models 37] [--resamples 10000] [--threads 2] [--naive-pairs 6]

Synthetic rows: --models models in four size groups, two variants each, answering every released item of the
11 subtasks (4,589 a row: the release's counts); an item's value is its difficulty (shared by all rows) plus the
row's own noise; the three judged subtasks miss 1 % of their items at random, row by row, as missing judge
answers do. Comparisons: every pair of rows of a group and variant, and each model's SAP row against its
no-SAP row, per subtask, Avg and Overall, with 10,000 resamples (the paper study's setting would be 1,000).

(a) this engine (``h2htalk.tables.table2_pairs.compare_rows``): each subtask's items resampled once, every row's
    and pair's resampled means one matrix product, Holm and rank intervals from the same resamples.
(b) a per-pair loop: for each pair and subtask, the items both rows answered are drawn resample by resample
    (index arrays, as ``scoring.bootstrap`` draws them for one cell), then Avg and Overall combined, CI and
    p-value computed. Timed on --naive-pairs pairs and extrapolated linearly to all of them; its numbers are
    checked against the engine's for those pairs (the same seeds give the same resamples).

BLAS threads are set to --threads before numpy loads. Prints a table; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=37)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--naive-pairs", type=int, default=6)
    parser.add_argument("--seed", type=int, default=20250101)
    args = parser.parse_args()
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(args.threads)
    if "numpy" in sys.modules:
        raise SystemExit("numpy was loaded before the thread count was set")

    import numpy as np

    from h2htalk.settings import BootstrapSettings
    from h2htalk.subtasks import JUDGED, SUBTASKS
    from h2htalk.tables.table2_pairs import compare_rows

    weights = {s.key: s.released for s in SUBTASKS}
    rows = synthetic_rows(args.models, args.seed, JUDGED)
    settings = BootstrapSettings(args.resamples, args.seed, 0.95)
    started = time.perf_counter()
    result = compare_rows(rows, weights, settings)
    engine = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    pairs = {(r["comparison"], r["model_a"], r["variant_a"], r["model_b"], r["variant_b"]) for r in result.pairs}

    sample = sorted(pairs)[: args.naive_pairs]
    by_key = {(r.model, r.variant): r for r in rows}
    started = time.perf_counter()
    naive = {key: naive_pair(by_key[key[1:3]], by_key[key[3:5]], weights, settings, np) for key in sample}
    naive_s = time.perf_counter() - started
    extrapolated = naive_s / len(sample) * len(pairs)

    engine_overall = {
        (r["comparison"], r["model_a"], r["variant_a"], r["model_b"], r["variant_b"]): r
        for r in result.pairs
        if r["column"] == "overall"
    }
    gap = max(
        abs(naive[key][name] - engine_overall[key][name])
        for key in sample
        for name in ("difference", "ci_low", "ci_high")
    )
    items = sum(weights.values())
    print(f"rows: {len(rows)} ({args.models} models x 2 variants), {items} items a row, {args.resamples} resamples,")
    print(f"{len(pairs)} pairs x 15 columns = {len(result.pairs)} comparisons; BLAS threads: {args.threads}")
    print()
    print("| method | pairs timed | wall time | all pairs | per pair |")
    print("|---|---|---|---|---|")
    print(f"| engine (vectorised, resamples shared) | {len(pairs)} | {engine:.1f} s | {engine:.1f} s | "
          f"{1000 * engine / len(pairs):.0f} ms |")  # fmt: skip
    print(f"| per-pair loop (index arrays) | {len(sample)} | {naive_s:.1f} s | {extrapolated:.0f} s (extrapolated) | "
          f"{1000 * naive_s / len(sample):.0f} ms |")  # fmt: skip
    print()
    print(f"speed-up: {extrapolated / engine:.0f}x; peak memory (max RSS): {peak_mb:.0f} MB")
    print(f"largest difference between the two on Overall (difference, CI bounds) of the timed pairs: {gap:.2e}")


def synthetic_rows(models: int, seed: int, judged: tuple[str, ...]) -> list:
    import numpy as np

    from h2htalk.subtasks import SUBTASKS
    from h2htalk.tables.table2_pairs import RowItems

    rng = np.random.default_rng(seed)
    groups = ("open-1-8b", "open-8-31b", "open-32b-plus", "specialized")
    difficulty = {s.key: rng.normal(0, 12, s.released) for s in SUBTASKS}
    rows = []
    for model in range(models):
        skill = rng.normal(0, 2)
        for variant in ("sap", "nosap"):
            values, measures = {}, {}
            for s in SUBTASKS:
                scores = 45 + skill + difficulty[s.key] + rng.normal(0, 10, s.released)
                kept = rng.random(s.released) >= (0.01 if s.key in judged else 0.0)
                values[s.key] = {
                    f"{s.key}-{i:05d}": float(v) for i, (v, k) in enumerate(zip(scores, kept, strict=True)) if k
                }
                measures[s.key] = "J" if s.key in judged else "S"
            group = groups[model * len(groups) // models]
            rows.append(RowItems("bge-m3", f"m{model:02d}", f"Model {model:02d}", group, variant, values, measures))
    return rows


def naive_pair(a, b, weights: dict[str, float], settings, np) -> dict[str, float]:
    """One pair the straightforward way: subtask by subtask, the shared items' differences resampled with index
    arrays; Overall as the fixed-weight mean of the subtasks' resampled differences."""
    from h2htalk.subtasks import SUBTASK_KEYS

    total = sum(weights.values())
    observed, resampled = 0.0, np.zeros(settings.resamples)
    for position, key in enumerate(SUBTASK_KEYS):
        ids = sorted(set(a.values[key]) | set(b.values[key]))
        shared = [i for i in ids if i in a.values[key] and i in b.values[key]]
        where = {item: n for n, item in enumerate(ids)}
        diff = np.zeros(len(ids))
        mask = np.zeros(len(ids))
        for item in shared:
            diff[where[item]], mask[where[item]] = a.values[key][item] - b.values[key][item], 1.0
        rng = np.random.default_rng((settings.seed, position))
        means = np.empty(settings.resamples)
        for start in range(0, settings.resamples, 100):
            size = min(100, settings.resamples - start)
            index = rng.integers(0, len(ids), size=(size, len(ids)))
            means[start : start + size] = diff[index].sum(axis=1) / mask[index].sum(axis=1)
        observed += weights[key] / total * diff.sum() / mask.sum()
        resampled += weights[key] / total * means
    low, high = np.quantile(resampled, [0.025, 0.975])
    return {"difference": observed, "ci_low": low, "ci_high": high}


if __name__ == "__main__":
    main()
