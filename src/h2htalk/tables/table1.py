"""Table 1: record counts per subtask — the paper's, the release's, and what curation kept and flagged."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from h2htalk.data.curate import FLAGS
from h2htalk.io import read_json
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import EARLY
from h2htalk.stages.spec import Done, One, Product, figure_files
from h2htalk.subtasks import SUBTASKS
from h2htalk.tabular import records_frame, write_table

if TYPE_CHECKING:
    import pandas as pd

COLUMNS: tuple[str, ...] = ("subtask", "paper_name", "paper_count", "released", "kept", *FLAGS, "upstream_file")
CAPTION = "Table 1: record counts per subtask (paper, released, kept after curation, flags)"
LABEL = "tab:table1"


def build_table1(reports: Iterable[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The rows (one per subtask), the total row (shown under the rows in .md and .tex, not in the CSV), notes."""
    by_subtask = {r["subtask"]: r for r in reports}
    rows = []
    for subtask in SUBTASKS:
        report = by_subtask.get(subtask.key)
        if report is None:
            continue
        rows.append(
            {
                "subtask": subtask.key,
                "paper_name": subtask.paper_name,
                "paper_count": subtask.paper_count,
                "released": report["released"],
                "kept": report["kept"],
                **{flag: report["flags"][flag] for flag in FLAGS},
                "upstream_file": subtask.upstream_file,
            }
        )
    total = {"subtask": "total", "paper_name": ""}
    for col in ("paper_count", "released", "kept", *FLAGS):
        total[col] = sum(row[col] or 0 for row in rows)
    exclude = sorted({flag for r in by_subtask.values() for flag in r["options"]["exclude_flags"]})
    notes = [
        "Upstream file names are swapped for two subtasks: DialogueSchedule is itinerary_initialize.jsonl "
        "and ItineraryInitialization is dialogue_schedule.jsonl (counts and content agree).",
        f"kept = released minus items flagged {', '.join(exclude) or '(nothing excluded)'}; "
        "flag columns count items carrying each flag (an item can carry several).",
    ]
    notes += [
        f"{row['paper_name']}: the paper reports {row['paper_count']} items, the release holds {row['released']}."
        for row in rows
        if row["paper_count"] is not None and row["paper_count"] != row["released"]
    ]
    return records_frame(rows, COLUMNS), records_frame([total], COLUMNS), notes


@stage(
    "table1", "Table 1 (.csv, .md, .tex) from the curation reports", reads=("subtasks",), priority=EARLY,
    env="figures", product=Product("table", "Table 1", "record counts per subtask: released, kept after curation",
                                   main="md", shown=("csv",)),
    inputs={"reports": One("curation", over=("subtask", "subtasks"))},
    outputs=figure_files("table1", csv=".csv", md=".md", tex=".tex"),
)  # fmt: skip
def write_table1(reports: list[str], outputs: dict[str, str]) -> Done:
    """Build Table 1 from per-subtask curation reports and write its csv, md and tex files."""
    frame, total, notes = build_table1(read_json(p) for p in reports)
    write_table(frame, outputs, caption=CAPTION, label=LABEL, notes=notes, footer=total)
    return Done(f"{len(reports)} subtasks")
