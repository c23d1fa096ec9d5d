"""What Table 2 shows of its paired comparisons (``h2htalk.tables.table2_pairs``): a dagger after each model
whose Overall is not separable from its group's best, each row's rank interval, which top-three marks are
ties, and the smallest difference the run's item counts could detect."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations

import pandas as pd

from h2htalk.io import read_csv
from h2htalk.settings import VARIANT_NAMES
from h2htalk.tables.table2 import GROUP_TITLES, SUBTASK_COLUMNS, Row, column_names, column_order, top_three
from h2htalk.tables.table2_pairs import SAP_EFFECT, WITHIN_GROUP

DAGGER = "†"
RANK_COLUMN = "Overall rank"
ORDINALS = {1: "1st", 2: "2nd", 3: "3rd"}
Key = tuple[str, str, str]  # embedder, model, variant


@dataclass(frozen=True)
class Significance:
    """The rows of table2_pairs.csv and table2_ranks.csv, as written."""

    pairs: list[dict[str, str]]
    ranks: list[dict[str, str]]

    @classmethod
    def read(cls, pairs_csv: str | os.PathLike[str], ranks_csv: str | os.PathLike[str]) -> Significance:
        return cls(*(read_csv(path, "the table2-pairs command writes it") for path in (pairs_csv, ranks_csv)))

    @property
    def confidence(self) -> float | None:
        levels = {float(r["confidence"]) for r in [*self.pairs, *self.ranks] if r.get("confidence")}
        return levels.pop() if len(levels) == 1 else None

    @cached_property
    def _ranks_by_row(self) -> dict[Key, dict[str, str]]:
        return {(r["embedder"], r["model"], r["variant"]): r for r in self.ranks}

    @cached_property
    def _within_group(self) -> dict[tuple[str, str, str, frozenset[str]], str]:
        """(embedder, variant, column, the two models) -> "yes", "no" or "" (not tested)."""
        return {
            (r["embedder"], r["variant"], r["column"], frozenset((r["model_a"], r["model_b"]))): r["separable"]
            for r in self.pairs
            if r["comparison"] == WITHIN_GROUP
        }

    def separable(self, embedder: str, variant: str, better: str, worse: str, column: str) -> bool | None:
        """Whether two rows of one group are told apart on ``column`` (None: not compared)."""
        verdict = self._within_group.get((embedder, variant, column, frozenset((better, worse))))
        return (verdict == "yes") if verdict else None

    def annotate(self, frame: pd.DataFrame, rows: Sequence[Row]) -> pd.DataFrame:
        """``frame`` (``table2_frame(rows)``) with a dagger after each model not separable from its group's best
        on Overall, and its rank by Overall with the rank interval after the Overall column."""
        out = frame.copy()
        ranks = []
        for index, row in enumerate(rows):
            record = self._ranks_by_row.get((row.embedder, row.model, row.variant))
            if record and record.get("separable_from_best") == "no":
                out.loc[index, "model"] = f"{out.loc[index, 'model']} {DAGGER}"
            shown = record and record.get("rank")
            ranks.append(f"{record['rank']} ({record['rank_low']}-{record['rank_high']})" if shown else None)
        after = out.columns.get_loc(column_names()["overall"]) + 1
        out.insert(after, RANK_COLUMN, pd.Series(ranks, index=out.index, dtype=object))
        return out

    def notes(self, rows: Sequence[Row]) -> list[str]:
        confidence = self.confidence
        if confidence is None:
            return []
        alpha = 1.0 - confidence
        notes = [
            f"{DAGGER} after a model: its Overall is not separable from its size group's best (paired bootstrap on"
            f" the items both rows answered, Holm-adjusted p >= {alpha:.2g} over every pair and column of the group;"
            f" table2_pairs.csv). {RANK_COLUMN}: the row's rank by Overall within its size group and variant, with"
            f" the central {confidence:.0%} of its ranks over the bootstrap resamples (each row on its own, not"
            " corrected for the group's comparisons as the dagger is; table2_ranks.csv, .png).",
        ]
        ties = self.tie_note(rows)
        return [*notes, *([ties] if ties else []), self.power_note()]

    def tie_note(self, rows: Sequence[Row]) -> str | None:
        """Which of the top-three marks of each group and column are ties (rows not separable), columns with the
        same ties named together."""
        found: dict[tuple[str, str, str], dict[str, list[str]]] = {}
        marked_columns: dict[tuple[str, str, str], int] = {}
        compared = False
        for column in column_order():
            marked: dict[tuple[str, str, str], dict[int, Row]] = {}
            for index, rank in top_three(rows, column).items():
                row = rows[index]
                marked.setdefault((row.embedder, row.variant, row.size_group), {})[rank] = row
            for block, ranked in marked.items():
                tied = []
                for (r1, a), (r2, b) in combinations(sorted(ranked.items()), 2):
                    verdict = self.separable(block[0], block[1], a.model, b.model, column)
                    compared |= verdict is not None
                    if verdict is False:
                        tied.append((r1, r2))
                marked_columns[block] = marked_columns.get(block, 0) + (len(ranked) > 1)
                if tied:
                    text = "=".join(ORDINALS[r] for r in (1, 2, 3)) if len(tied) == 3 else _pairs_text(tied)
                    found.setdefault(block, {}).setdefault(text, []).append(column_names()[column])
        if not compared:
            return None
        if not found:
            return "No top-three mark is a tie: every marked row is separable from the others marked in its column."
        several = len({row.embedder for row in rows}) > 1
        parts = []
        for (embedder, variant, group), ties in found.items():
            every = marked_columns[(embedder, variant, group)]
            shown = [
                f"{text} on {'every column' if len(columns) == every else ', '.join(columns)}"
                for text, columns in ties.items()
            ]
            title = f"{GROUP_TITLES.get(group, group)}, {VARIANT_NAMES.get(variant, variant)}"
            parts.append(f"{title}{f', {embedder}' if several else ''}: " + "; ".join(shown))
        return "Top-three marks that are ties (not separable, as for the dagger): " + " | ".join(parts) + "."

    def power_note(self) -> str:
        """One line: the smallest differences the run's n could detect, and whether anything was told apart."""
        level = f"80 % power, two-sided {self.confidence:.0%}, before Holm"
        compared = [r for r in self.pairs if r["mdd"]]
        if compared:
            overall = [float(r["mdd"]) for r in compared if r["column"] == "overall"]
            subtasks = _medians(compared, "column", "mdd")
            told = sum(r["separable"] == "yes" for r in compared)
            tested = sum(bool(r["separable"]) for r in compared)
            pairs = len({(r["comparison"], r["embedder"], r["model_a"], r["variant_a"], r["model_b"], r["variant_b"])
                         for r in compared})  # fmt: skip
            kinds = " and ".join(
                kind for kind in (WITHIN_GROUP, SAP_EFFECT) if any(r["comparison"] == kind for r in compared)
            )
            source = (
                f"medians over the {pairs} pair{'s' if pairs != 1 else ''} compared ({kinds});"
                " each comparison's in table2_pairs.csv, mdd"
            )
            verdict = (
                "at this run's n no two rows can be told apart on any column"
                if told == 0
                else f"{told} of {tested} comparisons are separable after Holm"
            )
        else:
            overall = [float(r["overall_mdd"]) for r in self.ranks if r.get("overall_mdd")]
            subtasks = {k: statistics.median(v) for k, v in _unpaired(self.ranks).items()}
            source = "from each cell's own SD x sqrt(2): no row has another to be compared with"
            verdict = "no two rows are compared"
        parts = []
        if overall:
            parts.append(f"{statistics.median(overall):.2f} on Overall")
        if subtasks:
            parts.append(f"{min(subtasks.values()):.2f} to {max(subtasks.values()):.2f} on a subtask")
        detectable = " and ".join(parts) or "nothing"
        return f"Power ({level}): a difference between two rows is detectable from {detectable} ({source}); {verdict}."


def _pairs_text(tied: list[tuple[int, int]]) -> str:
    return ", ".join(f"{ORDINALS[a]}={ORDINALS[b]}" for a, b in tied)


def _medians(records: list[dict[str, str]], key: str, value: str) -> dict[str, float]:
    """Per subtask column: the median of ``value`` over the records."""
    by: dict[str, list[float]] = {}
    for r in records:
        if r[key] in SUBTASK_COLUMNS:
            by.setdefault(r[key], []).append(float(r[value]))
    return {k: statistics.median(v) for k, v in by.items()}


def _unpaired(ranks: list[dict[str, str]]) -> dict[str, list[float]]:
    return {
        k: [float(r[f"{k}_mdd"]) for r in ranks if r.get(f"{k}_mdd")]
        for k in SUBTASK_COLUMNS
        if any(r.get(f"{k}_mdd") for r in ranks)
    }
