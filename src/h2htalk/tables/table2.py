"""Table 2: per-model scores by subtask, dimension averages and Overall, beside the paper's numbers.

Columns follow the paper: Dialogue (Standard, Emotional, Schedule, Avg), Itinerary (Basic, Middle, Advance,
Response, Initiation, Avg), Recollection (Synthesis, Refinement, Initialization, Avg), Overall. A dimension's
Avg is the plain mean of its subtasks; Overall is the mean over the 11 subtasks weighted by fixed weights
(``tables.overall_weights``: the released counts by default, which reproduce the paper's Overall best), so it
does not move with how many items a run scored. Rows are (model, variant), grouped by size as in the paper.
Itinerary Basic/Middle/Advance hold, when judged, the reading of the paper's Eq. 3 that ``tables.judged_cell``
names (J: S mixed with the rubric judge; S alone; the judge alone), S otherwise; every other column holds S.
Each cell carries its coverage: items scored of items expected, and how many answers were cut off at their
token limit or failed; an Avg or Overall built from an incomplete cell is marked as well. The Markdown and
LaTeX name columns and variants as the paper does; the CSV keeps the machine keys.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from h2htalk.errors import DataError
from h2htalk.io import read_csv
from h2htalk.settings import CASCADE_MODE, FULL_MODE, PEOPLE_READINGS, VARIANT_NAMES
from h2htalk.subtasks import DIMENSIONS, JUDGED, SUBTASKS, by_dimension
from h2htalk.tabular import records_frame

if TYPE_CHECKING:  # pandas waits for the functions that build frames
    import pandas as pd

GROUPS: tuple[tuple[str, str], ...] = (
    ("open-1-8b", "Open-Source Large Language Models (1-8B)"),
    ("open-8-31b", "Open-Source Large Language Models (8-31B)"),
    ("open-32b-plus", "Open-Source Large Language Models (32B+)"),
    ("specialized", "Specialized Models"),
    ("local", "Local Models"),
    ("baseline", "Baselines"),
)
GROUP_TITLES = dict(GROUPS)
SUBTASK_COLUMNS: tuple[str, ...] = tuple(s.key for s in SUBTASKS)


def column_order() -> list[str]:
    columns = []
    for dimension, keys in by_dimension():
        columns += [*keys, f"{dimension}_avg"]
    return [*columns, "overall"]


def column_names() -> dict[str, str]:
    """Score column key -> the header the Markdown and LaTeX show: the paper's subtask and dimension names."""
    names = {s.key: s.paper_name for s in SUBTASKS}
    names.update({f"{d}_avg": f"{d.title()} Avg" for d in DIMENSIONS})
    return {**names, "overall": "Overall"}


def inputs_of(column: str) -> list[str]:
    """The subtask cells a score column is built from: itself, its dimension's subtasks, or all of them."""
    if column == "overall":
        return list(SUBTASK_COLUMNS)
    dimension = column.removesuffix("_avg")
    return dict(by_dimension()).get(dimension, [column]) if column.endswith("_avg") else [column]


PENDING = "pending"  # a judged cell's measure before its judge has run (the partial Table 2)


@dataclass(frozen=True)
class CellValue:
    value: float | None  # None: no item of the subtask has a score (e.g. no parseable judge answer)
    ci_low: float | None
    ci_high: float | None
    n: int  # items with a score
    measure: str  # what the value is: "S", or a judged cell's reading ("J", "S" or "judge")
    expected: int = 0  # items the cell should have (n + missing)
    cut_off: int = 0  # answers that stopped at their token limit
    failed: int = 0  # answers that failed for good (a refusal, an over-long prompt), scored as empty
    people_items: int = 0  # items whose people's score the value rests on (judged cells); CSV: _human_items
    people_ratings: int = 0  # people's ratings of those items; CSV: _human_ratings
    judge: JudgeMode | None = None  # a judged cell's judges and their correction (JUDGE_PARTS in the CSV)

    @property
    def missing(self) -> int:
        return self.expected - self.n


