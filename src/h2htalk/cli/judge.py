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
from h2htalk.subtasks import JUDGED


def register(sub: Any) -> None:
    p = sub.add_parser("judge", help="rubric-judge itinerary plans (k samples an item; engine started once)")
    add_config(p)
    add_engine(p)
    p.add_argument("--model", help="the judge model (overrides judge.model)")
    p.add_argument("--instances", type=Path, nargs="+", required=True, help="instance file of each generation file")
    p.add_argument("--prompts", type=Path, nargs="+", required=True, help="prompt file of each generation file")
    p.add_argument("--generations", type=Path, nargs="+", required=True, help=f"generations of {', '.join(JUDGED)}")
    p.add_argument("--out", type=Path, nargs="+", required=True, help="one verdict file per generation file")
    p.add_argument("--summary", type=Path, help="write a run summary (JSON) here")
    overrides(p, model="judge.model")
    p.set_defaults(handler=cmd_judge)

    p = sub.add_parser("combine-j", help="J from S and the judge, the human-review gate, human score imports")
    add_config(p)
    add_bootstrap(p)
    p.add_argument("--scores", type=Path, required=True, help="per-item scores (.items.jsonl) of one cell")
    p.add_argument("--judgments", type=Path, required=True, help="the judge's verdicts for the same cell")
    p.add_argument("--human", type=Path, action="append", default=[], help="filled-in review queue CSV (repeatable)")
    p.add_argument("--out-items", type=Path, required=True)
    p.add_argument("--out-summary", type=Path, required=True)
    p.set_defaults(handler=cmd_combine_j)

    p = sub.add_parser("review-queue", help="collect the items sent to human review into one CSV")
    p.add_argument("items", nargs="*", type=Path, help="J item files (combine-j --out-items)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(handler=cmd_review_queue)


def cmd_judge(args: argparse.Namespace) -> int:
    from h2htalk.io import iter_jsonl
    from h2htalk.judge.run import JudgeFiles, judge_files
    from h2htalk.settings import JudgeSettings

    same_length(args, "instances", "prompts", "generations", "out")
    config = load_config(args)
    judge = JudgeSettings.from_config(config)
    spec = registry_entry(config, judge.model)
    files = []
    for instances, prompts, generations, out in zip(
        args.instances, args.prompts, args.generations, args.out, strict=True
    ):
        first = next((record for _, record in iter_jsonl(prompts)), {})
        files.append(JudgeFiles(first.get("variant"), first.get("subtask"), instances, prompts, generations, out))
    engines = engine_options(args, config, [judge.model])
    summary = judge_files(spec, files, judge, engines, summary_path=args.summary)
    print(f"judge {judge.model}: {summary['requests']} requests, {summary['sent']} sent -> {len(files)} files")
    return 0


def cmd_combine_j(args: argparse.Namespace) -> int:
    from h2htalk.io import record_labels
    from h2htalk.judge.combine import CombineFiles, combine_to_files
    from h2htalk.settings import BootstrapSettings, GateSettings

    config = load_config(args)
    first = record_labels(args.scores)
    cell = CombineFiles(
        first["model"], first["variant"], first["subtask"], first["embedder"],
        args.scores, args.judgments, args.out_items, args.out_summary,
    )  # fmt: skip
    summary = combine_to_files(
        cell, GateSettings.from_config(config), BootstrapSettings.from_config(config), args.human
    )
    print(
        f"{cell.model}/{cell.variant}/{cell.subtask}: J100={summary['J100']} n={summary['n']} "
        f"review={summary['to_review']} missing={summary['missing']}"
    )
    return 0


def cmd_review_queue(args: argparse.Namespace) -> int:
    from h2htalk.judge.combine import write_review_queue

    count = write_review_queue(args.items, args.out)
    print(f"{count} items to review -> {args.out}")
    return 0
