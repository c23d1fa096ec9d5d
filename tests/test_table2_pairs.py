"""Table 2's paired comparisons: the statistics against known answers, and what Table 2 shows of them."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from h2htalk.cells import RunCells
from h2htalk.cli import main
from h2htalk.config import default_config
from h2htalk.io import write_json_atomic, write_text_atomic
from h2htalk.layout import Layout
from h2htalk.scoring.bootstrap import bootstrap_mean_ci, paired_bootstrap_diff
from h2htalk.settings import BootstrapSettings
from h2htalk.stats.multiple import holm
from h2htalk.stats.paired import Resamples, pair_differences, paired_test, rank_intervals, row_means
from h2htalk.stats.power import detectable_factor, minimum_detectable_difference
from h2htalk.subtasks import SUBTASKS
from h2htalk.tables.table2 import CellValue, aggregate, build_rows, table2_frame
from h2htalk.tables.table2_pairs import PAIR_COLUMNS, RANK_COLUMNS, SAP_EFFECT, WITHIN_GROUP, RowItems, compare_rows
from h2htalk.tables.table2_pairs_files import FLOAT_FORMAT, rank_figure
from h2htalk.tables.table2_significance import DAGGER, RANK_COLUMN, Significance
from h2htalk.tabular import records_frame, write_csv

from .conftest import REPO_ROOT

RELEASED = {s.key: s.released for s in SUBTASKS}
MEASURES = {s.key: "S" for s in SUBTASKS}
SEEDS = range(200)


def synthetic_rows(
    seed: int,
    rows: int = 2,
    n: int = 50,
    shifts: dict[int, dict[str, float]] | None = None,
    subtasks: tuple[str, ...] = tuple(RELEASED),
) -> list[RowItems]:
    """Rows of one size group and variant answering the same ``n`` items per subtask: an item's value is its
    difficulty (shared by every row, SD 10) plus the row's own noise (SD 10), around 50; ``shifts`` plants a
    difference: row -> subtask -> points added to every item."""
    rng = np.random.default_rng(seed)
    difficulty = {key: rng.normal(0.0, 10.0, n) for key in subtasks}
    out = []
    for row in range(rows):
        planted = (shifts or {}).get(row, {})
        values = {
            key: {f"{key}-{i}": float(v) for i, v in enumerate(50 + d + planted.get(key, 0.0) + rng.normal(0, 10, n))}
            for key, d in difficulty.items()
        }
        out.append(RowItems("usem3", f"m{row}", f"Model {row}", "open-1-8b", "sap", values, MEASURES))
    return out


def bootstrap(seed: int, resamples: int = 1000) -> BootstrapSettings:
    return BootstrapSettings(resamples, seed, 0.95)


def found(records: list[dict], column: str | None = None) -> bool:
    """Whether any comparison (of ``column``) is separable after Holm."""
    return any(r["separable"] for r in records if column is None or r["column"] == column)


# --- the statistics -------------------------------------------------------------------------------------------


def test_holm_adjusts_step_down_keeps_order_and_leaves_untested_out():
    adjusted = holm(np.array([0.01, 0.04, 0.03, 0.005, np.nan]))
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> running maximum 0.06
    assert adjusted[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert np.isnan(adjusted[4])
    assert holm(np.array([0.5, 0.9])).tolist() == [1.0, 1.0]
    assert np.isnan(holm(np.array([np.nan]))).all()


def test_minimum_detectable_difference_is_2_8_standard_errors_at_95_and_80():
    assert detectable_factor(0.95) == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    assert minimum_detectable_difference(np.array([1.0, 0.5]), 0.95) == pytest.approx([2.801585, 1.400793], abs=1e-5)


@pytest.mark.parametrize("clustered", [False, True])
def test_paired_differences_draw_the_resamples_table3s_paired_bootstrap_draws(clustered):
    """One pair on one task is Table 3's SAP delta: the same resamples give the same CI, by scenario too."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(50, 10, 40), rng.normal(52, 10, 40)
    scenarios = [f"s{i // 4}" for i in range(40)] if clustered else None
    mean, low, high = paired_bootstrap_diff(a, b, 1000, 11, 0.9, scenarios)
    differences = pair_differences(np.vstack([a, b]), np.array([[0, 1]]), Resamples(40, 1000, 11, scenarios))
    test = paired_test(differences, 0.9)
    assert (differences.observed[0], test.ci_low[0], test.ci_high[0]) == pytest.approx((mean, low, high))
    means = row_means(np.vstack([a, b]), Resamples(40, 1000, 11, scenarios))
    assert np.quantile(means.resampled[0], [0.05, 0.95]) == pytest.approx(
        np.concatenate(bootstrap_mean_ci(a, 1000, 11, 0.9, scenarios))
    )


