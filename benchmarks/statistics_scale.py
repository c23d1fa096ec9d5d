"""How Table 2's paired comparisons and the judged cells' combination grow with the items, in one process.

    python benchmarks/statistics_scale.py --upstream-dir /path/to/H2HTalk/data [--sizes 100 400 all]
        [--resamples 1000] [--out R.json]

The two statistical stages of the paper run whose work grows with the items (``table2_pairs``: every pair of
rows compared by the paired cluster bootstrap, each row's rank interval; ``combine_j``: a judged cell's J, its
prediction-powered correction in cascade mode, its pseudo-values and its bootstrap CIs), measured on made-up
values at the item counts of each size: per subtask the released references (``--upstream-dir``), at most
``size`` of them; rows: 3 models x 2 variants, items in conversations of 3 (the cluster bootstrap), seeded.
Beside them, the clusters the bootstrap resamples by, found in those references (``score`` and ``table2_pairs``
find them: ``h2htalk.data.conversations``).
Per stage and size: CPU seconds of this process (``time.process_time``: what the load of other processes does
not change) and the peak of the memory Python allocated (tracemalloc); then the growth exponent from each size to
the next (log CPU ratio over log items ratio: 1 is linear). What reads and writes the files around them is not
here: ``paper_scale.py`` measures the stages' jobs whole.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from h2htalk.data.conversations import bootstrap_groups
from h2htalk.judge.combine import CellRecords, add_pseudo_values, combine_records, summarise_j
from h2htalk.settings import GATE, BootstrapSettings, GateSettings, ReviewSettings
from h2htalk.subtasks import SUBTASKS
from h2htalk.tables.table2_pairs import RowItems, compare_rows

MODELS, VARIANTS, CONVERSATION = 3, ("sap", "nosap"), 3


def released(upstream: Path) -> dict[str, list[str]]:
    """The references of each subtask in the release, in its order."""
    return {
        s.key: [json.loads(line)["response"] for line in (upstream / s.upstream_file).open(encoding="utf-8")
                if line.strip()]
        for s in SUBTASKS
    }  # fmt: skip


def cluster_all(ids: dict[str, list[str]], texts: dict[str, list[str]]) -> None:
    for task, task_ids in ids.items():
        bootstrap_groups(task_ids, texts[task][: len(task_ids)])


def item_ids(counts: dict[str, int]) -> dict[str, list[str]]:
    return {task: [f"{task}-{line:05d}" for line in range(count)] for task, count in counts.items()}


def table2_rows(ids: dict[str, list[str]], rng: np.random.Generator) -> list[RowItems]:
    """Every model and variant's row: S per item, the items in conversations of CONVERSATION."""
    clusters = {
        task: {i: task_ids[k - k % CONVERSATION] for k, i in enumerate(task_ids)} for task, task_ids in ids.items()
    }
    return [
        RowItems(
            "bge-m3", f"model-{m}", f"Model {m}", "small", variant,
            {task: dict(zip(task_ids, rng.normal(50.0, 10.0, len(task_ids)).tolist(), strict=True))
             for task, task_ids in ids.items()},
            dict.fromkeys(ids, "S"), clusters,
        )
        for m in range(MODELS)
        for variant in VARIANTS
    ]  # fmt: skip


def judged_cell(task_ids: list[str], sample: int | None, rng: np.random.Generator) -> CellRecords:
    """One judged cell's scores and verdicts; with ``sample``, the own judge's verdicts on a sample (cascade)."""

    def verdict(item_id: str) -> dict[str, Any]:
        score = float(rng.uniform(0.0, 5.0))
        samples = [{"score": score, "evidence": "..."}]
        return {"id": item_id, "judge_mean": score, "judge_spread": 0.0, "task": "", "response": "", "reference": "",
                "samples": samples, "flags": []}  # fmt: skip

    scores = {
        i: {"id": i, "S": float(rng.uniform(20.0, 80.0)), "flags": [], "cluster": task_ids[k - k % CONVERSATION]}
        for k, i in enumerate(task_ids)
    }
    verdicts = [(line, verdict(i)) for line, i in enumerate(task_ids, start=1)]
    own = None
    if sample is not None:
        own = {i: verdict(i) for i in rng.choice(task_ids, size=min(sample, len(task_ids)), replace=False)}
    return CellRecords(scores, verdicts, own, "made up")


