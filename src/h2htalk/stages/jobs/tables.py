"""The stages that make the paper's tables and figures, the run's provenance and the judges' card. Each writes the
files its stage declares; the runner adds their provenance (``meta``) with the checksum of every input."""

from __future__ import annotations

import os
from pathlib import Path

from h2htalk.instances.sources import run_notes
from h2htalk.stages.job import Done, Job


def _shown(job: Job) -> str:
    """Where a table went: its first file, and the others' suffixes after it (``table1.csv (+ .md .tex)``)."""
    named = job.named_outputs()
    order = sorted((name for name in named if name != "meta"), key=lambda name: name != "md")  # the md first
    first, *more = [named[name] for name in order]
    stem = Path(first).name.split(".")[0]
    return first + (f" (+ {' '.join(Path(p).name.removeprefix(stem) for p in more)})" if more else "")


def package_checkout() -> str:
    """The checkout this package runs from (the workflow puts its own ``src`` first), for its git revision; else the
    working folder."""
    root = Path(__file__).resolve().parents[4]
    return str(root) if (root / ".git").exists() else "."


def provenance(job: Job) -> Done:
    from h2htalk.provenance import write_provenance

    root = job.option("root") or package_checkout()
    record = write_provenance(job.config, job.input("manifest"), job.output("provenance"), root)
    return Done(f"git {record['git']['revision']}, config sha256 {record['config_sha256'][:12]}", out=_shown(job))


def table1(job: Job) -> Done:
    from h2htalk.tables.table1 import write_table1

    write_table1(job.inputs["reports"], job.named_outputs())
    return Done(f"{len(job.inputs['reports'])} subtasks", out=_shown(job))


def table2(job: Job) -> Done:
    from h2htalk.io import read_json
    from h2htalk.reliability.canary import drift_notes
    from h2htalk.reliability.standing import AT_CHANCE_MARK, rubric_standings, standing_notes
    from h2htalk.settings import PEOPLE_READINGS, BootstrapSettings
    from h2htalk.tables.calibration import echo_notes
    from h2htalk.tables.human_review import agreement_note, review_notes, rubric_agreement, rubric_ratings
    from h2htalk.tables.table2_files import shared_roles, write_table2
    from h2htalk.tables.table2_significance import Significance

    config, run, inputs = job.config, job.run, job.inputs
    bootstrap, summaries = BootstrapSettings.from_config(config), inputs["summaries"]
    weights, judged_cell = config["tables"]["overall_weights"], config["tables"]["judged_cell"]
    canary = [path for path in inputs["canary"] if os.path.exists(path)]
    notes = shared_roles(config) + [note for path in canary for note in drift_notes(path)]
    notes += review_notes(map(read_json, summaries), judged_cell)
    if config["instances"]["source"] == "reconstructed":
        notes += echo_notes(map(read_json, summaries), weights, judged_cell)
    significance = None  # the workflow always compares; on its own, table2 says when nothing was compared
    pairs, ranks = job.input("pairs"), job.input("ranks")
    if os.path.isfile(pairs) and os.path.isfile(ranks):
        significance = Significance.read(pairs, ranks)
    else:
        notes.append("No paired comparisons: which rows can be told apart is in table2_pairs (h2htalk table2-pairs).")
    if run.judged_subtasks:
        ratings, judge = rubric_ratings(inputs["human"], run, job.results, config["review"]["store"])
        rows = rubric_agreement(ratings, judge, run.judged_subtasks, bootstrap)
        notes.append(agreement_note(rows, bootstrap.confidence))
    ladders = job.inputs["ladders"]
    standings = rubric_standings(config, job.results, ladders, bootstrap) if judged_cell in PEOPLE_READINGS else []
    notes += standing_notes(standings, "Levels I-III cells, and the Itinerary Avg and Overall built from them,")
    write_table2(
        summaries, inputs["registry"], job.input("paper"), job.named_outputs(), weights, judged_cell, notes=notes,
        run_notes=run_notes(config), significance=significance,
        judge_mark=AT_CHANCE_MARK if any(s.unshown and s.deciding for s in standings) else "",
    )  # fmt: skip
    return Done(f"{len(summaries)} cells", out=_shown(job))


def table2_partial(job: Job) -> Done:
    """Table 2 from the scores alone, the judged cells pending: what a run stopped before its judge keeps."""
    from h2htalk.io import read_json
    from h2htalk.tables.table2_files import pending_summary, write_table2_partial

    run, tables = job.run, job.config["tables"]
    summaries = [
        pending_summary(read_json(path)) if run.is_judged(cell) else read_json(path)
        for cell, path in zip(job.cells, job.inputs["summaries"], strict=True)
    ]
    write_table2_partial(
        summaries, job.inputs["registry"], job.named_outputs(), tables["overall_weights"], tables["judged_cell"],
        run_notes(job.config),
    )  # fmt: skip
    pending = sum(s.get("pending", False) for s in summaries)
    return Done(f"{len(summaries)} cells, {pending} pending the judge", out=_shown(job))


