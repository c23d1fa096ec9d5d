"""The judges' card, which writes the files its stage declares; the machinery adds their provenance (``meta``) with
the checksum of every input."""

from __future__ import annotations

from typing import Any

from h2htalk.cells import RunCells
from h2htalk.layout import Layout
from h2htalk.settings import BootstrapSettings
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import (
    JUDGE_MODE_KEYS,
    RUBRIC_JUDGE_MODE,
    judged_cells,
    ladder_jobs,
    shown,
    study_cells,
)  # fmt: skip
from h2htalk.stages.spec import Cells, Done, Figure, Paths, Product, figure_files


def _ladders(kind):
    def files(scope, labels):
        return [scope.results.path(kind, model=model, part=part) for model, part in ladder_jobs(scope.run)]

    files.__doc__ = f"`{kind}` of every judge model's ladder part"
    return files


@stage(
    "judge_reliability", "the judges' reliability card: ladder, self-consistency, agreement with people, drift canary",
    uses=("studies",),
    reads=(
        "models", "baselines", "rubric_judge.baselines", "subtasks", "variants", "studies.models",
        "rubric_judge.samples", "study_judge.samples", "scoring.bootstrap", "judge_reliability.panel",
        *RUBRIC_JUDGE_MODE, *(f"study_judge.{key}" for key in JUDGE_MODE_KEYS),
    ),
    env="figures", memory_mb=1000, minutes=10,
    product=Product("table", "Judge card", "how reliable each judge is", main="md", shown=("csv",), first=True),
    in_all=lambda config: config["judge_reliability"]["every_run"],  # else made on request
    inputs={
        "ladders": Paths(_ladders("judge_ladder")), "canaries": Paths(_ladders("judge_canary")),
        "judge_samples": Cells("judge_samples", judged_cells), "verdicts": Cells("verdicts", study_cells()),
        "samples": Cells("judge_sample", judged_cells), "study_samples": Cells("judge_sample", study_cells()),
        "agreement": Figure("agreement", ".csv"),
    },
    outputs=figure_files("judge_reliability", md=".md", csv=".csv"),
)  # fmt: skip
def judge_reliability(
    ladders: list[str], canaries: list[str], judge_samples: list[str], verdicts: list[str], samples: list[str],
    study_samples: list[str], agreement: str, config: dict[str, Any], run: RunCells, results: Layout,
    bootstrap: BootstrapSettings, outputs: dict[str, str],
) -> Done:  # fmt: skip
    from h2htalk.reliability.card import write_card
    from h2htalk.reliability.evidence import card_evidence, cascades, ladder_meetings

    evidence, _ = card_evidence(config, run, results, agreement)
    pairs = cascades(config, run, results) + ladder_meetings(evidence, config)
    rows = write_card(evidence, outputs, bootstrap, pairs)
    return Done(f"{len(evidence)} judges, {len(rows)} rows", out=shown(outputs))
