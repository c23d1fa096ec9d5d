"""The stages that make the paper's tables and figures, the run's provenance and the judges' card. Each writes the
files its stage declares; the machinery adds their provenance (``meta``) with the checksum of every input."""

from __future__ import annotations

import os
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
    EARLY,
    JUDGE_MODE_KEYS,
    REGISTRY,
    RUBRIC_JUDGE_MODE,
    RUN_NOTES,
    config_files,
    judged_cells,
    judges_ladders,
    ladder_jobs,
    registry_files,
    rubric_ladders,
    shown,
    study_cells,
    summaries,
)  # fmt: skip
from h2htalk.stages.spec import Cells, Done, Each, Figure, One, Paths, Product, figure_files

TABLE2 = (
    *CELLS, *RUN_NOTES, *REGISTRY, "paper.table2", "tables", "instances.reconstruct.generator",
    "instances.reconstruct.voters", "review.imports", "review.store", "scoring.bootstrap",
    "judge_reliability.every_run", *RUBRIC_JUDGE_MODE,
)  # fmt: skip


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


@stage(
    "table2_partial",
    "Table 2 from the scores alone, before the judge: its judged cells pending, every other cell final",
    reads=(*CELLS, *RUN_NOTES, *REGISTRY, "tables"), cells=lambda run, w: run.table2(), priority=EARLY,
    env="figures", memory_mb=1000, minutes=10,
    product=Product("table", "Table 2 so far", "Table 2 before the judge: its judged cells pending", main="md",
                    listed=False),
    inputs={"summaries": Each("score_summary"), "registry": Paths(registry_files)},
    outputs=figure_files("table2_partial", csv=".csv", md=".md"),
)  # fmt: skip
def table2_partial(
    summaries: list[str], registry: list[str], cells: list[Cell], config: dict[str, Any], run: RunCells,
    outputs: dict[str, str],
) -> Done:  # fmt: skip
    """Table 2 from the scores alone, the judged cells pending: what a run stopped before its judge keeps."""
    from h2htalk.io import read_json
    from h2htalk.tables.table2_files import pending_summary, write_table2_partial

    read = [pending_summary(read_json(path)) if run.is_judged(cell) else read_json(path)
            for cell, path in zip(cells, summaries, strict=True)]  # fmt: skip
    tables = config["tables"]
    write_table2_partial(read, registry, outputs, tables["overall_weights"], tables["judged_cell"], run_notes(config))
    pending = sum(s.get("pending", False) for s in read)
    return Done(f"{len(read)} cells, {pending} pending the judge", out=shown(outputs))


def _table2_items(scope, labels):
    """The per-item values behind every Table 2 cell of a model under test: J items where judged, S items
    elsewhere."""
    return scope.run.table2_items(scope.results).values()


@stage(
    "table2_pairs", "Table 2's paired comparisons, rank intervals and detectable differences, and the rank figure",
    reads=TABLE2, entries=lambda s, w: list(s.run.models), where="cpu", env="figures", memory_mb=2000,
    minutes=20, options=("bootstrap",),
    product=Product("table", "Table 2 pairs", "which of Table 2's rows can be told apart, and the rank intervals",
                    main="csv", shown=("csv", "figure"), listed=False),
    in_all=lambda config: False,  # Table 2 reads it
    inputs={"scores": Paths(_table2_items), "registry": Paths(registry_files)},
    outputs={
        **figure_files("table2_pairs", csv=".csv"),
        "ranks": Figure("table2_ranks", ".csv"), "figure": Figure("table2_ranks", ".png"),
    },
)  # fmt: skip
def table2_pairs(
    scores: list[str], registry: list[str], config: dict[str, Any], run: RunCells, results: Layout,
    bootstrap: BootstrapSettings, outputs: dict[str, str],
) -> Done:  # fmt: skip
    from h2htalk.config import load_registry
    from h2htalk.tables.table2_pairs import compare_rows
    from h2htalk.tables.table2_pairs_files import read_row_items, write_comparisons

    rows, _ = read_row_items(run, results, load_registry(registry), config["tables"]["judged_cell"])
    comparisons = compare_rows(rows, config["tables"]["overall_weights"], bootstrap)
    write_comparisons(comparisons, outputs)
    told = sum(bool(r["separable"]) for r in comparisons.pairs)
    return Done(f"{len(comparisons.pairs)} comparisons, {told} separable", out=shown(outputs))


