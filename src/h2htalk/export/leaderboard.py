"""The run as a leaderboard: one board per embedder and variant (scores from different embedders are not
comparable, and a model's SAP and no-SAP rows do not compete), its models ranked by Table 2's Overall, overall
and within their size group, with the dimension averages and subtask scores beside it. Baselines are shown
beside each board as reference points, never ranked: the oracle would lead every board."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.config import load_registry
from h2htalk.export.models import model_name
from h2htalk.export.summaries import EXPORT, read_summaries, summary_files, table_rows
from h2htalk.instances.sources import run_notes
from h2htalk.io import read_json, write_json_atomic
from h2htalk.layout import Layout
from h2htalk.settings import PEOPLE_READINGS, VARIANT_NAMES, BootstrapSettings
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import RUBRIC_JUDGE_MODE, registry_files, rubric_ladders
from h2htalk.stages.spec import Done, Paths, Product, figure_files
from h2htalk.subtasks import DIMENSIONS
from h2htalk.tables.table2 import GROUP_TITLES, Row, column_names, column_order, inputs_of

FORMAT = "h2htalk-leaderboard/1"
BASELINE_GROUP = "baseline"
TIE_DIGITS = 6  # Overall values equal to this many decimals share a rank


def competition_ranks(values: Sequence[float | None]) -> list[int | None]:
    """1, 2, 2, 4 ...: the rank of each value among the others (higher is better); None has none."""
    keys = [None if v is None else round(v, TIE_DIGITS) for v in values]
    present = [k for k in keys if k is not None]
    return [None if k is None else 1 + sum(other > k for other in present) for k in keys]


def entry(row: Row, registry: dict[str, Any], judge_at_chance: bool = False) -> dict[str, Any]:
    """A row of a board; ``judge_at_chance``: the rubric judge that made its judged cells is at chance on its ladder or
    not shown to read the content (then ``at_chance_judge`` lists the columns that rest on it: the judged cells,
    their Avg and Overall)."""
    values = row.values()
    dimensions = [f"{d}_avg" for d in DIMENSIONS]
    judged = {k for k, c in row.cells.items() if c.judge is not None and c.measure in PEOPLE_READINGS}
    resting = [c for c in column_order() if judged & set(inputs_of(c)) and c in values] if judge_at_chance else []
    return {
        "model": row.model,
        "display_name": row.display_name,
        "model_id": model_name({"name": row.model, **registry[row.model]}).id if row.model in registry else None,
        "size_group": row.size_group,
        "overall": values.get("overall"),
        "complete": not row.incomplete("overall"),
        "dimensions": {column: values.get(column) for column in dimensions},
        "subtasks": {column: values.get(column) for column in column_order() if column in row.cells},
        "measures": {column: cell.measure for column, cell in row.cells.items()},
        "at_chance_judge": resting,
    }


def board(rows: Sequence[Row], registry: dict[str, Any], judge_at_chance: bool = False) -> dict[str, Any]:
    """One embedder's and variant's rows: the models ranked by Overall (ties share a rank; rows without one come
    last, unranked), each also within its size group; the baselines apart."""
    models = [entry(row, registry, judge_at_chance) for row in rows if row.size_group != BASELINE_GROUP]
    for member, rank in zip(models, competition_ranks([m["overall"] for m in models]), strict=True):
        member["rank"] = rank
    for group in {m["size_group"] for m in models}:
        members = [m for m in models if m["size_group"] == group]
        for member, rank in zip(members, competition_ranks([m["overall"] for m in members]), strict=True):
            member["group_rank"] = rank
    models.sort(key=lambda m: (m["rank"] is None, m["rank"] or 0, m["display_name"]))
    return {
        "embedder": rows[0].embedder,
        "variant": rows[0].variant,
        "variant_name": VARIANT_NAMES.get(rows[0].variant, rows[0].variant),
        "rows": models,
        "baselines": [entry(row, registry, judge_at_chance) for row in rows if row.size_group == BASELINE_GROUP],
    }


@stage(
    "leaderboard", "Table 2's rows ranked by Overall, per embedder and variant (and within each size group), as JSON",
    reads=(*EXPORT, "scoring.bootstrap", *RUBRIC_JUDGE_MODE), env="export",
    memory_mb=1000, minutes=10, options=("bootstrap",),
    product=Product("export", "Leaderboard", "the models ranked by Overall, per embedder and variant", main="json"),
    inputs={"summaries": Paths(summary_files), "registry": Paths(registry_files), "ladders": Paths(rubric_ladders)},
    outputs=figure_files("leaderboard", json=".json"),
)  # fmt: skip
def write_leaderboard(
    summaries: list[str], registry: list[str], ladders: list[str], provenance: str, json: str,
    config: dict[str, Any], run: RunCells, results: Layout, bootstrap: BootstrapSettings,
) -> Done:  # fmt: skip
    """The boards of the run's Table 2 rows (``json``), with the run's provenance, its notes (what the run is, e.g. a
    demo) and the rubric judges' standing on their ``ladders``."""
    from h2htalk.reliability.standing import rubric_standings, standing_notes

    tables, entries = config["tables"], load_registry(registry)
    rows = table_rows(read_summaries(run, results), entries, tables["overall_weights"], tables["judged_cell"])
    judges = rubric_standings(config, results, ladders, bootstrap)
    at_chance = any(s.unshown and s.deciding for s in judges)
    boards: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        boards.setdefault((row.embedder, row.variant), []).append(row)
    made = read_json(provenance)
    leaderboard = {
        "format": FORMAT,
        "date": made["created_at"],
        "git_hash": made["git"]["revision"],
        "config_sha256": made["config_sha256"],
        "notes": [*run_notes(config), *standing_notes(judges, "Cells")],
        "judges": [
            {
                "model": s.model,
                "role": s.role,
                "ladder_accuracy": s.accuracy.value,
                "ci_low": s.accuracy.ci_low,
                "ci_high": s.accuracy.ci_high,
                "at_chance": s.at_chance,
                "reads_content": s.reads_content,
                "decides": s.deciding,
            }
            for s in judges
        ],
        "ranked_by": "overall",
        "columns": column_names(),
        "size_groups": GROUP_TITLES,
        "boards": [board(members, entries, at_chance) for members in boards.values()],
    }
    write_json_atomic(json, leaderboard)
    return Done(f"{len(boards)} boards of {len(rows)} rows")
