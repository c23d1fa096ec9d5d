"""Study commands: study-inputs (prompts and items of a study), study-judge (a model's study answers).

Table 3 and Figure 7, what the studies find, are made by the tables and figures commands."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import (
    REGISTRY_READS,
    add_command,
    add_engine,
    add_results,
    engine_options,
    load_config,
    overrides,
    registry_entry,
)
from h2htalk.progress import answered, summary
from h2htalk.settings import STUDIES, VARIANTS


def register(sub: Any) -> None:
    p = add_command(
        sub, "study-inputs", cmd_study_inputs, "prompts and items of a study (safety or instruction_following)",
        reads=("studies.sample", "studies.safety_scenarios", "studies.instruction_following"),
    )  # fmt: skip
    add_results(p)
    p.add_argument("study", choices=STUDIES)
    p.add_argument("--variant", required=True, choices=VARIANTS)

    p = add_command(
        sub, "study-judge", cmd_study_judge, "judge a model's study answers (safety, and needs met)",
        reads=(*REGISTRY_READS, "generation", "study_judge", "variants"),
    )  # fmt: skip
    add_results(p)
    add_engine(p)
    p.add_argument("--model", required=True, help="the model whose answers are judged")
    p.add_argument("--judge", help="the judge model (overrides study_judge.model)")
    overrides(p, judge="study_judge.model")


def cmd_study_inputs(args: argparse.Namespace) -> int:
    from h2htalk.settings import StudySample
    from h2htalk.studies.data import scenario_file, write_study_inputs

    config = load_config(args)
    sample = StudySample.from_config(config)
    prompts = Path(args.results.prompts(args.variant, args.study))
    items = Path(args.results.references(args.variant, args.study))
    count = write_study_inputs(
        args.study, args.variant, prompts, items, scenario_file(config["studies"], args.study),
        sample=sample.size(args.study), seed=sample.seed,
    )  # fmt: skip
    summary(f"{count} items", subject=f"{args.study} ({args.variant})", out=prompts)
    return 0


def cmd_study_judge(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.settings import StudyJudgeSettings
    from h2htalk.studies.run import judge_studies

    config = load_config(args)
    judge = StudyJudgeSettings.from_config(config)
    results = args.results
    cells = RunCells(config).studies(args.model)
    items = [Path(results.references(VARIANTS[0], study)) for study in STUDIES]
    pairs = [(Path(results.generations(cell)), Path(results.verdicts(cell))) for cell in cells]
    engines = engine_options(args, config, [judge.model])
    run_file = Path(results.path("study_judge_run", model=args.model))
    spec = registry_entry(config, judge.model, results)
    run = judge_studies(spec, args.model, items, pairs, judge, engines, summary_path=run_file)
    summary(answered(run, "verdicts"), subject=f"{args.model} by {judge.model}", out=f"{len(pairs)} files")
    return 0