def test_a_pair_is_compared_on_the_items_both_answered():
    values = np.array([[10.0, 20.0, 30.0, 40.0], [0.0, np.nan, 10.0, 50.0]])
    differences = pair_differences(values, np.array([[0, 1]]), Resamples(4, 500, 1))
    assert differences.n[0] == 3
    assert differences.observed[0] == pytest.approx((10 + 20 - 10) / 3)
    assert differences.standard_error[0] == pytest.approx(np.std([10, 20, -10], ddof=1) / np.sqrt(3))
    assert row_means(values, Resamples(4, 500, 1)).observed == pytest.approx([25.0, 20.0])


def test_avgs_and_overall_are_the_fixed_weight_means_of_the_subtasks():
    rows = synthetic_rows(5, rows=2, n=20)
    comparisons = compare_rows(rows, RELEASED, bootstrap(5, 300))
    by = {r["column"]: r for r in comparisons.pairs if r["comparison"] == WITHIN_GROUP}
    shares = {k: w / sum(RELEASED.values()) for k, w in RELEASED.items()}
    assert by["overall"]["difference"] == pytest.approx(sum(shares[k] * by[k]["difference"] for k in RELEASED))
    dialogue = ("dialogue_base", "dialogue_emotion", "dialogue_schedule")
    assert by["dialogue_avg"]["difference"] == pytest.approx(sum(by[k]["difference"] for k in dialogue) / 3)
    model = {r.model: r for r in rows}
    overall = by["overall"]
    for row, value in (
        (model[overall["model_a"]], overall["value_a"]),
        (model[overall["model_b"]], overall["value_b"]),
    ):
        cells = {k: CellValue(float(np.mean(list(v.values()))), None, None, len(v), "S") for k, v in row.values.items()}
        assert value == pytest.approx(aggregate(cells, RELEASED)["overall"])  # Table 2's own Overall
    assert overall["value_a"] >= overall["value_b"]  # the better Overall first
    assert by["overall"]["n"] == 20 * 11 and by["overall"]["sd"] is None and by["dialogue_base"]["sd"] > 0


def test_families_baselines_and_the_sap_pairs():
    rows = synthetic_rows(1, rows=3, n=10)
    nosap = [RowItems(r.embedder, r.model, r.display_name, r.size_group, "nosap", r.values, MEASURES) for r in rows]
    floor = RowItems("usem3", "baseline-oracle", "Oracle", "baseline", "sap", rows[0].values, MEASURES)
    comparisons = compare_rows([*rows, *nosap, floor], RELEASED, bootstrap(1, 200))
    within = [r for r in comparisons.pairs if r["comparison"] == WITHIN_GROUP]
    sap = [r for r in comparisons.pairs if r["comparison"] == SAP_EFFECT]
    assert {r["variant"] for r in within} == {"sap", "nosap"} and len(within) == 2 * 3 * 15
    assert {r["family_size"] for r in within} == {3 * 15}  # every pair and column of one group
    assert len(sap) == 3 * 15 and {r["family_size"] for r in sap} == {3 * 15} and sap[0]["variant"] == "sap - nosap"
    assert all(r["difference"] == 0 and r["p"] == 1 for r in sap)  # the same answers in both variants
    # paired differences that do not vary say nothing of power: the MDD falls back on the rows' own SDs
    assert all(r["mdd_basis"] == "unpaired" and r["mdd"] > 0 for r in sap)
    assert {r["mdd_basis"] for r in within} == {"paired"}
    assert "baseline-oracle" not in {r["model_a"] for r in comparisons.pairs} | {
        r["model_b"] for r in comparisons.pairs
    }
    assert "baseline-oracle" not in {r["model"] for r in comparisons.ranks}
    assert len(comparisons.ranks) == 6 and all(r["rows"] == 3 for r in comparisons.ranks)


