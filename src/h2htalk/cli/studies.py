"""Study commands: study-inputs, judge-study, table3 (the SAP ablation), fig7 (instruction following)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import (
    add_bootstrap,
    add_config,
    add_engine,
    add_provenance,
    engine_options,
    load_config,
    overrides,
    registry_entry,
    same_length,
    write_meta,
)
from h2htalk.progress import answered, summary
from h2htalk.settings import STUDIES, VARIANTS


def register(sub: Any) -> None:
    p = sub.add_parser("study-inputs", help="prompts and items of a study (safety or instruction_following)")
    add_config(p)
    p.add_argument("study", choices=STUDIES)
    p.add_argument("--variant", required=True, choices=VARIANTS)
    p.add_argument("--scenarios", type=Path, help="scenario file (default: the set shipped with the project)")
    p.add_argument("--out-prompts", type=Path, required=True)
    p.add_argument("--out-items", type=Path, required=True)
    p.set_defaults(handler=cmd_study_inputs)

    p = sub.add_parser("judge-study", help="judge a model's study answers (safety, and needs met)")
    add_config(p)
    add_engine(p)
    p.add_argument("--model", help="the judge model (overrides studies.judge)")
    p.add_argument("--items", type=Path, nargs="+", required=True, help="the studies' items (study-inputs)")
    p.add_argument("--generations", type=Path, nargs="+", required=True, help="the judged model's study answers")
    p.add_argument("--out", type=Path, nargs="+", required=True, help="one verdict file per generation file")
    p.add_argument("--summary", type=Path)
    overrides(p, model="studies.judge")
    p.set_defaults(handler=cmd_judge_study)

    p = sub.add_parser("table3", help="Table 3: the SAP ablation with paired bootstrap CIs and the paper's rows")
    add_config(p)
    add_bootstrap(p)
    p.add_argument("--scores", type=Path, nargs="+", required=True, help="safety score items per (model, variant)")
    p.add_argument("--verdicts", type=Path, nargs="+", required=True, help="safety verdicts, same order as --scores")
    p.add_argument("--human", type=Path, nargs="*", default=[], help="human safety ratings CSV (overrides config)")
    p.add_argument("--out", type=Path, required=True, help="output path without extension")
    add_provenance(p)
    p.set_defaults(handler=cmd_table3)

    p = sub.add_parser("fig7", help="Figure 7: instruction following by scenario type")
    add_config(p)
    add_bootstrap(p)
    p.add_argument("--verdicts", type=Path, nargs="+", required=True, help="needs-met verdicts per (model, variant)")
    p.add_argument("--out", type=Path, required=True, help="output path without extension")
    add_provenance(p)
    p.set_defaults(handler=cmd_fig7)


def cmd_study_inputs(args: argparse.Namespace) -> int:
    from h2htalk.settings import StudySettings
    from h2htalk.studies.data import write_study_inputs

    studies = StudySettings.from_config(load_config(args))
    count = write_study_inputs(
        args.study, args.variant, args.out_prompts, args.out_items, args.scenarios,
        sample=studies.sample[args.study], seed=studies.sample_seed,
    )  # fmt: skip
    summary(f"{args.study}: {count} items ({args.variant}) -> {args.out_prompts}")
    return 0


def cmd_judge_study(args: argparse.Namespace) -> int:
    from h2htalk.settings import JudgeSettings, StudySettings
    from h2htalk.studies.run import judge_studies

    same_length(args, "generations", "out")
    config = load_config(args)
    judge_model = StudySettings.from_config(config).judge
    judge = JudgeSettings.from_config(config)
    engines = engine_options(args, config, [judge_model])
    pairs = list(zip(args.generations, args.out, strict=True))
    run = judge_studies(
        registry_entry(config, judge_model, args), args.items, pairs, judge, engines, summary_path=args.summary
    )
    summary(answered(f"study judge {judge_model}", run, "verdicts") + f" -> {len(pairs)} files")
    return 0


def cmd_table3(args: argparse.Namespace) -> int:
    from h2htalk.settings import BootstrapSettings
    from h2htalk.studies.results import write_table3_files

    same_length(args, "scores", "verdicts")
    config = load_config(args)
    human = args.human or config["studies"]["human_ratings"]
    paper = config["paper"]["table3"]
    pairs = list(zip(args.scores, args.verdicts, strict=True))
    rows = write_table3_files(pairs, paper, human, BootstrapSettings.from_config(config), args.out)
    write_meta(args, args.out, [*args.scores, *args.verdicts, paper, *human])
    summary(f"{len(rows)} rows -> {args.out}.csv, .md, .tex")
    return 0


def cmd_fig7(args: argparse.Namespace) -> int:
    from h2htalk.settings import BootstrapSettings
    from h2htalk.studies.results import write_fig7_files

    rows = write_fig7_files(args.verdicts, BootstrapSettings.from_config(load_config(args)), args.out)
    write_meta(args, args.out, args.verdicts)
    summary(f"{len(rows)} bars -> {args.out}.png")
    return 0
