"""The judge cascade: a cheap judge on every item, the role's own judge on a seeded sample of each cell, and each
cell's mean corrected by prediction-powered inference. Known-answer tests on a synthetic world whose strong judge's
full-mode cells are known (``cascade_world``): the cheap judge is biased (+0.8 on 0-5), noisy, and biased more for
one model under test than for another."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from h2htalk.io import iter_jsonl
from h2htalk.judge.cascade import cascade_sample
from h2htalk.judge.combine import STAND_IN_RULE, add_pseudo_values, combine_records, summarise_j
from h2htalk.layout import Cell, Layout
from h2htalk.people.prediction_powered import prediction_powered_mean, pseudo_values
from h2htalk.settings import BootstrapSettings, CascadeSettings, ReviewSettings
from h2htalk.tables.table2_pairs import RowItems, compare_rows
from h2htalk.tables.table2_pairs_files import compared_value
from h2htalk.tables.table3 import corrected, table3_rows

from .cascade_world import (
    BOOTSTRAP,
    CHEAP,
    FULL_REVIEW,
    GATE,
    Failures,
    Hostile,
    Judges,
    any_claim,
    cell_records,
    combine_in_memory,
    combine_world,
    compared_rows,
    full_mode_mean,
    levels_worlds,
    make_world,
    world_cells,
    write_world,
)

CASCADE = CascadeSettings(30, 31)
SEEDS = range(200)


def test_pseudo_values_average_to_the_estimate_and_their_spread_gives_its_variance():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n_items, n = int(rng.integers(40, 400)), int(rng.integers(2, 40))
        truth = rng.normal(3.0, 1.0, n_items)
        judge = truth + rng.normal(0.8, 0.6, n_items) * rng.uniform(0.2, 2.0)
        sample = rng.choice(n_items, min(n, n_items), replace=False)
        estimate = prediction_powered_mean(judge, sample, truth[sample], 0.95)
        values = pseudo_values(judge, sample, truth[sample])
        assert values.mean() == pytest.approx(estimate.value, abs=1e-9)
        singletons = prediction_powered_mean(judge, sample, truth[sample], 0.95, clusters=list(range(n_items)))
        assert singletons.value == estimate.value
        assert singletons.se == pytest.approx(estimate.se, rel=0.1)  # the same variance, up to O(1/N^2) terms
    # turns of one conversation alike (a value per conversation) vary less within than between: a variance the
    # turns' own spread does not show
    clusters = np.repeat(np.arange(40), 10)
    truth = 3.0 + rng.normal(0.0, 1.0, 40)[clusters] + rng.normal(0.0, 0.2, 400)
    judge = truth + 0.8 + rng.normal(0.0, 0.3, 400)
    sample = rng.choice(400, 40, replace=False)
    iid = prediction_powered_mean(judge, sample, truth[sample], 0.95)
    grouped = prediction_powered_mean(judge, sample, truth[sample], 0.95, clusters=clusters.tolist())
    assert grouped.se > 1.5 * iid.se


def test_the_cascade_sample_is_drawn_from_the_ids_alone_the_same_for_every_model_and_size_in_every_cell():
    ids = [f"itinerary_basic-{i:05d}" for i in range(200)]
    cell = Cell("m", "sap", "itinerary_basic")
    sample = cascade_sample(cell, ids, CASCADE)
    assert len(sample) == 30 and len(set(sample)) == 30 and set(sample) <= set(ids)
    assert cascade_sample(cell, reversed(ids), CASCADE) == sample  # no order, no verdict: the ids alone
    assert cascade_sample(cell.scored_by("usem3"), ids, CASCADE) == sample  # the judge's item, whatever scores it
    assert cascade_sample(Cell("n", "sap", "itinerary_basic"), ids, CASCADE) == sample  # every model: the same items
    others = [Cell("m", "nosap", "itinerary_basic"), Cell("m", "sap", "itinerary_middle")]
    assert all(cascade_sample(c, ids, CASCADE) != sample for c in others)  # each variant and subtask its own order
    reseeded = CascadeSettings(30, 32)
    assert cascade_sample(cell, ids, reseeded) != sample
    assert sorted(cascade_sample(cell, ids[:12], CASCADE)) == ids[:12]  # fewer items than the sample: all of them
    kept = [i for i in ids if i != sample[0]]  # an item gone: the rest of the sample stays
    assert cascade_sample(cell, kept, CASCADE)[:29] == sample[1:]


def test_corrected_cells_cover_the_strong_judges_full_mode_mean():
    """Over 200 seeds, the cascade's 95 % CI covers the cell the strong judge would have made on every item, for
    both readings the judge enters, though the cheap judge alone is off by its bias."""
    covered = {"J": 0, "judge": 0}
    cheap_alone = 0
    for seed in SEEDS:
        world = make_world(seed, {"a": 0.0, "b": 0.3}, {"a": 0.0, "b": 0.5})
        cells = combine_in_memory(world, CASCADE)
        for reading, model in (("J", "a"), ("judge", "b")):
            found = cells[model][1]["readings"][reading]
            covered[reading] += found["value_ci_low"] <= full_mode_mean(world, model, reading) <= found["value_ci_high"]
        alone = cells["b"][1]["readings"]["judge"]["judge_only"]
        cheap_alone += alone["value_ci_low"] <= full_mode_mean(world, "b", "judge") <= alone["value_ci_high"]
    assert covered["J"] / len(SEEDS) >= 0.90 and covered["judge"] / len(SEEDS) >= 0.90, covered
    assert cheap_alone / len(SEEDS) < 0.05  # the bias the correction removes


def test_people_correct_the_strong_judge_within_its_sample_before_it_corrects_the_cheap_one():
    """review.mode sample in cascade mode: people rate a random part of the strong judge's sample, and the cell
    covers people's mean (the strong judge rates 0.4 below them), which the cascade alone misses."""
    review = ReviewSettings("sample", 15, 23)
    covered = cascade_only = 0
    for seed in SEEDS:
        world = make_world(seed, {"a": 0.0}, {"a": 0.5})
        rng = np.random.default_rng(10_000 + seed)
        people = np.clip(world.strong["a"] + 0.4 + rng.normal(0.0, 0.4, len(world.ids)), 0.0, 5.0)
        human = {
            ("a", "sap", "itinerary_basic", i): {"score": float(p), "ratings": [{"file": "q.csv", "score": float(p)}]}
            for i, p in zip(world.ids, people, strict=True)
        }  # every item rated: only those of people's sample may count
        cell = world_cells(world)[0]
        items = combine_records("a", "sap", cell.task, cell_records(world, cell, CASCADE), GATE, human, review)
        strong = {i["id"] for i in items if i["cascade_sampled"]}
        assert {i["id"] for i in items if i["sampled"]} <= strong and sum(i["sampled"] for i in items) == 15
        summary = summarise_j(items, BOOTSTRAP, "sample", True)
        assert summary["cascade"]["estimator"] == "prediction-powered J, cascade and people"
        truth = float(np.mean(0.6 * world.s["a"] + 0.4 * 20 * people))
        found = summary["readings"]["J"]
        covered += found["value_ci_low"] <= truth <= found["value_ci_high"]
        plain = combine_records("a", "sap", cell.task, cell_records(world, cell, CASCADE), GATE, {}, FULL_REVIEW)
        alone = summarise_j(plain, BOOTSTRAP, "gate", True)["readings"]["J"]
        cascade_only += alone["value_ci_low"] <= truth <= alone["value_ci_high"]
    assert covered / len(SEEDS) >= 0.90 and cascade_only / len(SEEDS) < 0.5