def combine_cells(cells: dict[str, CellRecords], cascade: bool, bootstrap: BootstrapSettings) -> None:
    gate = GateSettings(alpha=0.6, tau=3.5, max_spread=2.0, gate_on="J")
    review = ReviewSettings(mode=GATE, sample_per_cell=0, sample_seed=0)
    for task, records in cells.items():
        items = combine_records("model-0", "sap", task, records, gate, {}, review)
        add_pseudo_values(items, GATE, cascade)
        summarise_j(items, bootstrap, GATE, cascade)


def measured(work: Callable[..., object], *args: Any) -> dict[str, float]:
    tracemalloc.start()
    started = time.process_time()
    work(*args)
    cpu = time.process_time() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"cpu_s": round(cpu, 3), "peak_mb": round(peak / 2**20, 1)}


def growth(small: dict[str, Any], large: dict[str, Any], stage: str) -> str:
    """log CPU ratio over log items ratio, from one size to the next."""
    before, after = small["stages"][stage]["cpu_s"], large["stages"][stage]["cpu_s"]
    if min(before, after) <= 0 or large["items"] <= small["items"]:
        return "-"
    return f"{math.log(after / before) / math.log(large['items'] / small['items']):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream-dir", required=True, type=Path, help="folder holding the 11 released files")
    parser.add_argument("--sizes", nargs="+", default=["100", "400", "all"], help="items per subtask, or all")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (the paper config's)")
    parser.add_argument("--cascade-sample", type=int, default=100, help="the own judge's sample per cell")
    parser.add_argument("--out", type=Path, help="write the measurements here (JSON)")
    args = parser.parse_args()
    bootstrap = BootstrapSettings(resamples=args.resamples, seed=0, confidence=0.95)
    weights = dict.fromkeys((s.key for s in SUBTASKS), 1.0)
    every = released(args.upstream_dir)
    runs = []
    for size in args.sizes:
        counts = {task: len(refs) if size == "all" else min(len(refs), int(size)) for task, refs in every.items()}
        ids, rng = item_ids(counts), np.random.default_rng(0)
        rows = table2_rows(ids, rng)
        full = {task: judged_cell(task_ids, None, rng) for task, task_ids in ids.items()}
        cascade = {task: judged_cell(task_ids, args.cascade_sample, rng) for task, task_ids in ids.items()}
        stages = {
            "conversation clusters (score, table2_pairs)": measured(cluster_all, ids, every),
            "table2_pairs (compare_rows)": measured(compare_rows, rows, weights, bootstrap),
            "combine_j, full mode (11 cells)": measured(combine_cells, full, False, bootstrap),
            "combine_j, cascade (11 cells)": measured(combine_cells, cascade, True, bootstrap),
        }
        runs.append({"size": size, "items": sum(counts.values()), "stages": stages})
    print(f"bootstrap resamples {args.resamples}; CPU s of this process, peak MB Python allocated")
    sizes = " | ".join(f"{run['size']} ({run['items']} items)" for run in runs)
    print(f"| stage | {sizes} | growth exponents |\n|---|" + "---|" * (len(runs) + 1))
    for stage in runs[0]["stages"]:
        cells = [f"{r['stages'][stage]['cpu_s']:.3f} s, {r['stages'][stage]['peak_mb']:.0f} MB" for r in runs]
        exponents = [growth(a, b, stage) for a, b in itertools.pairwise(runs)]
        print(f"| {stage} | {' | '.join(cells)} | {', '.join(exponents)} |")
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