def _rubric_canary(scope, labels):
    """Table 2 notes a changed rubric judge from its drift canary, when every run checks it."""
    if not (scope.config["judge_reliability"]["every_run"] and scope.run.judged_subtasks):
        return []
    return [scope.results.path("judge_canary", model=scope.config["rubric_judge"]["model"], part="rubric")]


@stage(
    "table2", "Table 2, its heatmap, the paper comparison and audit", reads=TABLE2,
    entries=lambda s, w: list(s.run.run_models), ratings=(REVIEW_SCORES,), env="figures", memory_mb=1000,
    minutes=10, options=("bootstrap",),
    product=Product("table", "Table 2", "scores per model, variant and subtask (S; J where judged)", main="md",
                    shown=("csv", "heatmap"), first=True),
    inputs={
        "summaries": Paths(summaries), "registry": Paths(registry_files),
        "paper": config_files("paper.table2"), "review": One("review_queue"),
        "pairs": Figure("table2_pairs", ".csv"), "ranks": Figure("table2_ranks", ".csv"),
        "judge_samples": Cells("judge_samples", judged_cells),
        "human": config_files("review.imports"), "canary": Paths(_rubric_canary),
        "ladders": Paths(rubric_ladders),
    },
    outputs=figure_files(
        "table2", csv=".csv", md=".md", tex=".tex", heatmap="_heatmap.png", vs_paper="_vs_paper.csv",
        audit="_paper_audit.csv",
    ),
)  # fmt: skip
def table2(
    summaries: list[str], registry: list[str], paper: list[str], review: str, pairs: str, ranks: str,
    judge_samples: list[str], human: list[str], canary: list[str], ladders: list[str],
    config: dict[str, Any], run: RunCells, results: Layout, bootstrap: BootstrapSettings, outputs: dict[str, str],
) -> Done:  # fmt: skip
    from h2htalk.io import read_json
    from h2htalk.reliability.canary import drift_notes
    from h2htalk.reliability.standing import AT_CHANCE_MARK, rubric_standings, standing_notes
    from h2htalk.settings import PEOPLE_READINGS
    from h2htalk.tables.calibration import echo_notes
    from h2htalk.tables.human_review import agreement_note, review_notes, rubric_agreement, rubric_ratings
    from h2htalk.tables.table2_files import shared_roles, write_table2
    from h2htalk.tables.table2_significance import Significance

    weights, judged_cell = config["tables"]["overall_weights"], config["tables"]["judged_cell"]
    notes = shared_roles(config) + [note for path in canary if os.path.exists(path) for note in drift_notes(path)]
    notes += review_notes(map(read_json, summaries), judged_cell)
    if config["instances"]["source"] == "reconstructed":
        notes += echo_notes(map(read_json, summaries), weights, judged_cell)
    significance = None  # the workflow always compares; on its own, table2 says when nothing was compared
    if os.path.isfile(pairs) and os.path.isfile(ranks):
        significance = Significance.read(pairs, ranks)
    else:
        notes.append("No paired comparisons: which rows can be told apart is in table2_pairs (h2htalk table2-pairs).")
    if run.judged_subtasks:
        ratings, judge = rubric_ratings(human, run, results, config["review"]["store"])
        rows = rubric_agreement(ratings, judge, run.judged_subtasks, bootstrap)
        notes.append(agreement_note(rows, bootstrap.confidence))
    standings = rubric_standings(config, results, ladders, bootstrap) if judged_cell in PEOPLE_READINGS else []
    notes += standing_notes(standings, "Levels I-III cells, and the Itinerary Avg and Overall built from them,")
    (paper_file,) = paper
    write_table2(
        summaries, registry, paper_file, outputs, weights, judged_cell, notes=notes,
        run_notes=run_notes(config), significance=significance,
        judge_mark=AT_CHANCE_MARK if any(s.unshown and s.deciding for s in standings) else "",
    )  # fmt: skip
    return Done(f"{len(summaries)} cells", out=shown(outputs))


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