# --- known answers ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_known_answer_two_rows_from_one_distribution_are_not_told_apart():
    """Two rows drawn from one distribution: after Holm, no column shows a difference in at least 95 % of 200
    seeds (every one of the 15 columns is a chance for a false claim)."""
    clean = [not found(compare_rows(synthetic_rows(seed), RELEASED, bootstrap(seed)).pairs) for seed in SEEDS]
    assert np.mean(clean) >= 0.95


@pytest.mark.slow
def test_known_answer_a_planted_difference_of_one_sd_is_found():
    """One subtask of one row shifted by 1 SD of the paired differences (sqrt(2) * 10): found after Holm in at
    least 80 % of 200 seeds; the columns it does not enter stay at about the nominal 5 % of seeds with a false
    claim (at most 8 %: two binomial SDs above 5 %)."""
    planted = {1: {"dialogue_emotion": 10 * np.sqrt(2)}}
    hits, elsewhere = [], []
    for seed in SEEDS:
        pairs = compare_rows(synthetic_rows(seed, n=30, shifts=planted), RELEASED, bootstrap(seed)).pairs
        hits.append(found(pairs, "dialogue_emotion"))
        elsewhere.append(found([r for r in pairs if r["column"] not in ("dialogue_emotion", "dialogue_avg")]))
    assert np.mean(hits) >= 0.80
    assert np.mean(elsewhere) <= 0.08


@pytest.mark.slow
def test_known_answer_a_difference_of_one_mdd_is_found_four_times_in_five():
    """The MDD is what 80 % power means: a difference of exactly the MDD (from the true SD, one comparison) is
    found in about 80 % of 200 seeds."""
    n, sd = 40, 10 * np.sqrt(2)
    mdd = float(minimum_detectable_difference(sd / np.sqrt(n), 0.95))
    subtask = ("dialogue_base",)
    hits = [
        found(compare_rows(synthetic_rows(s, n=n, shifts={0: {subtask[0]: mdd}}, subtasks=subtask), RELEASED,
                           bootstrap(s)).pairs)
        for s in SEEDS
    ]  # fmt: skip
    assert 0.70 <= np.mean(hits) <= 0.90


def test_known_answer_rank_intervals_widen_as_n_shrinks():
    """Five rows 2 points apart on every subtask: the fewer the items, the wider the rank intervals (mean width
    over the rows of 5 seeds); with 400 items a subtask every row's interval is its rank."""
    shifts = {row: dict.fromkeys(RELEASED, 2.0 * row) for row in range(5)}
    widths = []
    for n in (400, 100, 25, 6):
        spans = []
        for seed in range(5):
            ranks = compare_rows(synthetic_rows(seed, rows=5, n=n, shifts=shifts), RELEASED, bootstrap(seed, 500)).ranks
            spans += [r["rank_high"] - r["rank_low"] for r in ranks]
        widths.append(np.mean(spans))
    assert widths[0] == 0 and widths[0] < widths[1] < widths[2] < widths[3]


