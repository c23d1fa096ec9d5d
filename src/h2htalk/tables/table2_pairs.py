"""Which of Table 2's rows can be told apart: paired comparisons, rank intervals and detectable differences.

Rows are compared two ways: every pair of rows of one size group and variant (per embedder; the baselines are
calibration rows and take no part), and each model's SAP row against its no-SAP row. A pair is compared on
the items both rows answered, per subtask, per dimension Avg and on Overall, by a paired bootstrap: each
subtask's items are resampled once (``scoring.bootstrap``) and those resamples serve every row and pair, so
an Avg's and Overall's resampled differences are the fixed-weight means of the subtasks' (the weights of
``h2htalk.tables.table2.aggregate``). Items that share a conversation (each item's ``cluster``, found in the
references when they were scored: ``h2htalk.data.conversations``) are resampled whole clusters at a time.
p-values are corrected by Holm's method within a family: every pair and every column of one size group and
variant (per embedder: all the claims Table 2 makes about that block), and the SAP pairs of all models on
every column (per embedder). Each row's rank by Overall within its group comes with its interval over the same
resamples. The
minimum detectable difference (80 % power) of each comparison is from the SD of its paired differences;
each row's own cells get one from their own SD x sqrt(2), for when there is no row to pair with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from h2htalk.settings import WITH_SAP, WITHOUT_SAP, BootstrapSettings
from h2htalk.stats.multiple import holm
from h2htalk.stats.paired import (
    Estimates,
    Resamples,
    combine,
    pair_differences,
    paired_test,
    rank_intervals,
    row_means,
)
from h2htalk.stats.power import minimum_detectable_difference
from h2htalk.subtasks import by_dimension
from h2htalk.tables.table2 import SUBTASK_COLUMNS, column_order

BASELINE_GROUP = "baseline"
WITHIN_GROUP, SAP_EFFECT = "within group", "SAP vs no-SAP"
PAIR_COLUMNS = (
    "comparison", "embedder", "size_group", "variant", "pair", "model_a", "variant_a", "model_b", "variant_b",
    "column", "measure", "value_a", "value_b", "difference", "ci_low", "ci_high", "n", "sd", "mdd", "mdd_basis", "p",
    "family_size", "p_holm", "separable", "confidence",
)  # fmt: skip
RANK_COLUMNS = (
    "embedder", "size_group", "variant", "model", "display_name", "overall", "overall_ci_low", "overall_ci_high",
    "rank", "rank_low", "rank_high", "rows", "best", "separable_from_best", "confidence",
    *(f"{c}_mdd" for c in column_order()),
)  # fmt: skip


@dataclass(frozen=True)
class RowItems:
    """One Table 2 row's per-item values: subtask -> item id -> value (S, or J100 where judged)."""

    embedder: str
    model: str
    display_name: str
    size_group: str
    variant: str
    values: Mapping[str, Mapping[str, float]]
    measures: Mapping[str, str]
    clusters: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # subtask -> item id -> its cluster
    rated: Mapping[str, int] = field(default_factory=dict)  # subtask -> the sample a corrected cell rests on

    @property
    def label(self) -> str:
        return f"{self.display_name} [{self.variant}]"


@dataclass(frozen=True)
class Column:
    """A Table 2 column as a fixed-weight mean of subtasks: a subtask itself, a dimension's Avg, Overall."""

    name: str
    tasks: tuple[str, ...]
    coefficients: tuple[float, ...]


def table2_columns(weights: Mapping[str, float], tasks: Iterable[str]) -> list[Column]:
    """Table 2's columns (as ``column_order``) that ``tasks`` make up, each as its subtasks' coefficients."""
    present = set(tasks)
    columns = {k: Column(k, (k,), (1.0,)) for k in SUBTASK_COLUMNS if k in present}
    for dimension, keys in by_dimension():
        if set(keys) <= present:
            columns[f"{dimension}_avg"] = Column(f"{dimension}_avg", tuple(keys), (1.0 / len(keys),) * len(keys))
    if set(SUBTASK_COLUMNS) <= present:
        total = float(sum(weights[k] for k in SUBTASK_COLUMNS))
        columns["overall"] = Column("overall", SUBTASK_COLUMNS, tuple(weights[k] / total for k in SUBTASK_COLUMNS))
    return [columns[c] for c in column_order() if c in columns]


@dataclass(frozen=True)
class Pair:
    a: int  # row indices within one embedder's rows
    b: int
    comparison: str
    family: tuple[str, ...]  # the pairs whose every column is corrected together


