"""Judge stage commands: rubric-judge (samples per item), combine-j (J and the review gate), review-queue."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import (
    REGISTRY_READS,
    add_bootstrap,
    add_command,
    add_judged_model,
    add_results,
    engine_options,
    load_config,
    registry_entry,
)
from h2htalk.progress import answered, summary
from h2htalk.settings import GateSettings, JudgeSettings, ReviewSettings

JUDGE_KEYS = tuple(JudgeSettings.__dataclass_fields__)
GATE_KEYS = tuple(GateSettings.__dataclass_fields__)
REVIEW_MODE_READS = tuple(f"review.{key}" for key in ReviewSettings.__dataclass_fields__)


def register(sub: Any) -> None:
    p = add_command(
        sub, "rubric-judge", cmd_rubric_judge, "rubric-judge one model's itinerary plans (its engine started once)",
        reads=(*REGISTRY_READS, "generation", *(f"rubric_judge.{key}" for key in JUDGE_KEYS), "subtasks", "variants"),
    )  # fmt: skip
    add_judged_model(p, "rubric_judge", "the model whose answers are judged")

    p = add_command(
        sub, "combine-j", cmd_combine_j, "J from S and the judge, the review gate or sample, people's scores",
        reads=(
            *(f"rubric_judge.{key}" for key in GATE_KEYS), "scoring.bootstrap", "review.imports", "review.store",
            *REVIEW_MODE_READS, "subtasks", "variants", "models", "baselines", "rubric_judge.baselines",
        ),
    )  # fmt: skip
    add_results(p)
    add_bootstrap(p)
    p.add_argument("--model", required=True, help="the judged model")
    p.add_argument("--embedder", required=True, help="the embedder of the S it mixes in")

    p = add_command(
        sub, "review-queue", cmd_review_queue, "collect the items sent to people (gated, or sampled) into one CSV",
        reads=("models", "baselines", "rubric_judge.baselines", "scoring.embedders", "subtasks", "variants"),
    )  # fmt: skip
    add_results(p)


def cmd_rubric_judge(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.judge.run import JudgeFiles, judge_files

    config = load_config(args)
    judge = JudgeSettings.from_config(config)
    results = args.results
    files = [
        JudgeFiles(
            cell.variant,
            cell.task,
            Path(results.references(cell.variant, cell.task)),
            Path(results.prompts(cell.variant, cell.task)),
            Path(results.generations(cell)),
            Path(results.judge_samples(cell)),
        )
        for cell in RunCells(config).judged(args.model)
    ]
    spec = registry_entry(config, judge.model, results)
    engines = engine_options(args, config, [judge.model])
    run_file = Path(results.path("judge_run", model=args.model))
    run = judge_files(spec, args.model, files, judge, engines, summary_path=run_file)
    summary(answered(run, "verdicts"), subject=f"{args.model} by {judge.model}", out=f"{len(files)} files")
    return 0


def cmd_combine_j(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.judge.combine import combine_to_files, read_human_scores
    from h2htalk.settings import BootstrapSettings

    config = load_config(args)
    gate, bootstrap = GateSettings.from_config(config), BootstrapSettings.from_config(config)
    review = ReviewSettings.from_config(config)
    run = RunCells(config)
    cells = [cell.scored_by(args.embedder) for cell in run.judged(args.model)]
    imports, store = config["review"]["imports"], config["review"]["store"]
    human = read_human_scores(imports, cells, args.results, run.judged_models, store)
    results = [combine_to_files(cell, args.results, gate, bootstrap, human, review) for cell in cells]
    summary(
        f"{len(results)} cells, {sum(r['n'] for r in results)} items ({review.mode} mode); "
        f"{sum(r['to_review'] for r in results)} to review, {sum(r['human_items'] for r in results)} rated by "
        f"people, {sum(r['missing'] for r in results)} missing",
        subject=args.model,
    )
    return 0


def cmd_review_queue(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.judge.combine import write_review_queue

    run = RunCells(load_config(args))
    items = [Path(args.results.j_items(c.scored_by(run.embedder))) for m in run.judged_models for c in run.judged(m)]
    out = Path(args.results.path("review_queue"))
    count = write_review_queue(items, out)
    summary(f"{count} items to review", out=out)
    return 0
