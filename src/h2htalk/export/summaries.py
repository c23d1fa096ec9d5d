"""The summaries of a run's Table 2 cells, read once for every export: what the table shows of a cell (its J
summary where the rubric judge is mixed in, its S summary elsewhere) and the S summary with the seven metric
components, which a judged cell's J summary does not repeat."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.export.items import COLUMNS, item_files
from h2htalk.io import read_json
from h2htalk.layout import Cell, Layout
from h2htalk.stages.declared import CELLS, REGISTRY, RUN_NOTES, registry_files
from h2htalk.stages.spec import Labels, Paths, Scope
from h2htalk.tables.table2 import Row, build_rows, cell_reading

EXPORT = (*CELLS, *RUN_NOTES, *REGISTRY, "tables")  # what the exports of a run's cells read


@dataclass(frozen=True)
class CellSummaries:
    cell: Cell  # scored by an embedder
    score: dict[str, Any]  # the S summary
    judged: dict[str, Any] | None  # the J summary of a judged cell

    @property
    def shown(self) -> dict[str, Any]:
        """The summary Table 2 reads for this cell."""
        return self.judged or self.score


def summary_paths(run: RunCells, results: Layout) -> list[str]:
    """Every summary the exports read: each Table 2 cell's S summary, and the J summary of a judged one."""
    paths = []
    for cell in run.table2():
        paths.append(results.score_summary(cell))
        if run.is_judged(cell):
            paths.append(results.j_summary(cell))
    return paths


def summary_files(scope: Scope, labels: Labels) -> list[str]:
    """Every cell's summary (Table 2's, and the studies')."""
    return summary_paths(scope.run, scope.results)


def cell_files(scope: Scope, labels: Labels) -> list[str]:
    """Every cell's summary and per-item file (scores, J, the studies' verdicts)."""
    return [*summary_paths(scope.run, scope.results), *item_files(scope.run, scope.results)]


ITEM_INPUTS = {"per_item": Paths(cell_files), "registry": Paths(registry_files)}  # what the per-item exports read


def read_summaries(run: RunCells, results: Layout) -> list[CellSummaries]:
    return [
        CellSummaries(
            cell,
            read_json(results.score_summary(cell)),
            read_json(results.j_summary(cell)) if run.is_judged(cell) else None,
        )
        for cell in run.table2()
    ]


def table_rows(
    summaries: list[CellSummaries], registry: dict[str, Any], weights: dict[str, float], judged_cell: str
) -> list[Row]:
    """Table 2's rows (values, Avg and Overall exactly as the table computes them)."""
    return build_rows([s.shown for s in summaries], registry, weights, judged_cell)


def components(score: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """The seven metric components and S of an S summary, each its mean with the CI bounds."""
    return {
        column: {"value": score.get(column), "ci_low": score.get(f"{column}_ci_low"),
                 "ci_high": score.get(f"{column}_ci_high")}
        for column in COLUMNS
    }  # fmt: skip


def shown_value(summaries: CellSummaries, judged_cell: str) -> dict[str, Any]:
    """The cell's value as Table 2 shows it: value, CI bounds, items scored and missing, and the measure."""
    return cell_reading(summaries.shown, judged_cell)