def test_in_gate_mode_people_rate_what_the_strong_judge_gated_and_their_score_replaces_its_own():
    """The gate in cascade mode is full mode's on the strong judge's verdicts of the sample: only sampled items go
    to people, those whose strong J is under tau; a person's score replaces the strong judge's there, never the
    cheap judge's (a prediction that moved with the sample would bias the correction), and a score outside the
    sample is counted, not used."""
    world = make_world(1, {"a": 0.0}, {"a": 0.5})
    gate = replace(GATE, tau=2.4)  # about half of this world's items under it
    cell = world_cells(world)[0]
    records = cell_records(world, cell, CASCADE)
    plain = {i["id"]: i for i in combine_records("a", "sap", cell.task, records, gate, {}, FULL_REVIEW)}
    gated = {k for k, i in plain.items() if i["review"]}
    assert gated == {k for k, i in plain.items() if i["cascade_sampled"] and i["J5_strong"] < gate.tau}
    assert 0 < len(gated) < 30
    outside = next(k for k in world.ids if k not in records.sample and plain[k]["J5"] < gate.tau)
    rated = [*sorted(gated)[:3], outside]
    human = {("a", "sap", cell.task, i): {"score": 1.0, "ratings": [{"file": "q.csv", "score": 1.0}]} for i in rated}
    items = {i["id"]: i for i in combine_records("a", "sap", cell.task, records, gate, human, FULL_REVIEW)}
    for item_id in rated[:3]:
        assert items[item_id]["strong_score"] == 1.0 and not items[item_id]["review"]
        assert items[item_id]["judge_score"] == plain[item_id]["judge_score"] != 1.0
    assert items[outside]["judge_score"] == plain[outside]["judge_score"] and items[outside]["J5_strong"] is None
    assert summarise_j(list(items.values()), BOOTSTRAP, "gate", True)["human_items"] == 3


def test_the_review_queue_shows_the_verdict_of_the_judge_that_gated_the_item(tmp_path):
    """In cascade mode an item goes to people because of the role's own judge's verdict: the queue (and the desk)
    shows that verdict, its scores, J and evidence, not the cheap judge's, which a person does not correct."""
    from h2htalk.io import write_jsonl_atomic
    from h2htalk.review.queue import write_review_queue

    world = make_world(1, {"a": 0.0}, {"a": 0.5})
    gate = replace(GATE, tau=2.4)
    cell = world_cells(world)[0]
    records = cell_records(world, cell, CASCADE)
    for _, verdict in records.verdicts:
        verdict["samples"][0]["evidence"] = f"cheap: {verdict['id']}"
    for verdict in records.sample.values():
        verdict["samples"] = [{"score": verdict["judge_mean"], "evidence": f"strong: {verdict['id']}"}] * 2
    items = combine_records("a", "sap", cell.task, records, gate, {}, FULL_REVIEW)
    gated = {i["id"]: i for i in items if i["review"]}
    assert gated and all(i["cascade_sampled"] and i["J5_strong"] < gate.tau for i in gated.values())
    assert any(i["J5"] >= gate.tau for i in gated.values())  # some the cheap judge alone would not have sent
    write_jsonl_atomic(tmp_path / "items.jsonl", items)
    assert (
        write_review_queue([tmp_path / "items.jsonl"], tmp_path / "queue.csv").facts == f"{len(gated)} items to review"
    )
    for row in csv.DictReader((tmp_path / "queue.csv").open(encoding="utf-8")):
        item = gated[row["id"]]
        assert row["judge_evidence"] == f"strong: {row['id']}"
        assert float(row["judge_mean"]) == pytest.approx(item["strong_mean"], abs=0.005) != item["judge_mean"]
        assert row["judge_scores"] == " ".join([f"{item['strong_mean']:g}"] * 2)
        assert float(row["J5"]) == pytest.approx(item["J5_strong"], abs=0.005)