@dataclass
class Comparisons:
    pairs: list[dict[str, Any]]  # one record per pair and column (PAIR_COLUMNS)
    ranks: list[dict[str, Any]]  # one record per row (RANK_COLUMNS)


def compare_rows(rows: Sequence[RowItems], weights: Mapping[str, float], bootstrap: BootstrapSettings) -> Comparisons:
    """Every comparison and rank interval of Table 2's rows (baselines left out), embedder by embedder."""
    out = Comparisons([], [])
    compared = [r for r in rows if r.size_group != BASELINE_GROUP]
    for embedder in dict.fromkeys(r.embedder for r in compared):
        result = _compare_embedder([r for r in compared if r.embedder == embedder], weights, bootstrap)
        out.pairs += result.pairs
        out.ranks += result.ranks
    return out


def _compare_embedder(rows: list[RowItems], weights: Mapping[str, float], bootstrap: BootstrapSettings) -> Comparisons:
    tasks = [k for k in SUBTASK_COLUMNS if any(k in r.values for r in rows)]
    columns = table2_columns(weights, tasks)
    ids = {task: sorted({i for r in rows for i in r.values.get(task, {})}) for task in tasks}
    values = {task: _item_values(rows, task, ids[task]) for task in tasks}
    groups = _groups(rows, _observed_overall(values, columns))
    pairs = _pairs(rows, groups)
    index = np.array([(p.a, p.b) for p in pairs], dtype=np.intp).reshape(-1, 2)
    means: dict[str, Estimates] = {}
    differences: dict[str, Estimates] = {}
    detectable: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # per task: the SE each pair's MDD is from, fallen back
    for task in tasks:
        # one stream per subtask (its place in the paper's order): a subtask's resamples do not depend on which
        # other subtasks a run has; drawn once for every row and pair, and let go before the next subtask's
        seed = (bootstrap.seed, SUBTASK_COLUMNS.index(task))
        resamples = Resamples(len(ids[task]), bootstrap.resamples, seed, task_clusters(rows, task, ids[task]))
        own_df, pair_df = _sample_df(rows, task, index)
        means[task] = _at_most(row_means(values[task], resamples), own_df)
        unlike = np.array([rows[p.a].measures.get(task) != rows[p.b].measures.get(task) for p in pairs], bool)
        differences[task] = _at_most(pair_differences(values[task], index, resamples), pair_df).without(unlike)
        detectable[task] = _detectable(differences[task], means[task], index)
    row_columns = {c.name: combine([means[t] for t in c.tasks], c.coefficients) for c in columns}
    pair_records = _pair_records(rows, pairs, columns, differences, detectable, row_columns, bootstrap.confidence)
    rank_records = _rank_records(rows, groups, row_columns, pair_records, bootstrap.confidence)
    return Comparisons(pair_records, rank_records)


