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
    judges_ladders,
    ladder_jobs,
    shown,
    study_cells,
    summaries,
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


def _study_ladders(scope, labels):
    """The studies' judges' ladders, which Table 3 and Figure 7 show when every run makes the card (else they say
    where the ladder is: the card's target)."""
    return judges_ladders(scope, "studies") if scope.config["judge_reliability"]["every_run"] else []


def _study_ladder(
    config: dict[str, Any], results: Layout, ladders: list[str], bootstrap: BootstrapSettings, role: str, where: str
) -> tuple[list[str], str]:
    """The notes and mark of a study's judges' ladders (``role``: safety or instruction_following)."""
    from h2htalk.reliability.ladder import ROLE_NAMES
    from h2htalk.reliability.standing import AT_CHANCE_MARK, role_standings, standing_notes

    standings = role_standings(config, results, ladders, bootstrap, role)
    if not config["judge_reliability"]["every_run"]:  # the ladder is the card's, made on request
        judge = config["study_judge"]["model"]
        return [f"The {ROLE_NAMES[role]} {judge}'s sanity ladder is not run with every run "
                "(judge_reliability.every_run: false): `snakemake judge_reliability` runs it and makes the judges' "
                "card, which says whether it tells a good answer from a bad one."], ""  # fmt: skip
    instead = "No other reading of these cells exists: read them as unvalidated."
    mark = AT_CHANCE_MARK if any(s.unshown and s.deciding for s in standings) else ""
    return standing_notes(standings, where, read_instead=instead), mark


STUDY_READS = ("models", "variants", "review.store", "judge_reliability.every_run", *RUN_NOTES,
               *(f"study_judge.{key}" for key in JUDGE_MODE_KEYS))  # fmt: skip


@stage(
    "table3", "Table 3: the SAP ablation with paired bootstrap CIs and the paper's rows",
    reads=("scoring", "studies.models", "studies.human_ratings", "paper.table3", *STUDY_READS),
    cells=lambda run, w: [c.scored_by(run.embedder) for c in study_cells("safety")(run, w)],
    ratings=(SAFETY_RATINGS,), env="figures", memory_mb=1000, minutes=10, options=("bootstrap",),
    product=Product("table", "Table 3", "the SAP ablation on high-risk scenarios: similarity, safety, violations",
                    main="md", shown=("csv",)),
    inputs={
        "scores": Each("score_items"), "verdicts": Each("verdicts"), "sample": Each("judge_sample"),
        "paper": config_files("paper.table3"), "human": config_files("studies.human_ratings"),
        "ladders": Paths(_study_ladders),
    },
    outputs=figure_files("table3", csv=".csv", md=".md", tex=".tex"),
)  # fmt: skip
def table3(
    scores: list[str], verdicts: list[str], sample: list[str], paper: list[str], human: list[str], ladders: list[str],
    cells: list[Cell], config: dict[str, Any], results: Layout, bootstrap: BootstrapSettings,
    outputs: dict[str, str],
) -> Done:  # fmt: skip
    from h2htalk.tables.table3 import write_table3_files

    notes, mark = _study_ladder(config, results, ladders, bootstrap, STUDIES[0], "Safety and Violation cells")
    (paper_file,) = paper
    rows = write_table3_files(
        cells, results, paper_file, human, bootstrap, outputs, config["review"]["store"], run_notes(config),
        cascade=JudgeMode.from_config(config, "study_judge").cascade, judge_notes=notes, judge_mark=mark,
    )  # fmt: skip
    return Done(f"{len(rows)} rows", out=shown(outputs))


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


def _floor_items(scope, labels):
    """The chance floor's (random-reference baseline's) per-item scores, per embedder and subtask."""
    from h2htalk.tables.calibration import FLOOR

    run = scope.run
    return [scope.results.score_items(Cell(FLOOR, run.variants[0], s, e)) for e in run.embedders for s in run.subtasks]


@stage(
    "calibration", "chance floor, oracle, rescaled scores and unrelated-pair SS",
    reads=(*CELLS, *RUN_NOTES, "tables.judged_cell"), env="figures", memory_mb=1000, minutes=10,
    product=Product("table", "Calibration", "every model between the chance floor and the oracle", main="md",
                    shown=("csv",), first=True),
    # it needs the chance floor and the oracle among the baselines
    in_all=lambda config: {"baseline-random-reference", "baseline-oracle"} <= set(config["baselines"]),
    inputs={"summaries": Paths(summaries), "floor_items": Paths(_floor_items)},
    outputs=figure_files("calibration", md=".md", csv=".csv"),
)  # fmt: skip
def calibration(
    summaries: list[str], floor_items: list[str], config: dict[str, Any], run: RunCells, outputs: dict[str, str]
) -> Done:
    from h2htalk.tables.calibration import write_calibration

    per_embedder = len(floor_items) // max(len(run.embedders), 1)  # each embedder's, in the run's order
    floors = {e: floor_items[i * per_embedder : (i + 1) * per_embedder] for i, e in enumerate(run.embedders)}
    rows = write_calibration(summaries, floors, outputs, config["tables"]["judged_cell"], run_notes(config))
    return Done(f"{len(rows)} rows", out=shown(outputs))


@stage(
    "fig7", "Figure 7: instruction following by scenario type",
    reads=("scoring.bootstrap", "studies.models", "models", "variants", "review.store", *RUN_NOTES,
           "judge_reliability.every_run", *(f"study_judge.{key}" for key in JUDGE_MODE_KEYS)),
    cells=study_cells("instruction_following"), ratings=(NEED_VERDICTS,), env="figures", memory_mb=1000,
    minutes=10, options=("bootstrap",),
    product=Product("figure", "Figure 7", "instruction following per scenario type", main="png", shown=("png",)),
    inputs={"verdicts": Each("verdicts"), "sample": Each("judge_sample"), "ladders": Paths(_study_ladders)},
    outputs=figure_files("fig7_instruction_following", png=".png", csv=".csv"),
)  # fmt: skip
def fig7(
    verdicts: list[str], sample: list[str], ladders: list[str], cells: list[Cell], config: dict[str, Any],
    results: Layout, bootstrap: BootstrapSettings, outputs: dict[str, str],
) -> Done:  # fmt: skip
    from h2htalk.figures.fig7 import write_fig7_files

    notes, _ = _study_ladder(config, results, ladders, bootstrap, STUDIES[1], "Figure 7's bars")
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
