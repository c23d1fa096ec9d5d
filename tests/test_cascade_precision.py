"""``sample_per_cell: auto``: a pilot of each cell's sample measures the two judges' spread, and the sample grows to
the size whose 95 % interval meets ``target_half_width``; before any verdict an assumed correlation sizes it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from h2htalk.config import default_config, settings_view
from h2htalk.judge.cascade import cascade_sample, sized_sample
from h2htalk.judge.precision import ASSUMED, MEASURED, Z95, Spread, assumed_spread, measured_spread
from h2htalk.layout import Cell, Layout
from h2htalk.people.prediction_powered import prediction_powered_mean
from h2htalk.settings import AutoSample, CascadeSettings
from h2htalk.stages.table import STAGES

from .cascade_world import Judges, make_world

TARGET = 4.0  # on the judge reading, 0-100
AUTO = CascadeSettings(30, 31, AutoSample(TARGET, 30, 0.6, 20.0))


@pytest.mark.parametrize("spread", [Spread(207, 80.0, 320.0, ASSUMED), Spread(444, -40.0, 900.0, MEASURED)])
def test_the_size_is_the_least_that_meets_the_target_from_the_pilot_up_to_the_whole_cell(spread):
    for target in (2.0, 3.0, 4.0, 6.0, 12.0):
        n = spread.size_for(target, least=30)
        assert 30 <= n <= spread.items
        if 30 < n < spread.items:
            assert spread.half_width(n) <= target < spread.half_width(n - 1)
        elif n == 30:
            assert spread.half_width(30) <= target
        else:  # not even the whole cell meets it: full mode
            assert spread.half_width(n - 1) > target
    assert spread.size_for(0.01, least=30) == spread.items
    assert Spread(20, 80.0, 320.0, ASSUMED).size_for(100.0, least=30) == 20  # a cell smaller than the pilot: all


def test_the_assumed_spread_is_full_modes_at_the_whole_cell_and_a_better_cheap_judge_needs_fewer_items():
    for correlation in (0.2, 0.6, 0.9):
        spread = assumed_spread(207, correlation, 20.0)
        assert spread.half_width(207) == pytest.approx(Z95 * 20.0 / math.sqrt(207))  # the strong judge alone
    sizes = [assumed_spread(207, r, 20.0).size_for(4.0, least=2) for r in (0.4, 0.6, 0.8)]
    assert sizes[0] > sizes[1] > sizes[2]
    assert sizes[1] == 126  # var(y - g) = 400 (1/0.36 - 1) = 711.1 / ((4/1.96)^2 + 311.1/207), by hand: 125.5


def test_a_pilot_measures_the_spread_the_estimator_sees():
    rng = np.random.default_rng(3)
    strong = rng.normal(60.0, 20.0, 4000)
    cheap = 0.7 * strong + rng.normal(30.0, 12.0, 4000)
    pilot = rng.choice(4000, 2000, replace=False)
    spread = measured_spread(4000, cheap.tolist(), list(zip(strong[pilot], cheap[pilot], strict=True)))
    assert spread is not None and spread.source == MEASURED and spread.pairs == 2000
    assert spread.var_difference == pytest.approx(np.var(strong - cheap), rel=0.1)
    assert spread.part_of_y == pytest.approx(np.var(strong) - np.var(strong - cheap), rel=0.1)
    assert measured_spread(4000, cheap.tolist(), [(50.0, 40.0)]) is None  # one pair measures nothing


def test_auto_samples_meet_the_target_and_cover_full_modes_cell():
    """Known answers: Level I-III-sized cells, the cheap judge +0.8 (+0.5 for one model) with noise 0.6 against the
    strong judge's noise 0.7 (0-5); each cell sized by its 30-item pilot for a half-width of 4 on 0-100. The
    realised half-widths sit at the target, and the cells cover full mode's mean."""
    half_widths, covered, sizes = [], 0, []
    for seed in range(200):
        items = (143, 207, 444)[seed % 3]
        world = make_world(seed, {"a": 0.0, "b": 0.0}, {"a": 0.5}, items=items, judges=Judges())
        for model in ("a", "b"):
            cell = Cell(model, "sap", "itinerary_basic")
            cheap = dict(zip(world.ids, 20.0 * world.cheap[model], strict=True))
            strong_all = dict(zip(world.ids, 20.0 * world.strong[model], strict=True))
            pilot = cascade_sample(cell, world.ids, AUTO)
            sample, record = sized_sample(cell, world.ids, AUTO, cheap, {i: strong_all[i] for i in pilot})
            assert sample[: len(pilot)] == pilot and len(sample) == record["size"] and record["spread"] == MEASURED
            index = [world.ids.index(i) for i in sample]
            estimate = prediction_powered_mean(
                20.0 * world.cheap[model], np.array(index), 20.0 * world.strong[model][index], 0.95
            )
            half_widths.append((estimate.ci_high - estimate.ci_low) / 2)
            covered += estimate.ci_low <= 20.0 * world.strong[model].mean() <= estimate.ci_high
            sizes.append(record["size"])
    assert np.median(half_widths) == pytest.approx(TARGET, rel=0.1)
    assert covered / 400 >= 0.92
    assert 30 < np.median(sizes) < 143