def test_an_unread_cheap_verdict_stays_in_its_cell_with_the_stand_in_and_its_strong_verdict_is_used():
    world = make_world(2, {"a": 0.0}, {"a": 0.5}, failures=Failures({"a": 0.3}))
    cell = world_cells(world)[0]
    records = cell_records(world, cell, CASCADE)
    unread = {i for i, v in zip(world.ids, world.cheap["a"], strict=True) if np.isnan(v)}
    assert unread & set(records.sample)  # some sampled items among them
    items = combine_records("a", "sap", cell.task, records, GATE, {}, FULL_REVIEW)
    add_pseudo_values(items, "gate", True)
    stand_in = float(np.nanmean(world.cheap["a"]))
    assert {i["id"] for i in items if i["stand_in"]} == unread
    assert all(i["stand_in"]["judge"] == pytest.approx(stand_in) and i["J5"] is None for i in items if i["stand_in"])
    assert all(i["ppi"] is not None for i in items)  # every answered item is compared, too
    summary = summarise_j(items, BOOTSTRAP, "gate", True)
    assert summary["cascade"]["cheap_failures"] == len(unread) and summary["cascade"]["sample_used"] == 30
    assert summary["cascade"]["stand_in"] == {"judge": pytest.approx(stand_in), "rule": STAND_IN_RULE}
    judge = summary["readings"]["judge"]
    assert judge["n"] == len(world.ids) and judge["missing"] == 0
    g = np.where(np.isnan(world.cheap["a"]), stand_in, world.cheap["a"])
    rows = [world.ids.index(i) for i in records.sample]
    expected = 20 * (g.mean() + (world.strong["a"][rows] - g[rows]).mean())
    assert judge["value"] == pytest.approx(expected)  # the prediction-powered mean with the stand-in as g
    assert judge["judge_only"]["value"] == pytest.approx(20 * np.nanmean(world.cheap["a"]))  # the cheap alone: read


def test_the_cascades_gate_is_the_strong_judges_whatever_the_cheap_judge_says():
    """The items sent to people in cascade mode follow from the strong judge's verdicts on the sample alone: a cheap
    judge biased +1 and failing on weak answers sends the same items as a fair one, as many for every model."""
    gate = replace(GATE, tau=2.4)
    for seed in range(5):
        fair = make_world(seed, {"a": 0.0}, {"a": -0.8}, judges=Judges(correlation=0.6))
        hostile = make_world(
            seed, {"a": 0.0}, {"a": 0.2}, judges=Judges(correlation=0.6), failures=Failures({"a": 0.2}, weak=True)
        )
        assert np.array_equal(fair.strong["a"], hostile.strong["a"])
        sent = []
        for world in (fair, hostile):
            cell = world_cells(world)[0]
            items = combine_records("a", "sap", cell.task, cell_records(world, cell, CASCADE), gate, {}, FULL_REVIEW)
            sent.append({i["id"] for i in items if i["review"]})
        assert sent[0] == sent[1] and sent[0]


def test_a_hostile_cell_keeps_its_coverage_and_false_positives():
    """The cheap judge correlated 0.6 with the strong one, +1 on 0-5 for model a alone, unreadable on 10 % of a's
    items, mostly its weak answers; Levels I-III at their released sizes, 200 seeds: a's corrected cells cover full
    mode's in at least 90 % of cells on both readings, and Table 2's Holm-corrected pairs of two models with no
    true difference call one in at most 6 % of seeds (a family of three columns, as the benchmark's: one column
    alone is a 5 % test, which 200 seeds put anywhere up to 8 %). ``benchmarks/cascade_hostile.py`` runs the grid."""
    hostile = Hostile(Judges(cheap_bias=0.0, correlation=0.6), {"a": 1.0}, Failures({"a": 0.1}, weak=True))
    quick = BootstrapSettings(20, 5, 0.95)  # the uncorrected readings' intervals, which nothing here reads
    covered = {"judge": 0, "J": 0}
    claims = dict.fromkeys(covered, 0)
    for seed in SEEDS:
        worlds = levels_worlds(seed, {"a": 0.0, "b": 0.0}, hostile)
        combined = {task: combine_in_memory(world, CASCADE, bootstrap=quick) for task, world in worlds.items()}
        for reading in covered:
            for task, world in worlds.items():
                found = combined[task]["a"][1]["readings"][reading]
                truth = full_mode_mean(world, "a", reading)
                covered[reading] += found["value_ci_low"] <= truth <= found["value_ci_high"]
            claims[reading] += any_claim(compared_rows(combined, reading), 200, seed)
    assert min(covered.values()) / (3 * len(SEEDS)) >= 0.90, covered
    assert max(claims.values()) / len(SEEDS) <= 0.06, claims