@dataclass(frozen=True)
class JudgeMode:
    """How a judged cell's judge reading came about: ``mode`` full or cascade (rubric_judge.mode); ``sample_items`` the
    items its correction rests on (the own judge's sample in cascade mode, people's in review sample mode; 0: none);
    the rectifier (the mean correction, on the reading's scale) and its CI (None: not corrected); in cascade mode the
    items whose cheap verdict could not be read (in the cell with the stand-in prediction)."""

    mode: str
    sample_items: int = 0
    rectifier: float | None = None
    rectifier_ci_low: float | None = None
    rectifier_ci_high: float | None = None
    cheap_failures: int | None = None  # cascade mode: items whose cheap verdict could not be read, kept with the
    # stand-in (None in full mode: no cheap judge)


def judge_mode(summary: dict[str, Any], reading: dict[str, Any], judged_cell: str) -> JudgeMode | None:
    """A judged cell's ``JudgeMode`` under ``judged_cell`` (the rectifier only where the reading has one: J and
    judge, not S)."""
    if "readings" not in summary:
        return None
    mode = summary.get("cascade", {}).get("mode", FULL_MODE)
    rectifier = reading.get("rectifier") if judged_cell in PEOPLE_READINGS else None
    if rectifier is None:
        return JudgeMode(mode)
    unread = int(summary["cascade"].get("cheap_failures", 0)) if mode == CASCADE_MODE else None
    return JudgeMode(mode, rectifier["n"], rectifier["value"], rectifier["ci_low"], rectifier["ci_high"], unread)


def cell_reading(summary: dict[str, Any], judged_cell: str) -> dict[str, Any]:
    """What a summary puts in its Table 2 cell: an S summary its value; a judged cell's summary (it carries
    ``readings``) the reading ``judged_cell`` names (tables.judged_cell: J, S or judge). Value, CI bounds, items
    scored and missing, and the measure shown."""
    if summary.get("pending"):  # the judge has not run yet: no value, and none missing
        return {"value": None, "value_ci_low": None, "value_ci_high": None, "n": 0, "missing": 0, "measure": PENDING}
    if "readings" in summary:
        reading = summary["readings"][judged_cell]
        return {**reading, "measure": judged_cell}
    if summary["measure"] != "S":  # a J summary written before judged cells carried their readings
        cell = "/".join(str(summary.get(k)) for k in ("embedder", "model", "variant", "subtask"))
        raise DataError(f"the J summary of {cell} has no readings (J, S, judge): run combine-j again")
    keys = ("value", "value_ci_low", "value_ci_high", "n")
    return {**{k: summary[k] for k in keys}, "missing": summary.get("missing", 0), "measure": summary["measure"]}


def aggregate(cells: dict[str, CellValue], weights: dict[str, float]) -> dict[str, float]:
    """Dimension averages (plain means) and Overall (weighted by the fixed ``weights``), from the subtask cells."""
    out: dict[str, float] = {}
    present = {k for k, c in cells.items() if c.value is not None}
    for dimension, keys in by_dimension():
        if all(k in present for k in keys):
            out[f"{dimension}_avg"] = sum(cells[k].value for k in keys) / len(keys)
    if all(k in present for k in SUBTASK_COLUMNS):
        total = sum(weights[k] for k in SUBTASK_COLUMNS)
        out["overall"] = sum(cells[k].value * weights[k] for k in SUBTASK_COLUMNS) / total
    return out


@dataclass
class Row:
    model: str
    display_name: str
    size_group: str
    variant: str
    embedder: str
    cells: dict[str, CellValue]
    weights: dict[str, float]

    def values(self) -> dict[str, float]:
        present = {k: c.value for k, c in self.cells.items() if c.value is not None}
        return {**present, **aggregate(self.cells, self.weights)}

    def incomplete(self, column: str) -> bool:
        """Whether a score column rests on a cell scored on fewer items than expected."""
        return any(self.cells[k].missing > 0 for k in inputs_of(column) if k in self.cells)