def test_overalls_interval_leaves_out_the_resamples_that_draw_none_of_a_rows_items():
    """A row that misses an item another row answered has no Overall in a resample that draws only that item (as
    its rank interval, which leaves those out): its interval comes from the others."""
    rows = synthetic_rows(4, rows=2, n=2)
    values = {**rows[0].values, "dialogue_base": dict(list(rows[0].values["dialogue_base"].items())[:1])}
    rows[0] = RowItems(*(getattr(rows[0], f) for f in ("embedder", "model", "display_name", "size_group", "variant")),
                       values, MEASURES)  # fmt: skip
    ranks = {r["model"]: r for r in compare_rows(rows, RELEASED, bootstrap(4, 400)).ranks}
    for record in ranks.values():
        assert record["overall_ci_low"] <= record["overall"] <= record["overall_ci_high"], record


def test_rank_intervals_of_rows_far_apart_are_their_ranks():
    rows = synthetic_rows(2, rows=3, n=30, shifts={0: dict.fromkeys(RELEASED, 40.0), 2: dict.fromkeys(RELEASED, -40.0)})
    ranks = {r["model"]: r for r in compare_rows(rows, RELEASED, bootstrap(2, 300)).ranks}
    assert [(ranks[m]["rank"], ranks[m]["rank_low"], ranks[m]["rank_high"]) for m in ("m0", "m1", "m2")] == [
        (1, 1, 1),
        (2, 2, 2),
        (3, 3, 3),
    ]
    assert ranks["m1"]["separable_from_best"] is True and ranks["m0"]["best"] == "Model 0"
    for record in ranks.values():  # Overall's interval, from the resamples the ranks come from, holds Overall
        assert record["overall_ci_low"] < record["overall"] < record["overall_ci_high"]
    assert ranks["m0"]["overall_ci_low"] > ranks["m1"]["overall_ci_high"]  # 40 points apart: apart
    means = row_means(np.array([[1.0, 2.0], [np.nan, np.nan]]), Resamples(2, 100, 0))
    intervals = rank_intervals(means, 0.95)
    assert intervals.rank[0] == 1 and np.isnan(intervals.rank[1])


# --- Table 2 ------------------------------------------------------------------------------------------------------


def _summaries(rows: list[RowItems]) -> list[dict]:
    return [
        {
            "model": r.model, "variant": r.variant, "subtask": key, "embedder": r.embedder, "measure": "S",
            "n": len(items), "value": float(np.mean(list(items.values()))), "value_ci_low": None, "value_ci_high": None,
        }
        for r in rows
        for key, items in r.values.items()
    ]  # fmt: skip


def _significance(tmp_path, rows: list[RowItems], resamples: int = 500) -> Significance:
    """The comparisons of ``rows`` as Table 2 reads them: through the two CSVs, in table2_pairs' number format."""
    comparisons = compare_rows(rows, RELEASED, bootstrap(0, resamples))
    pairs, ranks = tmp_path / "table2_pairs.csv", tmp_path / "table2_ranks.csv"
    write_csv(records_frame(comparisons.pairs, PAIR_COLUMNS), pairs, float_format=FLOAT_FORMAT)
    write_csv(records_frame(comparisons.ranks, RANK_COLUMNS), ranks, float_format=FLOAT_FORMAT)
    return Significance.read(pairs, ranks)


def _registered(rows: list[RowItems]) -> tuple[list[RowItems], dict]:
    """The rows under registry names (qwen2-*), so Table 2 groups them as it groups the models."""
    names = ["qwen2-1.5b-instruct", "qwen2-7b-instruct", "chatglm3-6b", "internlm-2.5-7b-chat"]
    renamed = [
        RowItems(r.embedder, names[i], names[i], r.size_group, r.variant, r.values, r.measures)
        for i, r in enumerate(rows)
    ]
    registry = {n: {"display_name": n, "size_group": "open-1-8b"} for n in names}
    return renamed, registry