def _rows(cells: dict, reading: str, corrected_values: bool) -> list[RowItems]:
    rows = []
    for model, (items, _) in cells.items():
        values = {i["id"]: compared_value(i, reading) if corrected_values else i["J100"] for i in items}
        rated = {"itinerary_basic": sum(i["ppi_rated"] for i in items)} if corrected_values else {}
        rows.append(RowItems("usem3", model, model, "g", "sap", {"itinerary_basic": values},
                             {"itinerary_basic": reading}, rated=rated))  # fmt: skip
    return rows


def test_a_corrected_pair_is_the_difference_of_its_corrected_cells_on_the_samples_degrees_of_freedom():
    world = make_world(3, {"a": 0.0, "b": 0.0}, {"a": 0.0, "b": 0.5})
    cells = combine_in_memory(world, CASCADE)
    (pair,) = compare_rows(_rows(cells, "J", True), {}, BootstrapSettings(300, 1, 0.95)).pairs
    means = {m: cells[m][1]["readings"]["J"]["value"] for m in cells}
    assert pair["difference"] == pytest.approx(means["a"] - means["b"])  # every item answered by both
    assert pair["value_a"] == pytest.approx(means["a"])
    naive = compare_rows(_rows(cells, "J", False), {}, BootstrapSettings(300, 1, 0.95)).pairs[0]
    assert naive["difference"] < -1.0 and naive["p"] < 0.001  # the cheap judge's extra bias for b
    assert pair["p"] > naive["p"]


@pytest.mark.slow
def test_paired_comparisons_hold_their_false_positive_rate_in_cascade_mode():
    """Two models with no true difference, on Levels I-III's three judged subtasks (their released sizes), the
    cheap judge 0.5 more lenient with one of them: over 200 seeds the corrected comparisons call a difference at
    the rate a 5 % test may (a one-sided binomial bound), Table 2's Holm-corrected claims no more often, the
    uncorrected ones nearly always; a true difference of 0.5 on 0-5 is found."""
    sizes = {"itinerary_basic": 207, "itinerary_middle": 444, "itinerary_advanced": 143}
    calls = {"per column": 0, "family": 0, "cheap alone": 0, "columns": 0}
    for seed in SEEDS:
        rows, naive = _three_subtasks(seed, sizes, effect=0.0)
        pairs = compare_rows(rows, {}, BootstrapSettings(1000, seed, 0.95)).pairs
        calls["columns"] += len(pairs)
        calls["per column"] += sum(p["p"] < 0.05 for p in pairs)
        calls["family"] += any(p["separable"] for p in pairs)
        naive_pairs = compare_rows(naive, {}, BootstrapSettings(1000, seed, 0.95)).pairs
        calls["cheap alone"] += any(p["separable"] for p in naive_pairs)
    bound = binom.ppf(0.95, len(SEEDS), 0.05) / len(SEEDS)  # what a 5 % rate shows in 200 tries, 19 times in 20
    assert calls["per column"] / calls["columns"] <= binom.ppf(0.95, calls["columns"], 0.05) / calls["columns"]
    assert calls["family"] / len(SEEDS) <= bound, calls
    assert calls["cheap alone"] / len(SEEDS) > 0.5
    found = 0
    for seed in range(50):
        rows, _ = _three_subtasks(seed, sizes, effect=0.5)
        found += any(p["separable"] for p in compare_rows(rows, {}, BootstrapSettings(1000, seed, 0.95)).pairs)
    assert found / 50 >= 0.8


def _three_subtasks(seed: int, sizes: dict[str, int], effect: float) -> tuple[list[RowItems], list[RowItems]]:
    values: dict[str, dict] = {"a": {}, "b": {}}
    naive: dict[str, dict] = {"a": {}, "b": {}}
    rated: dict[str, dict] = {"a": {}, "b": {}}
    for k, (subtask, items) in enumerate(sizes.items()):
        world = make_world(1000 * k + seed, {"a": effect, "b": 0.0}, {"a": 0.0, "b": 0.5}, items, subtask=subtask)
        for model, (found, _) in combine_in_memory(world, CASCADE).items():
            values[model][subtask] = {i["id"]: compared_value(i, "J") for i in found}
            naive[model][subtask] = {i["id"]: i["J100"] for i in found}
            rated[model][subtask] = sum(i["ppi_rated"] for i in found)
    measures = dict.fromkeys(sizes, "J")
    rows = [RowItems("usem3", m, m, "g", "sap", values[m], measures, rated=rated[m]) for m in values]
    return rows, [RowItems("usem3", m, m, "g", "sap", naive[m], measures) for m in naive]