def build_rows(
    summaries: Iterable[dict[str, Any]],
    registry: dict[str, dict[str, Any]],
    weights: dict[str, float],
    judged_cell: str,
) -> list[Row]:
    """One row per (embedder, model, variant) from per-subtask summaries (``value`` with its CI and measure; a
    judged cell's value is the reading ``judged_cell`` names)."""
    rows: dict[tuple[str, str, str], Row] = {}
    for summary in summaries:
        model = summary["model"]
        entry = registry.get(model, {"display_name": model, "size_group": "baseline"})
        key = (summary["embedder"], model, summary["variant"])
        identity = (model, entry["display_name"], entry["size_group"], summary["variant"], summary["embedder"])
        row = rows.setdefault(key, Row(*identity, {}, weights))
        reading = cell_reading(summary, judged_cell)
        value = reading["value"]
        people = "readings" in summary and judged_cell in PEOPLE_READINGS  # S rests on no score by people
        row.cells[summary["subtask"]] = CellValue(
            None if value is None else float(value),
            reading["value_ci_low"],
            reading["value_ci_high"],
            int(reading["n"]),
            reading["measure"],
            expected=int(reading["n"]) + int(reading["missing"]),
            cut_off=int(summary.get("answers", {}).get("cut_off", 0)),
            failed=int(summary.get("answers", {}).get("failed", 0)),
            people_items=int(summary.get("human_items", 0)) if people else 0,
            people_ratings=int(summary.get("human_ratings", 0)) if people else 0,
            judge=judge_mode(summary, reading, judged_cell),
        )
    order = {g: i for i, (g, _) in enumerate(GROUPS)}
    return sorted(rows.values(), key=lambda r: (r.embedder, order.get(r.size_group, 99), r.display_name, r.variant))


# A top-three mark says "among the best three of the group"; in a group of three or fewer every row would get
# one, so a mark would only restate the order. The lone laptop model is not "first".
MIN_RANKED = 4


def top_three(rows: Sequence[Row], column: str) -> dict[int, int]:
    """Row index -> rank (1..3) of the best three values of ``column`` within each (embedder, variant, size
    group) of at least MIN_RANKED rows with a value: a model's SAP and no-SAP rows never compete for the same
    marks, and a small group gets none."""
    ranks: dict[int, int] = {}
    groups: dict[tuple[str, str, str], list[tuple[float, int]]] = {}
    for index, row in enumerate(rows):
        value = row.values().get(column)
        if value is not None:
            groups.setdefault((row.embedder, row.variant, row.size_group), []).append((value, index))
    for members in groups.values():
        if len(members) < MIN_RANKED:
            continue
        for rank, (_, index) in enumerate(sorted(members, key=lambda m: -m[0])[:3], start=1):
            ranks[index] = rank
    return ranks


CAPTION = "Table 2: companion-task scores by model"
LABEL = "tab:table2"
NOTES: tuple[str, ...] = (
    "Avg: plain mean of the dimension's subtasks; Overall: mean of the 11 subtasks weighted by fixed weights"
    " (tables.overall_weights; by default the released counts, so Overall does not move with a run's coverage).",
    "A cell scored on fewer items than expected shows (scored/expected), and an Avg or Overall built from one"
    " ends in *; the CSV has, per cell, the items scored, expected and missing and the answers cut off at their"
    " token limit or failed.",
    r"LaTeX: \first, \second, \third mark the top three per size group and variant, in groups of at least"
    f" {MIN_RANKED} rows; define them, e.g. "
    r"\newcommand{\first}[1]{\cellcolor{green!25}#1} with \usepackage[table]{xcolor}.",
)
INCOMPLETE_MARK = "*"
RANK_COMMANDS = {1: "first", 2: "second", 3: "third"}
CELL_PARTS = (
    "ci_low", "ci_high", "n", "expected", "missing", "cut_off", "failed", "measure", "human_items", "human_ratings",
)  # fmt: skip
JUDGE_PARTS = (
    "judge_mode",
    "sample",
    "rectifier",
    "rectifier_ci_low",
    "rectifier_ci_high",
    "cheap_failures",
)  # judged subtasks only; fmt: skip
LEVELS = "Levels I-III (ItineraryBasic, ItineraryMiddle, ItineraryAdvanced)"