def table2_pairs(job: Job) -> Done:
    from h2htalk.config import load_registry
    from h2htalk.settings import BootstrapSettings
    from h2htalk.tables.table2_pairs import compare_rows
    from h2htalk.tables.table2_pairs_files import read_row_items, write_comparisons

    config = job.config
    registry = load_registry(job.inputs["registry"])
    rows, _ = read_row_items(job.run, job.results, registry, config["tables"]["judged_cell"])
    comparisons = compare_rows(rows, config["tables"]["overall_weights"], BootstrapSettings.from_config(config))
    write_comparisons(comparisons, job.named_outputs())
    told = sum(bool(r["separable"]) for r in comparisons.pairs)
    return Done(f"{len(comparisons.pairs)} comparisons, {told} separable", out=_shown(job))


def _study_ladder(job: Job, role: str, where: str) -> tuple[list[str], str]:
    """The notes and mark of a study's judges' ladders (``role``: safety or instruction_following)."""
    from h2htalk.reliability.ladder import ROLE_NAMES
    from h2htalk.reliability.standing import AT_CHANCE_MARK, role_standings, standing_notes
    from h2htalk.settings import BootstrapSettings

    bootstrap = BootstrapSettings.from_config(job.config)
    standings = role_standings(job.config, job.results, job.inputs["ladders"], bootstrap, role)
    if not job.config["judge_reliability"]["every_run"]:  # the ladder is the card's, made on request
        judge = job.config["study_judge"]["model"]
        return [f"The {ROLE_NAMES[role]} {judge}'s sanity ladder is not run with every run "
                "(judge_reliability.every_run: false): `snakemake judge_reliability` runs it and makes the judges' "
                "card, which says whether it tells a good answer from a bad one."], ""  # fmt: skip
    instead = "No other reading of these cells exists: read them as unvalidated."
    mark = AT_CHANCE_MARK if any(s.unshown and s.deciding for s in standings) else ""
    return standing_notes(standings, where, read_instead=instead), mark


def table3(job: Job) -> Done:
    from h2htalk.settings import STUDIES, BootstrapSettings, JudgeMode
    from h2htalk.tables.table3 import write_table3_files

    config = job.config
    notes, mark = _study_ladder(job, STUDIES[0], "Safety and Violation cells")
    rows = write_table3_files(
        job.cells, job.results, job.input("paper"), job.inputs["human"], BootstrapSettings.from_config(config),
        job.named_outputs(), config["review"]["store"], run_notes(config),
        cascade=JudgeMode.from_config(config, "study_judge").cascade, judge_notes=notes, judge_mark=mark,
    )  # fmt: skip
    return Done(f"{len(rows)} rows", out=_shown(job))


def agreement(job: Job) -> Done:
    from h2htalk.settings import BootstrapSettings
    from h2htalk.tables.human_review import agreement_report, write_agreement

    bootstrap = BootstrapSettings.from_config(job.config)
    rows, tied = agreement_report(job.config, job.results, bootstrap)
    write_agreement(rows, tied, job.named_outputs(), bootstrap.confidence, run_notes(job.config))
    defined = sum(r["value"] is not None for r in rows)
    return Done(f"{len(rows)} rows ({defined} with an alpha), {len(tied)} tied items", out=_shown(job))


def calibration(job: Job) -> Done:
    from h2htalk.tables.calibration import write_calibration

    config, embedders = job.config, job.run.embedders
    per_embedder = len(job.inputs["floor_items"]) // max(len(embedders), 1)
    floors = job.inputs["floor_items"]  # each embedder's, in the run's order
    floor_items = {e: floors[i * per_embedder : (i + 1) * per_embedder] for i, e in enumerate(embedders)}
    judged_cell = config["tables"]["judged_cell"]
    rows = write_calibration(job.inputs["summaries"], floor_items, job.named_outputs(), judged_cell, run_notes(config))
    return Done(f"{len(rows)} rows", out=_shown(job))


def figure(job: Job) -> Done:
    from h2htalk.figures import FIGURE_NAMES
    from h2htalk.figures.plots import draw_figure

    number = next(n for n, name in FIGURE_NAMES.items() if name == job.labels["figure"])
    config = job.config
    drawn = draw_figure(
        number, [Path(p) for p in job.inputs["curated"]], [Path(p) for p in job.inputs["instances"]],
        config["figures"], job.named_outputs(), config["instances"]["source"], run_notes(config),
    )  # fmt: skip
    return Done(drawn, subject=str(number))


def fig7(job: Job) -> Done:
    from h2htalk.figures.fig7 import write_fig7_files
    from h2htalk.settings import STUDIES, BootstrapSettings, JudgeMode

    config = job.config
    notes, _ = _study_ladder(job, STUDIES[1], "Figure 7's bars")
    rows = write_fig7_files(
        job.cells, job.results, BootstrapSettings.from_config(config), job.named_outputs(), config["review"]["store"],
        [*run_notes(config), *notes], cascade=JudgeMode.from_config(config, "study_judge").cascade,
    )  # fmt: skip
    return Done(f"{len(rows)} bars", out=job.output("png"))


def judge_reliability(job: Job) -> Done:
    from h2htalk.reliability.card import write_card
    from h2htalk.reliability.evidence import card_evidence, cascades, ladder_meetings
    from h2htalk.settings import BootstrapSettings

    bootstrap = BootstrapSettings.from_config(job.config)
    evidence, _ = card_evidence(job.config, job.run, job.results, job.input("agreement"))
    pairs = cascades(job.config, job.run, job.results) + ladder_meetings(evidence, job.config)
    rows = write_card(evidence, job.named_outputs(), bootstrap, pairs)
    return Done(f"{len(evidence)} judges, {len(rows)} rows", out=_shown(job))
