"""Judge stage commands: judge (rubric samples), combine-j (J and the review gate), review-queue."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import (
    add_bootstrap,
    add_config,
    add_engine,
    engine_options,
    load_config,
    overrides,
    registry_entry,
    same_length,
)
from h2htalk.errors import H2HTalkError
from h2htalk.progress import answered, summary
from h2htalk.subtasks import JUDGED


def register(sub: Any) -> None:
    p = sub.add_parser("judge", help="rubric-judge itinerary plans (k samples an item; engine started once)")
    add_config(p)
    add_engine(p)
    p.add_argument("--model", help="the judge model (overrides judge.model)")
    p.add_argument("--instances", type=Path, nargs="+", required=True, help="the instance files of the subtasks")
    p.add_argument("--prompts", type=Path, nargs="+", required=True, help="prompt file of each generation file")
    p.add_argument("--generations", type=Path, nargs="+", required=True, help=f"generations of {', '.join(JUDGED)}")
    p.add_argument("--out", type=Path, nargs="+", required=True, help="one verdict file per generation file")
    p.add_argument("--summary", type=Path, help="write a run summary (JSON) here")
    overrides(p, model="judge.model")
    p.set_defaults(handler=cmd_judge)

    p = sub.add_parser("combine-j", help="J from S and the judge, the human-review gate, human score imports")
    add_config(p)
    add_bootstrap(p)
    p.add_argument("--scores", type=Path, nargs="+", required=True, help="per-item scores (.items.jsonl), per cell")
    p.add_argument("--judgments", type=Path, nargs="+", required=True, help="the judge's verdicts, same cells")
    p.add_argument("--human", type=Path, action="append", default=[], help="filled-in review queue CSV (repeatable)")
    p.add_argument("--out-items", type=Path, nargs="+", required=True, help="J per item, per cell")
    p.add_argument("--out-summary", type=Path, nargs="+", required=True, help="J100 with its CI, per cell")
    p.set_defaults(handler=cmd_combine_j)

    p = sub.add_parser("review-queue", help="collect the items sent to human review into one CSV")
    p.add_argument("items", nargs="*", type=Path, help="J item files (combine-j --out-items)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(handler=cmd_review_queue)


def cmd_judge(args: argparse.Namespace) -> int:
    from h2htalk.io import record_labels
    from h2htalk.judge.run import JudgeFiles, judge_files
    from h2htalk.settings import JudgeSettings

    same_length(args, "prompts", "generations", "out")
    config = load_config(args)
    judge = JudgeSettings.from_config(config)
    spec = registry_entry(config, judge.model, args)
    instances = {record_labels(path).get("subtask"): path for path in args.instances}
    files = []
    for prompts, generations, out in zip(args.prompts, args.generations, args.out, strict=True):
        labels = record_labels(prompts)
        if "subtask" not in labels or labels["subtask"] not in instances:
            raise H2HTalkError(f"{prompts}: no --instances file for subtask {labels['subtask']}")
        cell = (labels["variant"], labels["subtask"], instances[labels["subtask"]], prompts, generations, out)
        files.append(JudgeFiles(*cell))
    engines = engine_options(args, config, [judge.model])
    run = judge_files(spec, files, judge, engines, summary_path=args.summary)
    summary(answered(f"judge {judge.model}", run, "verdicts") + f" -> {len(files)} files")
    return 0


def cmd_combine_j(args: argparse.Namespace) -> int:
    from h2htalk.io import record_labels
    from h2htalk.judge.combine import CombineFiles, combine_to_files
    from h2htalk.settings import BootstrapSettings, GateSettings

    same_length(args, "scores", "judgments", "out_items", "out_summary")
    config = load_config(args)
    gate, bootstrap = GateSettings.from_config(config), BootstrapSettings.from_config(config)
    results = []
    for cell_files in zip(args.scores, args.judgments, args.out_items, args.out_summary, strict=True):
        labels = record_labels(cell_files[0])
        cell = CombineFiles(labels["model"], labels["variant"], labels["subtask"], labels["embedder"], *cell_files)
        results.append(combine_to_files(cell, gate, bootstrap, args.human))
    j100 = ", ".join("-" if r["J100"] is None else f"{r['J100']:.1f}" for r in results)
    summary(
        f"J for {len(results)} cells (J100 {j100}): {sum(r['to_review'] for r in results)} items to review, "
        f"{sum(r['missing'] for r in results)} missing"
    )
    return 0


def cmd_review_queue(args: argparse.Namespace) -> int:
    from h2htalk.judge.combine import write_review_queue

    count = write_review_queue(args.items, args.out)
    summary(f"{count} items to review -> {args.out}")
    return 0