def judged_note(judged_cell: str, alphas: Iterable[float]) -> str:
    """What a judged cell holds under ``tables.judged_cell``: one reading of the paper's Eq. 3, said as one."""
    if judged_cell == "S":
        return (
            f"{LEVELS}, judged: S alone, as every other column (tables.judged_cell: S); the judge's scores are in"
            " the J summaries."
        )
    missing = (
        " An empty cell means no item had a parseable judge answer (those items are in results/review/queue.csv),"
        " so its Avg and Overall are not computed."
    )
    if judged_cell == "judge":
        return f"{LEVELS}, judged: the rubric judge's score (0-5) x20 alone (tables.judged_cell: judge).{missing}"
    mix = " or ".join(f"{a:g}*S/20 + {1 - a:g}*J_judge" for a in sorted(set(alphas)))
    return (
        f"{LEVELS}, judged: J = {mix} on 0-5, shown x20 (tables.judged_cell: J), one reading of the paper's"
        f" Eq. 3, which does not say how it puts S (0-100) and the judge (0-5) on one scale.{missing}"
    )


def cascade_notes(summaries: Iterable[dict[str, Any]], judged_cell: str) -> list[str]:
    """What Table 2 says of cells whose judge ran in cascade mode: who judged every item and who the sample, how
    large the samples are, and the rectifiers (in the CSV per cell, with their CIs)."""
    cells = [s for s in summaries if s.get("cascade", {}).get("mode") == CASCADE_MODE]
    if not cells:
        return []
    judges = sorted({(s["cascade"].get("every_item_judge"), s["cascade"].get("sample_judge")) for s in cells})
    who = "; ".join(f"{cheap} judged every item, {strong} a seeded sample of each cell" for cheap, strong in judges)
    used = [s["cascade"]["sample_used"] for s in cells]
    text = (
        f"{LEVELS} in cascade mode (rubric_judge.mode: cascade, {len(cells)} cells): {who}; each cell is the cheap"
        f" judge's mean corrected by the sample (prediction-powered, its CI counts both), on {min(used)}-{max(used)}"
        " sampled items a cell (the CSV's _judge_mode, _sample, _rectifier and its CI per cell)."
    )
    if judged_cell in PEOPLE_READINGS:
        rectifiers = [s["readings"][judged_cell].get("rectifier") for s in cells]
        known = [r for r in rectifiers if r]
        if known:
            excluded = sum(r["ci_low"] > 0 or r["ci_high"] < 0 for r in known)
            low, high = min(r["value"] for r in known), max(r["value"] for r in known)
            text += (
                f" Rectifier (own judge minus cheap judge, on the {judged_cell} reading): {low:+.1f} to {high:+.1f};"
                f" its CI excludes 0 in {excluded} of {len(known)} cells."
            )
        missing = len(rectifiers) - len(known)
        if missing:
            text += f" {missing} cells had fewer than 2 sampled items judged by both: the cheap judge's alone."
        unread = [s["cascade"].get("cheap_failures", 0) for s in cells]
        text += (
            f" Cheap verdicts that could not be read: {sum(unread)} items in {sum(map(bool, unread))} cells, shown"
            " per cell as (k stand-in): they stay in their cell with a stand-in prediction, the mean of the cell's"
            " readable cheap verdicts, and their strong verdict is used where sampled."
        )
    return [text]


def answer_notes(rows: Sequence[Row]) -> list[str]:
    """The answers cut off at their token limit or failed (no answer came: scored as empty), per row that has
    any, by subtask; they are the same for every embedder, so a (model, variant) is named once."""
    names = column_names()
    first: dict[tuple[str, str], Row] = {}
    for row in rows:
        first.setdefault((row.model, row.variant), row)
    parts = []
    for row in first.values():
        counts = {k: (c.cut_off, c.failed) for k, c in row.cells.items() if c.cut_off or c.failed}
        if counts:
            cut, failed = (sum(v[i] for v in counts.values()) for i in (0, 1))
            by_subtask = ", ".join(f"{names[k]} {c}/{f}" for k, (c, f) in counts.items())
            variant = VARIANT_NAMES.get(row.variant, row.variant)
            parts.append(f"{row.display_name} {variant}: {cut}/{failed} ({by_subtask})")
    head = "Answers cut off at their token limit / failed (no answer came; scored as empty)"
    if not parts:
        return [f"{head}: none."]
    rest = "; every other row 0/0" if len(parts) < len(first) else ""
    return [f"{head}: {'; '.join(parts)}{rest}."]


