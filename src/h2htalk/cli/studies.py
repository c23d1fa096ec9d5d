"""Study commands: study-inputs (prompts and items of a study), study-judge (a model's study answers), study (a
model's study answers made, then judged: the workflow's one study job of each model).

Table 3 and Figure 7, what the studies find, are made by the tables and figures commands."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h2htalk.cli.generation import STUDY_GENERATE_READS, answer_studies
from h2htalk.cli.options import (
    REGISTRY_READS,
    add_command,
    add_judged_model,
    add_results,
    engine_options,
    load_config,
    registry_entry,
)
from h2htalk.progress import answered, summary
from h2htalk.settings import STUDIES, VARIANTS

if TYPE_CHECKING:
    from h2htalk.llm.calls import EngineOptions

# judging a model's study answers reads the study judge and, of generation, only the client's settings and the
# engine seed, which answering the studies reads too: a study job reads no subtask's token limit
STUDY_JUDGE_READS = (*REGISTRY_READS, "generation", "study_judge", "variants")
STUDY_READS = (*STUDY_GENERATE_READS, "study_judge")


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
        reads=STUDY_JUDGE_READS,
    )  # fmt: skip
    add_judged_model(p, "study_judge", "the model whose answers are judged")

    p = add_command(
        sub, "study", cmd_study,
        "answer both studies' conversations with one model, then judge them (an engine used by both starts once)",
        reads=STUDY_READS,
    )  # fmt: skip
    add_judged_model(p, "study_judge", "registry name of the model that answers")


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
    from h2htalk.settings import StudyJudgeSettings

    config = load_config(args)
    judge = StudyJudgeSettings.from_config(config).model
    run = judge_model_studies(args, config, engine_options(args, config, [judge]))
    summary(answered(run, "verdicts"), subject=f"{args.model} by {judge}", out=f"{run['files']} files")
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    """The studies' answers of ``--model``, then the study judge's verdicts on them, in one job. Where the judge is
    the model itself (the laptop), one engine serves both; a judge of its own starts after the model's engine has
    stopped, so that two engines never hold a job's GPUs at once."""
    from h2htalk.settings import StudyJudgeSettings

    config = load_config(args)
    judge = StudyJudgeSettings.from_config(config).model
    engines = engine_options(args, config, list(dict.fromkeys([args.model, judge])))
    shared = [registry_entry(config, judge, args.results)] if judge == args.model else []
    with engines.sharing(shared) as shared_engines:
        answers = answer_studies(args, config, shared_engines)
        verdicts = judge_model_studies(args, config, shared_engines)
    summary(
        f"{answered(answers)}; {answered(verdicts, 'verdicts')}", subject=f"{args.model} judged by {judge}",
        out=f"{answers['files'] + verdicts['files']} files",
    )  # fmt: skip
    return 0


def judge_model_studies(args: argparse.Namespace, config: dict[str, Any], engines: EngineOptions) -> dict[str, Any]:
    """The study judge's verdicts on the study answers of the model of ``args``: its run summary, with the number
    of verdict files written (``files``)."""
    from h2htalk.cells import RunCells
    from h2htalk.settings import StudyJudgeSettings
    from h2htalk.studies.run import judge_studies

    judge = StudyJudgeSettings.from_config(config)
    results = args.results
    cells = RunCells(config).studies(args.model)
    items = [Path(results.references(VARIANTS[0], study)) for study in STUDIES]
    pairs = [(Path(results.generations(cell)), Path(results.verdicts(cell))) for cell in cells]
    run_file = Path(results.path("study_judge_run", model=args.model))
    spec = registry_entry(config, judge.model, results)
    run = judge_studies(spec, args.model, items, pairs, judge, engines, summary_path=run_file)
    return {**run, "files": len(pairs)}
