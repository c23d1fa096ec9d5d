"""The stages that make the paper's tables and figures, the run's provenance and the judges' card. Each writes the
files its stage declares; the machinery adds their provenance (``meta``) with the checksum of every input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.instances.sources import run_notes
from h2htalk.layout import Cell, Layout
from h2htalk.ratings import INSTANCE_DECISIONS, NEED_VERDICTS, REVIEW_SCORES, SAFETY_RATINGS
from h2htalk.settings import STUDIES, BootstrapSettings, JudgeMode
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import (
    CELLS,
    JUDGE_MODE_KEYS,
    RUBRIC_JUDGE_MODE,
    RUN_NOTES,
    config_files,
    judged_cells,
    ladder_jobs,
    shown,
    study_cells,
    study_ladders,
)  # fmt: skip
from h2htalk.stages.spec import Cells, Done, Each, Figure, One, Paths, Product, figure_files


def package_checkout() -> str:
    """The checkout this package runs from (the workflow puts its own ``src`` first), for its git revision; else the
    working folder."""
    root = Path(__file__).resolve().parents[4]
    return str(root) if (root / ".git").exists() else "."


@stage(
    "provenance", "write the run's provenance (git, config, data, versions, hardware)",
    reads=("*",), options=("root",), inputs={"manifest": One("manifest")}, outputs={"provenance": One("provenance")},
)  # fmt: skip
def provenance(manifest: str, provenance: str, config: dict[str, Any], options: Any) -> Done:
    from h2htalk.provenance import write_provenance

    root = getattr(options, "root", None) or package_checkout()
    record = write_provenance(config, manifest, provenance, root)
    return Done(f"git {record['git']['revision']}, config sha256 {record['config_sha256'][:12]}", out=provenance)


def _curated_for_decisions(scope, labels):
    """The curated references, which people's instance decisions name, when there are decisions to read."""
    from h2htalk.tables.human_review import reads_decisions

    if not reads_decisions(dict(scope.config)):
        return []
    return [scope.results.path("curated", subtask=s) for s in scope.run.subtasks]


@stage(
    "agreement", "Krippendorff's alpha between people and between the judges and people",
    reads=(
        *CELLS, *RUN_NOTES, "review.imports", "review.store", "studies.models", "studies.human_ratings",
        "instances.review_imports", "scoring.bootstrap",
    ),
    ratings=(REVIEW_SCORES, SAFETY_RATINGS, NEED_VERDICTS, INSTANCE_DECISIONS), env="figures", memory_mb=1000,
    minutes=10, options=("bootstrap",),
    product=Product("table", "Agreement", "raters and judges against people", main="md", shown=("csv",)),
    inputs={
        "judge_samples": Cells("judge_samples", judged_cells), "review": config_files("review.imports"),
        "verdicts": Cells("verdicts", study_cells()), "safety": config_files("studies.human_ratings"),
        "curated": Paths(_curated_for_decisions), "decisions": config_files("instances.review_imports"),
    },
    outputs=figure_files("agreement", csv=".csv", md=".md"),
)  # fmt: skip
def agreement(
    judge_samples: list[str], review: list[str], verdicts: list[str], safety: list[str], curated: list[str],
    decisions: list[str], config: dict[str, Any], results: Layout, bootstrap: BootstrapSettings,
    outputs: dict[str, str],
) -> Done:  # fmt: skip
    from h2htalk.tables.human_review import agreement_report, write_agreement

    rows, tied = agreement_report(config, results, bootstrap)
    write_agreement(rows, tied, outputs, bootstrap.confidence, run_notes(config))
    defined = sum(r["value"] is not None for r in rows)
    return Done(f"{len(rows)} rows ({defined} with an alpha), {len(tied)} tied items", out=shown(outputs))


@stage(
    "fig7", "Figure 7: instruction following by scenario type",
    reads=("scoring.bootstrap", "studies.models", "models", "variants", "review.store", *RUN_NOTES,
           "judge_reliability.every_run", *(f"study_judge.{key}" for key in JUDGE_MODE_KEYS)),
    cells=study_cells("instruction_following"), ratings=(NEED_VERDICTS,), env="figures", memory_mb=1000,
    minutes=10, options=("bootstrap",),
    product=Product("figure", "Figure 7", "instruction following per scenario type", main="png", shown=("png",)),
    inputs={"verdicts": Each("verdicts"), "sample": Each("judge_sample"), "ladders": Paths(study_ladders)},
    outputs=figure_files("fig7_instruction_following", png=".png", csv=".csv"),
)  # fmt: skip
def fig7(
    verdicts: list[str], sample: list[str], ladders: list[str], cells: list[Cell], config: dict[str, Any],
    results: Layout, bootstrap: BootstrapSettings, outputs: dict[str, str],
) -> Done:  # fmt: skip
    from h2htalk.figures.fig7 import write_fig7_files
    from h2htalk.reliability.standing import study_judge_notes

    notes, _ = study_judge_notes(config, results, ladders, bootstrap, STUDIES[1], "Figure 7's bars")
    rows = write_fig7_files(
        cells, results, bootstrap, outputs, config["review"]["store"], [*run_notes(config), *notes],
        cascade=JudgeMode.from_config(config, "study_judge").cascade,
    )  # fmt: skip
    return Done(f"{len(rows)} bars", out=outputs["png"])


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