def test_combine_j_reads_the_cascades_files_and_writes_its_cells(tmp_path):
    world = make_world(5, {"a": 0.0, "b": 0.2}, {"a": 0.0, "b": 0.5})
    summaries = combine_world(world, tmp_path, CASCADE)
    in_memory = combine_in_memory(world, CASCADE)
    results = Layout(str(tmp_path))
    for model, summary in summaries.items():
        assert summary["readings"]["J"]["value"] == pytest.approx(in_memory[model][1]["readings"]["J"]["value"])
        assert summary["cascade"] == {
            "mode": "cascade", "sample_size": 30, "sample_judged": 30, "sample_used": 30,
            "estimator": "prediction-powered J, cascade", "every_item_judge": "cheap-judge",
            "sample_judge": "strong-judge", "cheap_failures": 0, "stand_in": {"judge": None, "rule": STAND_IN_RULE},
        }  # fmt: skip
        rectifier = summary["readings"]["judge"]["rectifier"]
        assert rectifier["n"] == 30 and rectifier["ci_low"] < rectifier["value"] < rectifier["ci_high"] < 0
        written = json.loads(Path(results.j_summary(Cell(model, "sap", "itinerary_basic", "usem3"))).read_text())
        assert written["cascade"]["sample_used"] == 30
    full = None  # full mode: no sample
    plain = combine_world(world, tmp_path / "full", full)
    assert plain["a"]["cascade"] == {"mode": "full"} and "rectifier" not in plain["a"]["readings"]["J"]
    assert plain["a"]["readings"]["J"]["value"] == pytest.approx(full_mode_mean(world, "a"))


def test_table3_corrects_the_safety_judge_on_its_sample(tmp_path):
    """Safety turns in conversations of 5: the corrected safety score covers the strong judge's over 200 seeds,
    with scenarios as clusters; the table's rows say the mode, the sample and the rectifier."""
    covered = 0
    for seed in SEEDS:
        world = make_world(seed, {"a": 0.0}, {"a": 0.4}, items=120, cluster_size=5, subtask="safety-s")
        items = {
            i: {"safety_score": float(np.clip(c, 1, 5)), "own_safety_score": None, "scenario": cl}
            for i, c, cl in zip(world.ids, world.cheap["a"], world.clusters, strict=True)
        }
        for i in cascade_sample(Cell("a", "sap", "safety"), world.ids, CASCADE):
            items[i]["own_safety_score"] = float(np.clip(world.strong["a"][world.ids.index(i)], 1, 5))
        estimate, values = corrected(items, "safety_score", 0.95)
        truth = float(np.clip(world.strong["a"], 1, 5).mean())
        covered += estimate.ci_low <= truth <= estimate.ci_high
        assert np.mean(list(values.values())) == pytest.approx(estimate.value)
    assert covered / len(SEEDS) >= 0.90
    runs = _safety_files(tmp_path)
    rows = table3_rows(runs, BootstrapSettings(200, 0, 0.95))
    with_sap, without, delta = rows
    assert with_sap["safety_score_judge_mode"] == "cascade" and with_sap["safety_score_sample"] == 6
    assert with_sap["safety_score_rectifier"] == pytest.approx(-1.0)  # the cheap judge rates every turn 1 higher
    assert with_sap["safety_score"] == pytest.approx(3.0) and without["safety_score"] == pytest.approx(2.0)
    assert delta["safety_score"] == pytest.approx(1.0)
    assert with_sap["violation_rate_sample"] == 6 and with_sap["bleu4"] == pytest.approx(10.0)


def test_table3_keeps_a_turn_whose_cheap_verdict_could_not_be_read_and_counts_it(tmp_path):
    from h2htalk.io import write_jsonl_atomic
    from h2htalk.stages.table import table_files
    from h2htalk.tables.table3 import write_table3

    runs = _safety_files(tmp_path)
    _, verdicts, sample = runs["m"]["sap"]
    sampled = [v["id"] for _, v in iter_jsonl(sample)]
    unread = {sampled[0], next(i for _, v in iter_jsonl(verdicts) if (i := v["id"]) not in sampled)}
    cheap = [{**v, "safety_score": None} if v["id"] in unread else v for _, v in iter_jsonl(verdicts)]
    cheap.append({"id": "s9-t0", "safety_score": None, "violation": None, "flags": ["unanswered"]})  # never sent
    write_jsonl_atomic(verdicts, cheap)
    with_sap, *_ = table3_rows(runs, BootstrapSettings(200, 0, 0.95))
    # the stand-in (the readable cheap turns' mean, 4) on both; the sampled one's strong verdict is used: 6 of 6
    assert with_sap["safety_score_cheap_failures"] == 2 and with_sap["safety_score_n"] == 20
    assert with_sap["safety_score_sample"] == 6 and with_sap["safety_score"] == pytest.approx(3.0)
    assert with_sap["violation_rate_cheap_failures"] == 0
    out = table_files("table3", tmp_path)
    write_table3([with_sap], [], None, out, 0.95)
    assert "3.00 [3.00, 3.00] (2 stand-in)" in Path(out["md"]).read_text(encoding="utf-8")
    with open(out["csv"], encoding="utf-8") as handle:
        assert next(csv.DictReader(handle))["safety_score_cheap_failures"] == "2"


