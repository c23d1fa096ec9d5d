"""Table 2's comparisons on disk: read the per-item scores of its rows, write the pairs (table2_pairs.csv), the
rank intervals with each cell's detectable difference (table2_ranks.csv) and the rank figure (table2_ranks.png)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h2htalk.cells import RunCells
from h2htalk.config import load_registry
from h2htalk.io import iter_jsonl, write_png_atomic
from h2htalk.layout import Layout
from h2htalk.settings import BootstrapSettings
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import registry_files
from h2htalk.stages.spec import Done, Figure, Labels, Paths, Product, Scope
from h2htalk.tables.table2 import GROUP_TITLES
from h2htalk.tables.table2_files import TABLE2
from h2htalk.tabular import records_frame, write_csv

if TYPE_CHECKING:  # the comparisons (numpy, scipy) wait for their job
    from h2htalk.tables.table2_pairs import RowItems

FLOAT_FORMAT = "{:.6g}"  # p-values far below 0.0001 keep their digits


def read_row_items(
    run: RunCells, results: Layout, registry: Mapping[str, Mapping[str, Any]], judged_cell: str
) -> list[RowItems]:
    """The per-item values of every Table 2 row of a model under test (the baselines are calibration rows and
    are not compared): S from the score items, and where the rubric judge is mixed in, the reading of the J
    items that ``judged_cell`` names (tables.judged_cell), as Table 2 shows it (``compared_value``)."""
    from h2htalk.tables.table2_pairs import RowItems

    values: dict[tuple[str, str, str], dict[str, dict[str, float]]] = {}
    measures: dict[tuple[str, str, str], dict[str, str]] = {}
    clusters: dict[tuple[str, str, str], dict[str, dict[str, str]]] = {}
    rated: dict[tuple[str, str, str], dict[str, int]] = {}
    for cell, path in run.table2_items(results).items():
        judged = run.is_judged(cell)
        key = (str(cell.embedder), cell.model, cell.variant)
        read = (lambda item: compared_value(item, judged_cell)) if judged else (lambda item: item["S"])
        items = [item for _, item in iter_jsonl(path)]
        values.setdefault(key, {})[cell.task] = {
            item["id"]: float(value) for item in items if (value := read(item)) is not None
        }
        measures.setdefault(key, {})[cell.task] = judged_cell if judged else "S"
        clusters.setdefault(key, {})[cell.task] = item_clusters(items)
        if judged and any(judged_cell in (item.get("ppi") or {}) for item in items):
            rated.setdefault(key, {})[cell.task] = sum(bool(item.get("ppi_rated")) for item in items)
    return [
        RowItems(
            embedder,
            model,
            registry[model]["display_name"],
            registry[model]["size_group"],
            variant,
            values[(embedder, model, variant)],
            measures[(embedder, model, variant)],
            clusters[(embedder, model, variant)],
            rated.get((embedder, model, variant), {}),
        )
        for embedder, model, variant in values
    ]


def compared_value(item: Mapping[str, Any], reading: str) -> float | None:
    """A judged item's value as rows are compared on it: its pseudo-value where its cell's judge is corrected on a
    sample (cascade, or people's sample; ``h2htalk.judge.combine.add_pseudo_values``: their mean is the corrected
    cell, so a judge's bias that differs between two rows does not enter their difference), else its reading."""
    from h2htalk.judge.readings import item_readings

    corrected = item.get("ppi")
    if corrected and reading in corrected:
        return corrected[reading]
    return item_readings(dict(item))[reading]


def item_clusters(items: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Item id -> its cluster: as scored (S items carry ``cluster``), else found in the references the items carry
    (J items), else none (every item alone)."""
    from h2htalk.data.conversations import bootstrap_groups

    if all("cluster" in item for item in items):
        return {item["id"]: item["cluster"] for item in items}
    if items and all(isinstance(item.get("reference"), str) for item in items):
        ids = [item["id"] for item in items]
        return dict(zip(ids, bootstrap_groups(ids, [item["reference"] for item in items]) or ids, strict=True))
    return {}


def rank_figure(ranks: Sequence[Mapping[str, Any]], path: Path) -> None:
    """One panel per size group, variant and embedder: its rows ordered by Overall, each a point at its rank
    with a line over its rank interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for record in ranks:
        if record.get("rank") is not None:
            panels.setdefault((record["embedder"], record["size_group"], record["variant"]), []).append(record)
    sizes = [len(rows) for rows in panels.values()] or [1]
    fig, axes = plt.subplots(
        len(sizes), 1, figsize=(8, 0.32 * sum(sizes) + 0.9 * len(sizes) + 0.6), height_ratios=[s + 1.5 for s in sizes],
        squeeze=False,
    )  # fmt: skip
    several = len({key[0] for key in panels}) > 1
    for ax, ((embedder, group, variant), rows) in zip(axes[:, 0], panels.items(), strict=False):
        rows = sorted(rows, key=lambda r: (r["rank"], r["display_name"]))
        y = list(range(len(rows)))
        ax.hlines(y, [r["rank_low"] for r in rows], [r["rank_high"] for r in rows], color="tab:blue", linewidth=2)
        ax.plot([r["rank"] for r in rows], y, "o", color="black", markersize=5)
        ax.set_yticks(y, labels=[f"{r['display_name']} ({r['overall']:.2f})" for r in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0.5, max(r["rows"] for r in rows) + 0.5)
        ax.set_xticks(range(1, max(r["rows"] for r in rows) + 1))
        ax.grid(axis="x", alpha=0.3)
        title = f"{GROUP_TITLES.get(group, group)}, {variant}" + (f" ({embedder})" if several else "")
        ax.set_title(title, fontsize=9, loc="left")
    if not panels:
        axes[0, 0].text(0.5, 0.5, "no ranked rows", ha="center", va="center")
        axes[0, 0].set_axis_off()
    confidence = next((r["confidence"] for r in ranks), None)
    share = f"the central {confidence:.0%} of its" if confidence else "its"
    axes[-1, 0].set_xlabel(f"rank by Overall within the group\n(point: the row's rank; line: {share} bootstrap ranks)")
    fig.tight_layout()
    write_png_atomic(fig, path, dpi=130)
    plt.close(fig)


def table2_items(scope: Scope, labels: Labels) -> list[str]:
    """The per-item values behind every Table 2 cell of a model under test: J items where judged, S items
    elsewhere."""
    return list(scope.run.table2_items(scope.results).values())


@stage(
    "table2_pairs", "Table 2's paired comparisons, rank intervals and detectable differences, and the rank figure",
    reads=TABLE2, entries=lambda s, w: list(s.run.models), where="cpu", env="figures", memory_mb=2000,
    minutes=20, options=("bootstrap",),
    product=Product("table", "Table 2 pairs", "which of Table 2's rows can be told apart, and the rank intervals",
                    main="csv", shown=("csv", "figure"), listed=False),
    in_all=False,  # Table 2 reads it
    inputs={"scores": Paths(table2_items), "registry": Paths(registry_files)},
    outputs={"csv": Figure("table2_pairs", ".csv"), "ranks": Figure("table2_ranks", ".csv"),
             "figure": Figure("table2_ranks", ".png")},
)  # fmt: skip
def compare_run_rows(
    scores: list[str], registry: list[str], config: dict[str, Any], run: RunCells, results: Layout,
    bootstrap: BootstrapSettings, outputs: dict[str, str],
) -> Done:  # fmt: skip
    """Every pair of the run's Table 2 rows compared on their items (``compare_rows``): the pairs' CSV (``csv``), the
    rank intervals' (``ranks``) and their figure (``figure``)."""
    from h2htalk.tables.table2_pairs import PAIR_COLUMNS, RANK_COLUMNS, compare_rows

    rows = read_row_items(run, results, load_registry(registry), config["tables"]["judged_cell"])
    comparisons = compare_rows(rows, config["tables"]["overall_weights"], bootstrap)
    write_csv(records_frame(comparisons.pairs, PAIR_COLUMNS), outputs["csv"], float_format=FLOAT_FORMAT)
    write_csv(records_frame(comparisons.ranks, RANK_COLUMNS), outputs["ranks"], float_format=FLOAT_FORMAT)
    rank_figure(comparisons.ranks, Path(outputs["figure"]))
    told = sum(bool(r["separable"]) for r in comparisons.pairs)
    return Done(f"{len(comparisons.pairs)} comparisons, {told} separable")