def test_table2_marks_rows_not_separable_from_the_best_and_names_the_tied_top_three(tmp_path):
    """Four rows (Table 2 marks the top three of groups of at least four): one far ahead, three close."""
    shifts = {0: dict.fromkeys(RELEASED, 30.0), 1: dict.fromkeys(RELEASED, 0.3)}
    rows, registry = _registered(synthetic_rows(4, rows=4, n=30, shifts=shifts))
    significance = _significance(tmp_path, rows)
    table_rows = build_rows(_summaries(rows), registry, RELEASED, "J")
    frame = significance.annotate(table2_frame(table_rows), table_rows)
    marked = dict(zip(frame["model"], frame[RANK_COLUMN], strict=True))
    assert marked["qwen2-1.5b-instruct"] == "1 (1-1)"  # the best: no dagger
    tied = {name for name in marked if name.endswith(DAGGER)}
    assert tied == set()  # 30 points ahead of the others: each is separable from the best
    assert list(frame.columns).index(RANK_COLUMN) == list(frame.columns).index("Overall") + 1
    notes = significance.notes(table_rows)
    ties = next(note for note in notes if note.startswith("Top-three marks that are ties"))
    assert ties.endswith("(1-8B), w/ SAP: 2nd=3rd on every column.")
    power = notes[-1]
    assert power.startswith("Power (80 % power, two-sided 95%, before Holm)") and "on Overall" in power
    assert "comparisons are separable after Holm" in power

    close = {0: dict.fromkeys(RELEASED, 0.2)}
    rows, registry = _registered(synthetic_rows(4, rows=4, n=3, shifts=close))  # the demo's 3 items a subtask
    significance = _significance(tmp_path, rows)
    table_rows = build_rows(_summaries(rows), registry, RELEASED, "J")
    frame = significance.annotate(table2_frame(table_rows), table_rows)
    assert sum(name.endswith(DAGGER) for name in frame["model"]) == 3  # none is told apart from the best
    notes = significance.notes(table_rows)
    assert "at this run's n no two rows can be told apart on any column" in notes[-1]
    assert any("1st=2nd=3rd on every column" in note for note in notes)


def test_one_row_a_group_has_no_pairs_and_the_power_line_says_so(tmp_path):
    (row,) = synthetic_rows(6, rows=1, n=3)
    significance = _significance(tmp_path, [row])
    assert significance.pairs == [] and significance.ranks[0]["rank"] == "1"
    line = significance.power_note()
    assert "from each cell's own SD x sqrt(2)" in line and "no two rows are compared" in line
    with open(tmp_path / "table2_ranks.csv", encoding="utf-8") as handle:
        ranks = list(csv.DictReader(handle))
    assert float(ranks[0]["overall_mdd"]) > 0
    rank_figure(compare_rows([row], RELEASED, bootstrap(0, 500)).ranks, tmp_path / "table2_ranks.png")  # one panel
    assert (tmp_path / "table2_ranks.png").stat().st_size > 5_000