def display_columns() -> list[str]:
    names = column_names()
    return ["group", "model", "variant", "embedder", *(names[column] for column in column_order())]


def table2_frame(rows: Sequence[Row]) -> pd.DataFrame:
    """The human-readable Table 2 (Markdown, LaTeX): one row per (model, variant, embedder), headed and named as
    in the paper."""
    names = column_names()
    records = []
    for row in rows:
        values = row.values()
        records.append(
            {
                "group": GROUP_TITLES.get(row.size_group, row.size_group),
                "model": row.display_name,
                "variant": VARIANT_NAMES.get(row.variant, row.variant),
                "embedder": row.embedder,
                **{names[column]: _shown(values.get(column), row, column) for column in column_order()},
            }
        )
    return records_frame(records, display_columns())


def _shown(value: float | None, row: Row, column: str) -> float | str | None:
    """A cell as the md and tex show it: the value, with (scored/expected) when a subtask cell misses items,
    and the incomplete mark on an Avg or Overall built from such a cell; "pending" where a judged cell it rests on
    waits for the judge."""
    if value is None and any(row.cells[k].measure == PENDING for k in inputs_of(column) if k in row.cells):
        return PENDING
    cell = row.cells.get(column) if column in SUBTASK_COLUMNS else None
    unread = cell.judge.cheap_failures if cell and cell.judge and cell.measure in PEOPLE_READINGS else 0
    if value is None or not (row.incomplete(column) or unread):
        return value
    if cell:
        parts = [f"{cell.n}/{cell.expected}"] if cell.missing > 0 else []
        return f"{value:.2f} ({', '.join([*parts, *([f'{unread} stand-in'] if unread else [])])})"
    return f"{value:.2f}{INCOMPLETE_MARK}"


def mark_judged(frame: pd.DataFrame, rows: Sequence[Row], mark: str) -> pd.DataFrame:
    """``frame`` (``table2_frame(rows)``) with ``mark`` after every cell a judge's score is in (a judged cell read as
    J or judge) and every Avg and Overall built from one: a judge at chance on its ladder made them."""
    names = column_names()
    marked = frame.copy().astype(object)
    for index, row in enumerate(rows):
        judged = {k for k, c in row.cells.items() if c.judge is not None and c.measure in PEOPLE_READINGS}
        for column in column_order():
            value = marked.loc[index, names[column]]
            if judged & set(inputs_of(column)) and value is not None and value == value:  # NaN: no value
                shown = f"{value:.2f}" if isinstance(value, float) else str(value)
                marked.loc[index, names[column]] = shown + mark
    return marked


def table2_marks(rows: Sequence[Row]) -> pd.DataFrame:
    """LaTeX marks for ``table2_frame(rows)``: "first", "second", "third" on the top three values of each score
    column within each (embedder, variant, size group) of at least MIN_RANKED rows, "" elsewhere."""
    import pandas as pd

    names = column_names()
    marks = pd.DataFrame("", index=range(len(rows)), columns=display_columns(), dtype=object)
    for column in column_order():
        for index, rank in top_three(rows, column).items():
            marks.loc[index, names[column]] = RANK_COMMANDS[rank]
    return marks