def _sample_df(rows: list[RowItems], task: str, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The degrees of freedom a corrected cell's spread has at most (infinite for another): the spread of its
    pseudo-values rests mostly on the n items of its sample, so n - 1; a pair's on the items of both samples: the
    larger one's of two rows of one variant (every model's sample is drawn from the same order of the variant's
    items, ``h2htalk.judge.cascade``, so the smaller is within the larger), else the sum of its rows'. Per row, and
    per pair."""
    own = np.array([row.rated[task] - 1.0 if task in row.rated else np.inf for row in rows])
    finite = np.where(np.isinf(own), 0.0, own)
    a, b = index[:, 0], index[:, 1]
    either = ~np.isinf(own[a]) | ~np.isinf(own[b])
    variants = np.array([row.variant for row in rows])
    union = np.where(variants[a] == variants[b], np.maximum(finite[a], finite[b]), finite[a] + finite[b])
    return own, np.where(either, union, np.inf)


def _at_most(estimates: Estimates, df: np.ndarray) -> Estimates:
    return replace(estimates, df=np.minimum(estimates.df, df)) if np.isfinite(df).any() else estimates


def _item_values(rows: list[RowItems], task: str, ids: list[str]) -> np.ndarray:
    """rows x items (``ids``: every item any row answered), NaN where a row has no value."""
    return np.array([[r.values.get(task, {}).get(i, np.nan) for i in ids] for r in rows], dtype=np.float64)


def task_clusters(rows: Sequence[RowItems], task: str, ids: Sequence[str]) -> list[str] | None:
    """The cluster of each item of ``task`` (as any row's items name it; an item no row names is alone), or None
    when every item is alone: then items are drawn one by one."""
    named: dict[str, str] = {}
    for row in rows:
        for item, cluster in row.clusters.get(task, {}).items():
            named.setdefault(item, cluster)
    labels = [named.get(item, item) for item in ids]
    return labels if len(set(labels)) < len(labels) else None


def _observed_overall(values: dict[str, np.ndarray], columns: list[Column]) -> np.ndarray | None:
    """Each row's Overall as Table 2 shows it (NaN without every subtask), or None when no row can have one."""
    overall = next((c for c in columns if c.name == "overall"), None)
    if overall is None:
        return None
    with np.errstate(invalid="ignore"):
        means = {task: matrix.sum(axis=1, where=~np.isnan(matrix)) / (~np.isnan(matrix)).sum(axis=1)
                 for task, matrix in values.items()}  # fmt: skip
    return sum(c * means[t] for t, c in zip(overall.tasks, overall.coefficients, strict=True))


def _groups(rows: list[RowItems], overall: np.ndarray | None) -> dict[tuple[str, str], list[int]]:
    """(variant, size group) -> its rows, best Overall first (rows without one last, then by name)."""
    groups: dict[tuple[str, str], list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault((row.variant, row.size_group), []).append(index)
    best = np.zeros(len(rows)) if overall is None else -np.nan_to_num(overall, nan=-np.inf)
    return {key: sorted(members, key=lambda i: (best[i], rows[i].display_name)) for key, members in groups.items()}


def _pairs(rows: list[RowItems], groups: dict[tuple[str, str], list[int]]) -> list[Pair]:
    """Every pair within a group (the better Overall first), and each model's SAP row against its no-SAP row."""
    pairs = [
        Pair(a, b, WITHIN_GROUP, (WITHIN_GROUP, variant, group))
        for (variant, group), members in groups.items()
        for position, a in enumerate(members)
        for b in members[position + 1 :]
    ]
    by_model = {(r.model, r.variant): i for i, r in enumerate(rows)}
    for model in dict.fromkeys(r.model for r in rows):
        if (model, WITH_SAP) in by_model and (model, WITHOUT_SAP) in by_model:
            pairs.append(Pair(by_model[(model, WITH_SAP)], by_model[(model, WITHOUT_SAP)], SAP_EFFECT, (SAP_EFFECT,)))
    return pairs


def _detectable(differences: Estimates, means: Estimates, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The standard error each pair's MDD is quoted from: its paired differences', or where those do not vary
    (two rows that answered alike) or rest on fewer than two items, the two rows' own, sqrt(se_a^2 + se_b^2)
    (each cell's SD x sqrt(2) / sqrt(n) for equal SDs); and which pairs fell back on the rows' own."""
    own = np.sqrt(means.standard_error[index[:, 0]] ** 2 + means.standard_error[index[:, 1]] ** 2)
    fell_back = ~(differences.standard_error > 0) & ~np.isnan(differences.observed)
    return np.where(fell_back, own, differences.standard_error), fell_back


def _pair_records(
    rows: list[RowItems],
    pairs: list[Pair],
    columns: list[Column],
    differences: dict[str, Estimates],
    detectable: dict[str, tuple[np.ndarray, np.ndarray]],
    row_columns: dict[str, Estimates],
    confidence: float,
) -> list[dict[str, Any]]:
    estimates = [combine([differences[t] for t in column.tasks], column.coefficients) for column in columns]
    tests = [paired_test(estimate, confidence) for estimate in estimates]
    adjusted, family_size = _holm_by_family(pairs, np.array([test.p for test in tests]).reshape(len(columns), -1))
    records = []
    for c, (column, estimate, test) in enumerate(zip(columns, estimates, tests, strict=True)):
        terms = list(zip(column.coefficients, (detectable[t] for t in column.tasks), strict=True))
        mdd = minimum_detectable_difference(np.sqrt(sum(c**2 * se**2 for c, (se, _) in terms)), confidence)
        own = row_columns[column.name].observed
        single = len(column.tasks) == 1
        fell_back = np.array([back for _, (_, back) in terms])
        basis = np.where(fell_back.all(axis=0), "unpaired", np.where(fell_back.any(axis=0), "mixed", "paired"))
        for k, pair in enumerate(pairs):
            if np.isnan(estimate.observed[k]):
                continue  # no item both rows answered, or S against J
            a, b = rows[pair.a], rows[pair.b]
            records.append(
                {
                    "comparison": pair.comparison,
                    "embedder": a.embedder,
                    "size_group": a.size_group,
                    "variant": a.variant if pair.comparison == WITHIN_GROUP else f"{a.variant} - {b.variant}",
                    "pair": f"{a.label} vs {b.label}",
                    "model_a": a.model,
                    "variant_a": a.variant,
                    "model_b": b.model,
                    "variant_b": b.variant,
                    "column": column.name,
                    "measure": a.measures.get(column.tasks[0]) if single else None,
                    "value_a": _number(own[pair.a]),
                    "value_b": _number(own[pair.b]),
                    "difference": float(estimate.observed[k]),
                    "ci_low": _number(test.ci_low[k]),
                    "ci_high": _number(test.ci_high[k]),
                    "n": int(estimate.n[k]),
                    "sd": _number(estimate.standard_error[k] * np.sqrt(estimate.n[k])) if single else None,
                    "mdd": _number(mdd[k]),
                    "mdd_basis": str(basis[k]),
                    "p": _number(test.p[k]),
                    "family_size": int(family_size[c, k]),
                    "p_holm": _number(adjusted[c, k]),
                    "separable": None if np.isnan(adjusted[c, k]) else bool(adjusted[c, k] < 1.0 - confidence),
                    "confidence": confidence,
                }
            )
    return records


def _holm_by_family(pairs: list[Pair], p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Holm-adjusted p-values (columns x pairs) and the size of each one's family: a family is every column of
    every pair of one group (or every SAP pair), the claims one block of Table 2 makes."""
    adjusted = np.full(p.shape, np.nan)
    size = np.zeros(p.shape, dtype=int)
    for family in dict.fromkeys(pair.family for pair in pairs):
        members = np.array([pair.family == family for pair in pairs])
        adjusted[:, members] = holm(p[:, members].ravel()).reshape(p.shape[0], -1)
        size[:, members] = int((~np.isnan(p[:, members])).sum())
    return adjusted, size


def _rank_records(
    rows: list[RowItems],
    groups: dict[tuple[str, str], list[int]],
    row_columns: dict[str, Estimates],
    pair_records: list[dict[str, Any]],
    confidence: float,
) -> list[dict[str, Any]]:
    """Per row: its Overall rank within its group with the rank interval, whether the group's best is
    separable from it, and each cell's detectable difference from the cell's own SD x sqrt(2)."""
    separable = {
        (r["model_a"], r["model_b"], r["variant"]): r["separable"]
        for r in pair_records
        if r["comparison"] == WITHIN_GROUP and r["column"] == "overall"
    }
    overall = row_columns.get("overall")
    unpaired = {
        name: minimum_detectable_difference(np.sqrt(2.0) * estimate.standard_error, confidence)
        for name, estimate in row_columns.items()
    }
    records = []
    for (variant, group), members in groups.items():
        ranks = rank_intervals(overall.take(members), confidence) if overall is not None else None
        best = rows[members[0]]
        for position, index in enumerate(members):
            row = rows[index]
            record: dict[str, Any] = {
                "embedder": row.embedder,
                "size_group": group,
                "variant": variant,
                "model": row.model,
                "display_name": row.display_name,
                "rows": len(members),
                "best": best.display_name,
                "confidence": confidence,
                **{f"{name}_mdd": _number(values[index]) for name, values in unpaired.items()},
            }
            if ranks is not None and not np.isnan(ranks.rank[position]):
                record["overall"] = float(overall.observed[index])
                # the percentile interval of the resamples the ranks come from: those in which the row has an
                # Overall (a resample that draws none of a subtask's items the row has leaves it without one)
                drawn = overall.resampled[index][~np.isnan(overall.resampled[index])]
                if drawn.size:
                    alpha = (1.0 - confidence) / 2.0
                    low, high = np.quantile(drawn, [alpha, 1.0 - alpha])
                    record["overall_ci_low"], record["overall_ci_high"] = float(low), float(high)
                record["rank"], record["rank_low"], record["rank_high"] = (
                    int(ranks.rank[position]), int(ranks.low[position]), int(ranks.high[position])
                )  # fmt: skip
            if index != members[0]:
                record["separable_from_best"] = separable.get((best.model, row.model, variant))
            records.append(record)
    return records


def _number(value: float) -> float | None:
    return None if np.isnan(value) else float(value)