def test_the_commands_compare_a_runs_item_files_and_table2_marks_them(tmp_path):
    """table2-pairs reads the run's score and J items (where judged, the reading tables.judged_cell names) and
    records them; table2 reads its CSVs."""
    overlay = {
        "models": ["qwen2-1.5b-instruct", "qwen2-7b-instruct"],
        "baselines": [],
        "model_registry": str(REPO_ROOT / "config" / "models.yaml"),
        "paper": {"table2": str(REPO_ROOT / "config" / "paper" / "table2.csv")},
        "tables": {"judged_cell": "judge"},
    }
    config_file = tmp_path / "config.json"
    write_text_atomic(config_file, json.dumps(overlay))
    run, results = RunCells(default_config(overlay)), Layout(str(tmp_path / "results"))
    write_json_atomic(results.path("provenance"), {"git": {"revision": "test"}})
    rows = {(r.model, r.variant): r for r in synthetic_rows(8, rows=2, n=10)}
    for cell, path in run.table2_items(results).items():
        row = rows[("m0" if cell.model == "qwen2-1.5b-instruct" else "m1", "sap")]
        shifted = {i: v + (5 if cell.variant == "nosap" else 0) for i, v in row.values[cell.task].items()}
        values = list(shifted.values())
        # a judged item carries every reading of its cell: J, S and the judge's own (here 20 points above S)
        items = [{"id": i, "S": v, "J100": v, "judge_score": v / 20 + 1} for i, v in shifted.items()]
        write_text_atomic(path, "".join(json.dumps(item) + "\n" for item in items))
        mean = {"n": 10, "missing": 0, "value": float(np.mean(values)), "value_ci_low": None, "value_ci_high": None}
        summary = {"model": cell.model, "variant": cell.variant, "subtask": cell.task, "embedder": cell.embedder,
                   "measure": "S", **mean}  # fmt: skip
        if run.is_judged(cell):
            summary |= {"measure": "J", "readings": dict.fromkeys(("J", "S", "judge"), mean), "gate": {"alpha": 0.6}}
            write_text_atomic(results.judge_samples(cell), "")  # what Table 2's agreement line reads
        write_json_atomic((results.j_summary if run.is_judged(cell) else results.score_summary)(cell), summary)
    figures = tmp_path / "figures"
    common = ["--config", str(config_file), "--results", str(results.root)]
    pairs_in, ranks_in = str(figures / "table2_pairs.csv"), str(figures / "table2_ranks.csv")
    assert main(["table2-pairs", *common, "--resamples", "200", "--figures", str(figures)]) == 0
    with open(figures / "table2_pairs.csv", encoding="utf-8") as handle:
        pairs = list(csv.DictReader(handle))
    sap = [r for r in pairs if r["comparison"] == SAP_EFFECT]
    assert len(sap) == 2 * 15 and all(float(r["difference"]) == pytest.approx(-5.0) for r in sap)
    judged = next(r for r in pairs if r["column"] == "itinerary_basic" and r["comparison"] == SAP_EFFECT)
    assert judged["measure"] == "judge" and judged["n"] == "10"
    source = rows[("m0" if judged["model_a"] == "qwen2-1.5b-instruct" else "m1", "sap")].values["itinerary_basic"]
    assert float(judged["value_a"]) == pytest.approx(np.mean(list(source.values())) + 20, abs=1e-3)
    meta = json.loads((figures / "table2_pairs.meta.json").read_text(encoding="utf-8"))
    recorded = {entry["path"] for entry in meta["inputs"]}
    assert set(run.table2_items(results).values()) <= recorded
    assert any("j_scores" in path for path in recorded) and (figures / "table2_ranks.png").exists()
    assert main(["table2", *common, "--figures", str(figures)]) == 0
    markdown = (figures / "table2.md").read_text(encoding="utf-8")
    assert RANK_COLUMN in markdown and "Power (80 % power" in markdown
    meta = json.loads((figures / "table2.meta.json").read_text(encoding="utf-8"))
    assert {pairs_in, ranks_in} <= {entry["path"] for entry in meta["inputs"]}


def test_a_judged_cell_without_any_j_leaves_its_columns_uncompared(tmp_path):
    """The small local judge can miss every item of a subtask: that subtask, its Avg and Overall are not compared
    and the row gets no rank; everything else is."""
    rows = synthetic_rows(9, rows=2, n=5)
    empty = {**rows[1].values, "itinerary_basic": {}}
    rows[1] = RowItems("usem3", "m1", "Model 1", "open-1-8b", "sap", empty, MEASURES)
    significance = _significance(tmp_path, rows)
    columns = {r["column"] for r in significance.pairs}
    assert "itinerary_basic" not in columns and "itinerary_avg" not in columns and "overall" not in columns
    assert "dialogue_base" in columns and "recollection_avg" in columns
    assert [r["rank"] for r in significance.ranks] == ["1", ""]  # ranked among the rows that have an Overall
    assert "on Overall" not in significance.power_note() and "on a subtask" in significance.power_note()