def ci_frame(rows: Sequence[Row]) -> pd.DataFrame:
    """The machine-readable Table 2: every value with its 95 % CI and coverage (items scored, expected, missing;
    answers cut off or failed; items and ratings by people it rests on), one row per (model, variant, embedder).

    Values and CI bounds are floats (4 decimals in the CSV); a subtask without a cell has all its columns empty.
    """
    columns = column_order()
    header = ["model", "display_name", "size_group", "variant", "embedder"]
    for column in columns:
        header.append(column)
        if column in SUBTASK_COLUMNS:
            header += [f"{column}_{part}" for part in CELL_PARTS]
        if column in JUDGED:
            header += [f"{column}_{part}" for part in JUDGE_PARTS]
    records = []
    for row in rows:
        values = row.values()
        record: dict[str, Any] = {
            "model": row.model,
            "display_name": row.display_name,
            "size_group": row.size_group,
            "variant": row.variant,
            "embedder": row.embedder,
        }
        for column in columns:
            record[column] = _float(values.get(column))
            cell = row.cells.get(column)
            if column in SUBTASK_COLUMNS and cell:
                parts = (_float(cell.ci_low), _float(cell.ci_high), cell.n, cell.expected, cell.missing)
                parts += (cell.cut_off, cell.failed, cell.measure, cell.people_items, cell.people_ratings)
                record.update({f"{column}_{part}": value for part, value in zip(CELL_PARTS, parts, strict=True)})
            if column in JUDGED and cell and cell.judge:
                judge = cell.judge
                found = (
                    judge.mode, judge.sample_items, judge.rectifier, judge.rectifier_ci_low, judge.rectifier_ci_high,
                    judge.cheap_failures,
                )  # fmt: skip
                record.update({f"{column}_{part}": value for part, value in zip(JUDGE_PARTS, found, strict=True)})
        records.append(record)
    return records_frame(records, header)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def read_paper_table2(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    rows = read_csv(path, "the paper's Table 2: paper.table2")
    numeric = [*column_order()]
    out = []
    for number, row in enumerate(rows, start=2):
        try:
            out.append({"model": row["model"], "group": row["group"], **{c: float(row[c]) for c in numeric}})
        except (KeyError, ValueError) as exc:
            raise DataError(f"{path}: line {number}: {exc}") from None
    return out


def audit_paper(paper_rows: Sequence[dict[str, Any]], weights: dict[str, dict[str, int]], tolerance: float = 0.05):
    """Rows of the paper's Table 2 whose Avg or Overall do not follow from their own subtask columns.

    ``weights`` maps a weighting name (e.g. paper counts, released counts) to subtask -> item count; a row's
    Overall is flagged when it misses every weighting by more than ``tolerance``.
    """
    findings = []
    for row in paper_rows:
        for dimension, keys in by_dimension():
            recomputed = sum(row[k] for k in keys) / len(keys)
            reported = row[f"{dimension}_avg"]
            if abs(recomputed - reported) > max(tolerance / 5, 0.011):  # Avg is printed to 2 decimals
                findings.append(
                    {
                        "model": row["model"],
                        "column": f"{dimension}_avg",
                        "reported": reported,
                        "recomputed": round(recomputed, 4),
                        "weights": "plain mean",
                        "difference": round(reported - recomputed, 4),
                    }
                )
        overall = {
            name: sum(row[k] * w[k] for k in SUBTASK_COLUMNS) / sum(w[k] for k in SUBTASK_COLUMNS)
            for name, w in weights.items()
        }
        if all(abs(value - row["overall"]) > tolerance for value in overall.values()):
            for name, value in overall.items():
                findings.append(
                    {
                        "model": row["model"],
                        "column": "overall",
                        "reported": row["overall"],
                        "recomputed": round(value, 4),
                        "weights": name,
                        "difference": round(row["overall"] - value, 4),
                    }
                )
    return findings


def comparison(rows: Sequence[Row], paper_rows: Sequence[dict[str, Any]], variant: str) -> list[dict[str, Any]]:
    """Ours, the paper's and the difference per column, for every model in both (one variant of ours).

    Baseline rows come along with an empty paper column: they show where chance and the ceiling lie beside
    the paper's numbers, for every embedder used.
    """
    paper = {r["model"]: r for r in paper_rows}
    out = []
    for row in rows:
        in_paper = row.display_name in paper
        if row.variant != variant or not (in_paper or row.size_group == "baseline"):
            continue
        values = row.values()
        for column in column_order():
            if column in values:
                theirs = paper[row.display_name][column] if in_paper else None
                out.append(
                    {
                        "model": row.display_name,
                        "embedder": row.embedder,
                        "variant": row.variant,
                        "column": column,
                        "ours": round(values[column], 4),
                        "paper": theirs,
                        "difference": None if theirs is None else round(values[column] - theirs, 4),
                    }
                )
    return out
