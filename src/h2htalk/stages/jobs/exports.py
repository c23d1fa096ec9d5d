"""The run's results in other tools' formats: the results JSON, the leaderboard, Every Eval Ever and the viewer."""

from __future__ import annotations

import os
from typing import Any

from h2htalk.instances.sources import run_notes
from h2htalk.stages.job import Done, Job


def _registry(job: Job) -> dict[str, Any]:
    from h2htalk.config import load_registry

    return load_registry(job.inputs["registry"])


def results_json(job: Job) -> Done:
    from h2htalk.export.run_results import build_run_results
    from h2htalk.io import write_json_atomic

    tables = {study: job.input(study) for study in ("safety", "instruction_following")}
    present = {study: path for study, path in tables.items() if os.path.isfile(path)}
    record = build_run_results(job.config, job.results, _registry(job), present, run_notes(job.config))
    write_json_atomic(job.output("json"), record)
    cells = sum(len(row["tasks"]) for row in record["results"])
    studies = ", ".join(present) or "none"
    return Done(f"{len(record['results'])} rows, {cells} cells, studies: {studies}", out=job.output("json"))


def leaderboard(job: Job) -> Done:
    from h2htalk.export.leaderboard import build_leaderboard
    from h2htalk.export.summaries import read_summaries, table_rows
    from h2htalk.io import read_json, write_json_atomic
    from h2htalk.reliability.standing import rubric_standings, standing_notes
    from h2htalk.settings import BootstrapSettings

    tables, registry = job.config["tables"], _registry(job)
    summaries = read_summaries(job.run, job.results)
    rows = table_rows(summaries, registry, tables["overall_weights"], tables["judged_cell"])
    bootstrap = BootstrapSettings.from_config(job.config)
    judges = rubric_standings(job.config, job.results, job.inputs["ladders"], bootstrap)
    notes = [*run_notes(job.config), *standing_notes(judges, "Cells")]
    board = build_leaderboard(rows, registry, read_json(job.input("provenance")), notes, judges)
    write_json_atomic(job.output("json"), board)
    return Done(f"{len(board['boards'])} boards of {len(rows)} rows", out=job.output("json"))


def every_eval_ever(job: Job) -> Done:
    from h2htalk.export.eee_validation import write_validation
    from h2htalk.export.every_eval_ever import write_every_eval_ever

    out = job.out_path("bundle")
    files = write_every_eval_ever(job.config, job.results, _registry(job), out)
    validation = write_validation(out)
    return Done(
        f"{len(files)} files, {validation['records']} records; every-eval-ever {validation['version']} validates "
        "all of them",
        out=out,
    )


def viewer(job: Job) -> Done:
    from h2htalk.export.viewer import write_viewer

    out = job.out_path("bundle")
    bundle = write_viewer(job.config, job.results, _registry(job), out, run_notes(job.config))
    files, size = bundle.weight()
    return Done(f"{files} files, {size / 1e6:.1f} MB", out=f"{out}/index.html")