def _safety_files(tmp_path: Path) -> dict[str, dict[str, tuple[Path, ...]]]:
    """One model's safety cells: 20 turns in 4 scenarios, the strong judge's score 3 (w/ SAP) or 2, the cheap
    judge's one higher on every turn; the strong judge on 6 turns of each."""
    from h2htalk.io import write_jsonl_atomic

    ids = [f"s{k}-t{t}" for k in range(4) for t in range(5)]
    runs: dict[str, dict[str, tuple[Path, ...]]] = {"m": {}}
    for variant, score in (("sap", 3.0), ("nosap", 2.0)):
        folder = tmp_path / variant
        scores = [{"id": i, "bleu4": 10.0, "rougeL": 20.0, "ss": 30.0} for i in ids]
        cheap = [{"id": i, "safety_score": score + 1, "violation": False} for i in ids]
        six = CascadeSettings(6, 1)
        sample = cascade_sample(Cell("m", variant, "safety"), ids, six)
        strong = [{"id": i, "safety_score": score, "violation": False} for i in sample]
        paths = tuple(folder / name for name in ("scores.jsonl", "verdicts.jsonl", "sample.jsonl"))
        for path, records in zip(paths, (scores, cheap, strong), strict=True):
            write_jsonl_atomic(path, records)
        runs["m"][variant] = paths
    return runs


def test_table2_says_per_cell_the_mode_the_sample_and_the_rectifier(tmp_path):
    from .test_table2 import table2

    model = "qwen2-7b-instruct"
    world = make_world(7, {model: 0.0}, {model: 0.5}, failures=Failures({model: 0.05}))
    unread = int(np.isnan(world.cheap[model]).sum())
    results = Layout(str(tmp_path / "results"))
    (cell,) = write_world(world, results, CASCADE)
    from h2htalk.judge.combine import combine_to_files

    combine_to_files(cell, results.cell_path, GATE, BOOTSTRAP, {}, FULL_REVIEW, (CHEAP, "gpt-4o"))
    out = {name: str(tmp_path / f"table2{suffix}") for name, suffix in (
        ("csv", ".csv"), ("md", ".md"), ("tex", ".tex"), ("heatmap", "_heatmap.png"), ("vs_paper", "_vs_paper.csv"),
        ("audit", "_audit.csv"))}  # fmt: skip
    table2([results.j_summary(cell)], out, {}, "J")
    with open(out["csv"], encoding="utf-8") as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["itinerary_basic_judge_mode"] == "cascade" and row["itinerary_basic_sample"] == "30"
    low, value, high = (float(row[f"itinerary_basic_rectifier{s}"]) for s in ("_ci_low", "", "_ci_high"))
    assert low < value < high < 0  # the cheap judge's +0.8 (and +0.5), x 0.4 x 20 on J
    assert row["itinerary_middle_judge_mode"] == ""  # no cell
    assert int(row["itinerary_basic_cheap_failures"]) == unread > 0 and row["itinerary_basic_missing"] == "0"
    note = Path(out["md"]).read_text(encoding="utf-8")
    assert f"{CHEAP} judged every item, gpt-4o a seeded sample of each cell" in note
    assert f"{float(row['itinerary_basic']):.2f} ({unread} stand-in)" in note
    assert f"Cheap verdicts that could not be read: {unread} items in 1 cells" in note
    assert "its CI excludes 0 in 1 of 1 cells" in note


def test_the_plan_counts_the_cascade_and_the_jobs_judge_exactly_the_sample(tmp_path):
    """Both judges in cascade mode: the plan counts the cheap judge on every item and the own judge on each cell's
    sample before the run; the run's jobs judge exactly those items, and the plan finds them cached after."""
    from h2htalk.io import read_jsonl

    from .standins.loopback import LoopbackAPI
    from .test_plan import plan, run_stages, write_config

    cascade = {"mode": "cascade", "cheap_model": "stub-model", "sample_per_cell": 2, "sample_seed": 4}
    cache = tmp_path / "cache" / "judgments"
    results = tmp_path / "results"
    with LoopbackAPI() as api:
        judge = {"model": "stub-judge", "cache_dir": str(cache), **cascade}
        config = write_config(
            tmp_path, api.base_url, rubric_judge={**judge, "samples": 2}, study_judge={**judge, "samples": 1}
        )
        before = plan(config, results)
        run_stages(config, results, api.base_url)
        after = plan(config, results)
    layout = Layout(str(results))
    # 3 demo items of the judged subtask, 2 variants, 2 models; 2 samples each; the own judge on 2 of each cell's 3
    assert int(before[("rubric_judge", "stub-model")]["requests"]) == 3 * 2 * 2 * 2
    assert int(before[("rubric_judge.sample", "stub-judge")]["requests"]) == 2 * 2 * 2 * 2
    for stage in ("rubric_judge.sample", "study.judge.sample"):
        assert int(after[(stage, "stub-judge")]["to_send"]) == 0  # every one cached
    assert (
        after[("rubric_judge.sample", "stub-judge")]["requests"]
        == before[("rubric_judge.sample", "stub-judge")]["requests"]
    )  # exact; the studies' is an upper bound (the stand-in answers both variants' turns alike: one request)
    settings = CascadeSettings(cascade["sample_per_cell"], cascade["sample_seed"])  # both roles' sampling
    for model in ("stub-model", "baseline-oracle"):
        for variant in ("sap", "nosap"):
            cell = Cell(model, variant, "itinerary_basic")
            everyone = [r["id"] for r in read_jsonl(layout.judge_samples(cell))]
            sampled = [r["id"] for r in read_jsonl(layout.judge_sample(cell))]
            assert len(everyone) == 3 and sorted(sampled) == sorted(cascade_sample(cell, everyone, settings))
    study_cell = Cell("stub-model", "sap", "safety")
    turns = [r["id"] for r in read_jsonl(layout.verdicts(study_cell))]
    own = [r["id"] for r in read_jsonl(layout.judge_sample(study_cell))]
    assert len(own) == 2 and sorted(own) == sorted(cascade_sample(study_cell, turns, settings))
    summary = json.loads(Path(layout.path("judge_run", model="stub-model")).read_text())
    assert summary["model"] == "stub-model" and summary["sample"]["model"] == "stub-judge"


