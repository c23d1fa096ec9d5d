"""Judge reliability commands: judge-ladder (one judge model's sanity ladder and drift canary) and
judge-reliability (the card: paper_figures/judge_reliability.{md,csv})."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import (
    REGISTRY_READS,
    InFigures,
    add_command,
    add_engine,
    add_results,
    add_table_output,
    engine_options,
    load_config,
    registry_entry,
    write_meta,
)
from h2htalk.errors import H2HTalkError
from h2htalk.progress import answered, summary
from h2htalk.settings import JudgeSettings

JUDGE_KEYS = tuple(JudgeSettings.__dataclass_fields__)
AGREEMENT = InFigures("agreement.csv")  # the agreement report: the judges' agreement with people
CELLS = ("models", "baselines", "rubric_judge.baselines", "subtasks", "variants", "studies.models")


def register(sub: Any) -> None:
    p = add_command(
        sub, "judge-ladder", cmd_judge_ladder,
        "one judge model's sanity ladder and drift canary, for every judge it is (its engine started once)",
        reads=(
            *REGISTRY_READS, "generation", *(f"rubric_judge.{key}" for key in JUDGE_KEYS), "study_judge",
            "subtasks", "variants", "data.curate.persona_names", "judge_reliability.seed", "judge_reliability.ladder",
            "judge_reliability.canary",
        ),
    )  # fmt: skip
    add_results(p)
    add_engine(p)
    p.add_argument("--model", required=True, help="the judge model (rubric_judge.model or study_judge.model)")

    p = add_command(
        sub, "judge-reliability", cmd_judge_reliability,
        "the judges' reliability card: ladder, self-consistency, agreement with people, drift canary",
        reads=(
            *CELLS, "rubric_judge.model", "rubric_judge.samples", "study_judge.model", "study_judge.samples",
            "scoring.bootstrap",
        ),
    )  # fmt: skip
    add_results(p)
    add_table_output(p, "judge_reliability")
    p.add_argument(
        "--agreement", type=Path, default=AGREEMENT, help=f"the agreement report's CSV (default {AGREEMENT})"
    )


def cmd_judge_ladder(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.reliability.run import role_texts, run_ladder
    from h2htalk.settings import JUDGE_ROLES, ReliabilitySettings, StudyJudgeSettings

    config = load_config(args)
    run = RunCells(config)
    roles = run.judges.get(args.model)
    if not roles:
        raise H2HTalkError(f"{args.model!r} judges nothing in this run (rubric_judge.model, study_judge.model)")
    reliability = ReliabilitySettings.from_config(config)
    names = config["data"]["curate"]["persona_names"]
    texts = role_texts(roles, run.judged_subtasks, run.variants[0], args.results, names, reliability.seed)
    rubric, study = JudgeSettings.from_config(config), StudyJudgeSettings.from_config(config)
    judges = {role: rubric if role == JUDGE_ROLES[0] else study for role in roles}
    spec = registry_entry(config, args.model, args.results)
    found = run_ladder(
        spec, roles, texts, judges, reliability, engine_options(args, config, [args.model]), args.results
    )
    summary(answered(found, "verdicts"), subject=f"{args.model} ({', '.join(roles)})")
    return 0


def cmd_judge_reliability(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.reliability.card import write_card
    from h2htalk.reliability.evidence import card_evidence
    from h2htalk.settings import BootstrapSettings

    config = load_config(args)
    bootstrap = BootstrapSettings.from_config(config)
    evidence, inputs = card_evidence(config, RunCells(config), args.results, args.agreement)
    rows = write_card(evidence, args.out, bootstrap)
    write_meta(args, inputs)
    summary(f"{len(evidence)} judges, {len(rows)} rows", out=f"{args.out}.md (+ .csv)")
    return 0