def test_every_model_of_a_cell_draws_its_pilot_and_its_sample_from_one_order():
    world = make_world(1, {"a": 0.0, "b": 0.0}, {"a": 0.5}, items=207)
    samples = {}
    for model in ("a", "b"):
        cell = Cell(model, "sap", "itinerary_basic")
        cheap = dict(zip(world.ids, 20.0 * world.cheap[model], strict=True))
        strong = dict(zip(world.ids, 20.0 * world.strong[model], strict=True))
        samples[model] = sized_sample(cell, world.ids, AUTO, cheap, strong)[0]
    shorter, longer = sorted(samples.values(), key=len)
    assert longer[: len(shorter)] == shorter  # the same items, as far as the smaller sample goes


def test_a_pilot_without_verdicts_is_sized_by_the_assumed_correlation():
    ids = [f"itinerary_basic-{i:05d}" for i in range(207)]
    sample, record = sized_sample(Cell("m", "sap", "itinerary_basic"), ids, AUTO, {}, {})
    assert record["spread"] == ASSUMED and record["size"] == len(sample) == 126  # as by hand above
    assert record["expected_half_width"] <= TARGET


def test_the_plan_sizes_auto_samples_by_the_assumption_and_the_run_by_its_pilot(tmp_path):
    """``sample_per_cell: auto`` end to end: before any verdict the plan sizes each cell by the assumed correlation;
    the rubric job judges the pilot, sizes the sample from it, judges the rest into the same file and records the
    sizes; the plan after the run finds every request cached."""
    from h2htalk.io import read_jsonl

    from .standins.loopback import LoopbackAPI
    from .test_plan import plan, run_stages, write_config

    auto = {"sample_per_cell": "auto", "pilot_per_cell": 2, "target_half_width": 0.5, "sample_seed": 4}
    cache = tmp_path / "cache" / "judgments"
    results = tmp_path / "results"
    with LoopbackAPI() as api:
        rubric = {"model": "stub-judge", "cache_dir": str(cache), "samples": 2, "mode": "cascade"}
        config = write_config(tmp_path, api.base_url, rubric_judge={**rubric, "cheap_model": "stub-model", **auto})
        before = plan(config, results)
        before_report = (results / "plan.md").read_text(encoding="utf-8")
        run_stages(config, results, api.base_url)
        after = plan(config, results)
    # 3 demo items of the judged subtask, 2 variants, 2 models, 2 samples: the assumption asks for all 3
    assert int(before[("rubric_judge.sample", "stub-judge")]["requests"]) == 3 * 2 * 2 * 2
    assert int(after[("rubric_judge.sample", "stub-judge")]["to_send"]) == 0
    layout, judged = Layout(str(results)), 0
    for model in ("stub-model", "baseline-oracle"):
        summary = json.loads(Path(layout.path("judge_run", model=model)).read_text())
        for variant in ("sap", "nosap"):
            cell = Cell(model, variant, "itinerary_basic")
            size = summary["sizes"][f"{variant}/itinerary_basic"]
            sampled = [r["id"] for r in read_jsonl(layout.judge_sample(cell))]
            everyone = [r["id"] for r in read_jsonl(layout.judge_samples(cell))]
            assert size["pilot"] == 2 and sorted(sampled) == sorted(cascade_sample(cell, everyone, AUTO, size["size"]))
            judged += 2 * len(sampled)
        assert not list(Path(layout.judge_sample(cell)).parent.glob("*.rest.jsonl"))
    assert int(after[("rubric_judge.sample", "stub-judge")]["requests"]) == judged
    # plan.md says how it sized the samples: now from the run's cached pilots wherever they measured a spread
    measured = sum(
        size["spread"] == MEASURED
        for model in ("stub-model", "baseline-oracle")
        for size in json.loads(Path(layout.path("judge_run", model=model)).read_text())["sizes"].values()
    )
    report = (results / "plan.md").read_text(encoding="utf-8")
    assert f"{measured} of 4 cells are sized by their pilot's cached verdicts, {4 - measured} by the" in report
    assert "itinerary_basic (3 items a cell)" in report and "half-width of 0.5" in report
    assert before_report.count("0 of 4 cells are sized by their pilot's cached verdicts, 4 by the assumed") == 1


def test_a_pairs_degrees_of_freedom_count_the_items_of_both_samples_once():
    from h2htalk.tables.table2_pairs import RowItems, _sample_df

    def row(model: str, variant: str, sample: int) -> RowItems:
        return RowItems("e", model, model, "g", variant, {}, {}, rated={"itinerary_basic": sample})

    rows = [row("a", "sap", 30), row("b", "sap", 50), row("a", "nosap", 30)]
    own, pairs = _sample_df(rows, "itinerary_basic", np.array([[0, 1], [0, 2]]))
    assert own.tolist() == [29, 49, 29]
    assert pairs.tolist() == [49, 58]  # one variant: a's sample is within b's; two variants: two samples


def test_a_stage_that_reads_the_rubric_judges_cascade_gets_the_keys_an_auto_sample_takes():
    """The settings of an auto sample come with it wherever a job reads the rubric judge's cascade (combine_j stopped
    on a KeyError for target_half_width in a rehearsal with ``sample_per_cell: auto``)."""
    auto = {"mode": "cascade", "sample_per_cell": "auto", "target_half_width": 4.0, "pilot_per_cell": 12}
    config = default_config({"rubric_judge": auto})
    readers = [stage for stage in STAGES if "rubric_judge.sample_per_cell" in stage.reads]
    assert "combine_j" in {stage.name for stage in readers}
    for stage in readers:
        found = CascadeSettings.from_config(settings_view(config, stage.reads), "rubric_judge")
        assert found.auto == AutoSample(4.0, 12, 0.6, 20.0) and found.sample_per_cell == 12, stage.name