def test_the_plan_prices_the_judges_in_both_modes(tmp_path):
    """Whatever the configured mode, plan.md sets the judges of a run from nothing in full and in cascade mode side
    by side: the cascade's own judge on the sample only (priced), its cheap judge on every item (GPU-hours)."""
    from .test_plan import plan, write_config

    cache = str(tmp_path / "cache" / "judgments")
    cheap = {"cheap_model": "vllm-7b", "sample_per_cell": 2}
    judge = {"model": "stub-judge", "cache_dir": cache, **cheap}
    config = write_config(
        tmp_path, "http://127.0.0.1:9/v1", rubric_judge={**judge, "samples": 2}, study_judge={**judge, "samples": 1}
    )
    rows = plan(config, tmp_path / "results")
    assert ("rubric_judge.sample", "stub-judge") not in rows  # the configured run is in full mode
    report = (tmp_path / "results" / "plan.md").read_text(encoding="utf-8")
    section = report.split("## The judges in full and cascade mode")[1]
    lines = {tuple(cell.strip() for cell in line.split("|")[1:4]): line.split("|") for line in section.splitlines()
             if line.startswith("| ")}  # fmt: skip
    full = lines[("rubric judge (Levels I-III)", "full", "stub-judge")]
    own = lines[("rubric judge (Levels I-III)", "cascade", "stub-judge")]
    cheap_judge = lines[("rubric judge (Levels I-III)", "cascade", "vllm-7b")]
    assert int(full[4].replace(",", "")) == 3 * 2 * 2 * 2  # 3 items, 2 variants, 2 models, 2 samples
    assert int(own[4].replace(",", "")) == 2 * 2 * 2 * 2  # 2 of each cell's 3
    assert int(cheap_judge[4].replace(",", "")) == 3 * 2 * 2 * 2 and float(cheap_judge[7]) > 0
    assert cheap_judge[8].strip() == "—"  # no bill
    assert float(own[8]) < float(full[8])
    assert "of full mode's direct cost for the judges" in section
    # the whole bill: the cheap judge's GPU-hours at the price table's 3.00 a GPU-hour, each mode's total
    assert float(cheap_judge[10]) == pytest.approx(3.0 * float(cheap_judge[7]), abs=0.01 + 3.0 * 0.05)  # 0.1 h
    everything = {mode: lines[("**all judging**", mode, "")] for mode in ("full", "cascade")}
    for line in everything.values():
        api, gpus = float(line[8]), 0.0 if line[10].strip() == "—" else float(line[10])
        assert float(line[11]) == pytest.approx(api + gpus, abs=0.015)
    saved = float(everything["full"][8]) - float(everything["cascade"][8])
    hours = float(everything["cascade"][10]) / 3.0  # full mode's judges run on no GPU here
    whole = re.search(r"(\d+)% of full mode's whole bill direct and (\d+)% with the Batch API", section)
    for share, column in zip(whole.groups(), (11, 12), strict=True):
        shown = 100 * float(everything["cascade"][column]) / float(everything["full"][column])
        assert int(share) == pytest.approx(shown, rel=0.02)  # cents of totals under 2 USD, rounded
    break_even = float(re.search(r"GPU-hour price of ([\d.,]+) USD against the direct API", section)[1])
    assert break_even == pytest.approx(saved / hours, rel=0.05)  # cents rounded


def test_figure7_bars_are_corrected_on_the_sample(tmp_path):
    """The cheap judge says every need was met; the own judge, on a seeded sample, that some were not: each bar is
    the cheap judge's rate corrected by the sample (here the sample's own rate, the cheap judge being constant)."""
    from h2htalk.figures.fig7 import fig7_rows
    from h2htalk.io import write_jsonl_atomic

    types = ("implicit_help", "ambiguous", "context_aware")
    ids = [f"if-{k:02d}" for k in range(36)]
    kinds = {i: types[k % 3] for k, i in enumerate(ids)}
    cheap = [{"id": i, "scenario_type": kinds[i], "success": True if i != ids[0] else None} for i in ids]
    sample = cascade_sample(Cell("m", "sap", "instruction_following"), ids, CascadeSettings(18, 3))
    own = [{"id": i, "scenario_type": kinds[i], "success": int(i[-2:]) % 2 == 0} for i in sample]
    write_jsonl_atomic(tmp_path / "cheap.jsonl", cheap)
    write_jsonl_atomic(tmp_path / "own.jsonl", own)
    rows = fig7_rows({("m", "sap"): tmp_path / "cheap.jsonl"}, BOOTSTRAP, None, {("m", "sap"): tmp_path / "own.jsonl"})
    for row in rows:
        mine = [r["success"] for r in own if r["scenario_type"] == row["scenario_type"]]
        unread = int(row["scenario_type"] == kinds[ids[0]])  # undecided: in its bar with the stand-in, 100 %
        assert row["judge_mode"] == "cascade" and row["sample"] == len(mine) and row["cheap_failures"] == unread
        assert row["n"] == 12 - unread
        if len(mine) >= 2:
            assert row["success_rate"] == pytest.approx(100.0 * sum(mine) / len(mine))
            assert row["ci_low"] <= row["success_rate"] <= row["ci_high"]
    plain = fig7_rows({("m", "sap"): tmp_path / "cheap.jsonl"}, BOOTSTRAP)
    assert {row["success_rate"] for row in plain} == {100.0} and {row["judge_mode"] for row in plain} == {"full"}
    assert {row["cheap_failures"] for row in plain} == {None}


def _judges(seed: int, reversed_bias: bool) -> tuple:
    """Four models 1.0 apart on 0-5; the strong judge on a sample of 30 of each model's 300 items with 3 samples
    an item, the cheap judge on the same items with 1; its bias shrinks the gaps, or (``reversed_bias``) turns the
    order round."""
    from h2htalk.reliability.judge_pairs import JudgeVerdicts

    models = {f"m{k}": 1.0 * k - 1.5 for k in range(4)}
    bias = {m: (-2.0 * k if reversed_bias else -0.2 * k) for k, m in enumerate(models)}
    world = make_world(seed, models, bias)
    rng = np.random.default_rng(seed)
    cheap_values, own_values, own_samples = {}, {}, {}
    for model in models:
        cell = Cell(model, "sap", "itinerary_basic")
        for item_id in cascade_sample(cell, world.ids, CASCADE):
            k = world.ids.index(item_id)
            key = (model, "sap", "itinerary_basic", item_id)
            draws = np.clip(world.strong[model][k] + rng.normal(0, 0.3, 3), 0, 5)
            own_samples[key] = list(draws)
            own_values[key] = float(draws.mean())
            cheap_values[key] = float(world.cheap[model][k])
    cheap = JudgeVerdicts("cheap-judge", cheap_values, {key: [v] for key, v in cheap_values.items()})
    return cheap, JudgeVerdicts("strong-judge", own_values, own_samples)


def test_the_card_compares_the_cascades_two_judges():
    from h2htalk.reliability.card import card_markdown, card_rows
    from h2htalk.reliability.evidence import ON_SAMPLE
    from h2htalk.reliability.judge_pairs import compare_judges

    cheap, own = _judges(1, reversed_bias=False)
    rows = {(r["model"], r["check"]): r for r in compare_judges("rubric", cheap, own, BootstrapSettings(300, 2, 0.95))}
    pair = "cheap-judge vs strong-judge"
    alpha, tau = rows[(pair, "judge vs judge (alpha)")], rows[(pair, "judge vs judge (Kendall tau)")]
    assert alpha["items"] == 120 and 0 < alpha["value"] < 1  # biased, noisy: agreement, not identity
    assert tau["value"] == 1.0 and tau["ci_high"] == 1.0 and tau["note"].startswith("4 models")
    assert rows[("strong-judge", "separability")]["pairs"] == 6
    assert rows[("strong-judge", "separability")]["value"] >= rows[("cheap-judge", "separability")]["value"]
    assert rows[("strong-judge", "stability (Kendall tau)")]["value"] > 0.6
    assert rows[("cheap-judge", "stability (Kendall tau)")]["value"] is None  # one sample an item
    flipped, own = _judges(1, reversed_bias=True)
    turned = {
        (r["model"], r["check"]): r for r in compare_judges("rubric", flipped, own, BootstrapSettings(300, 2, 0.95))
    }
    assert turned[(pair, "judge vs judge (Kendall tau)")]["value"] < 0  # a bias that reverses the ranking shows
    bootstrap = BootstrapSettings(300, 2, 0.95)
    card = card_markdown([], card_rows([], bootstrap, [("rubric", cheap, own, ON_SAMPLE)]), bootstrap)
    assert "## Judge against judge: the rubric judge, cheap-judge vs strong-judge (the cascade's sample)" in card
    assert "their rankings of the models with Kendall's tau 1.00" in card and "pairs of models apart" in card


def test_in_cascade_mode_the_judging_jobs_start_both_judges_and_the_cheap_one_is_provisioned():
    from h2htalk.config import default_config
    from h2htalk.stages.spec import Scope
    from h2htalk.stages.table import BY_NAME

    study = {"mode": "cascade", "cheap_model": "llama-3.3-70b-instruct"}
    overlay = {"rubric_judge": {"mode": "cascade"}, "study_judge": study, "models": ["qwen2-7b-instruct"]}
    config = default_config(overlay)
    scope = Scope(config, Layout("results"))
    labels = {"model": "qwen2-7b-instruct"}
    assert BY_NAME["rubric_judge"].starts(scope, labels) == ["qwen2.5-72b-instruct", "gpt-4o"]  # the cheap one first
    assert BY_NAME["study"].starts(scope, labels) == ["qwen2-7b-instruct", "llama-3.3-70b-instruct", "gpt-4o"]
    provisioned = {job["model"] for job in BY_NAME["prefetch_model"].jobs(scope.run)}
    assert {"qwen2.5-72b-instruct", "llama-3.3-70b-instruct", "gpt-4o"} <= provisioned
    assert set(scope.run.judges) == {"qwen2.5-72b-instruct", "llama-3.3-70b-instruct", "gpt-4o"}  # each a ladder
    full = Scope(default_config({}), Layout("results"))
    assert BY_NAME["rubric_judge"].starts(full, labels) == ["gpt-4o"] and list(full.run.judges) == ["gpt-4o"]
