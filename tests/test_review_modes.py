"""review.mode on judged cells (gate, sample), what Table 2 says about it, and the agreement report of a run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from h2htalk.cli import main
from h2htalk.config import default_config
from h2htalk.io import write_json_atomic, write_jsonl_atomic
from h2htalk.judge.combine import SAMPLED, combine_items, human_scores, summarise_j
from h2htalk.layout import Cell, Layout
from h2htalk.ratings import Rating
from h2htalk.review.queue import write_review_queue
from h2htalk.settings import BootstrapSettings, GateSettings, ReviewSettings
from h2htalk.tables.human_review import review_notes

from .test_table2 import RELEASED, _summaries, table2

GATE = GateSettings.from_config(default_config())
BOOT = BootstrapSettings(resamples=300, seed=5, confidence=0.95)
SAMPLE = ReviewSettings(mode="sample", sample_per_cell=20, sample_seed=23)
GATE_MODE = ReviewSettings(mode="gate", sample_per_cell=20, sample_seed=23)
CELL = Cell("m", "sap", "itinerary_basic", "usem3")


def write_cell(tmp_path, items: int = 80):
    """A judged cell whose judge scores one point above what people give (people: ``truth``)."""
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 4, items).astype(float)  # people's scores 0-3
    results = Layout(str(tmp_path / "results"))
    ids = [f"itinerary_basic-{i:05d}" for i in range(items)]
    verdicts = [
        {
            "id": item_id, "task": "t", "response": "r", "reference": "ref",
            "samples": [{"score": truth[k] + 1, "evidence": "e"}], "judge_mean": truth[k] + 1.0, "judge_spread": 0.0,
            "flags": [],
        }
        for k, item_id in enumerate(ids)
    ]  # fmt: skip
    verdicts.append({**verdicts[0], "id": "itinerary_basic-09999", "samples": [{"score": None, "evidence": ""}],
                     "judge_mean": None, "judge_spread": None, "flags": ["judge_missing"]})  # fmt: skip
    write_jsonl_atomic(results.score_items(CELL), [{"id": v["id"], "S": 40.0 + k % 7} for k, v in enumerate(verdicts)])
    write_jsonl_atomic(results.judge_samples(CELL), verdicts)
    return results, dict(zip(ids, truth, strict=True))


def combined(results, human, review):
    scores, samples = Path(results.score_items(CELL)), Path(results.judge_samples(CELL))
    return combine_items("m", "sap", "itinerary_basic", scores, samples, GATE, human, review)


def review_score(item_id: str, score: float, rater: str = "r1") -> Rating:
    return Rating(("m", "sap", "itinerary_basic", item_id), {"human_score": score}, rater, "q.csv", 2, "0" * 64)


def test_sample_mode_sends_a_seeded_sample_to_people_and_corrects_the_judge_with_it(tmp_path):
    results, truth = write_cell(tmp_path)
    items = combined(results, {}, SAMPLE)
    sampled = [i["id"] for i in items if i["sampled"]]
    assert len(sampled) == 20 and "itinerary_basic-09999" not in sampled  # drawn among items the judge scored
    assert all(i["review_reasons"] == [SAMPLED] for i in items if i["sampled"])
    assert not any(i["review"] for i in items if not i["sampled"])  # nothing gated: J5 < 3.5 everywhere here
    queue = tmp_path / "queue.csv"
    items_file = tmp_path / "items.jsonl"
    write_jsonl_atomic(items_file, items)
    assert write_review_queue([items_file], queue).facts == "20 items to review"
    assert sorted(r["id"] for r in csv.DictReader(queue.open(encoding="utf-8"))) == sorted(sampled)
    alone = summarise_j(items, BOOT, "sample")
    assert alone["estimator"].startswith("the judge's J alone") and alone["human_items"] == 0
    assert alone["value"] == pytest.approx(np.mean([i["J100"] for i in items if i["J100"] is not None]))

    outside = next(i for i in truth if i not in sampled)
    ratings = [review_score(i, truth[i]) for i in sampled] + [review_score(sampled[0], truth[sampled[0]], "r2")]
    ratings.append(review_score(outside, 5.0))  # a hand-picked item: counted, never used
    items = combined(results, human_scores(ratings, "m"), SAMPLE)
    summary = summarise_j(items, BOOT, "sample")
    judge_j = np.array([i["J100"] for i in items if i["J100"] is not None])
    # people give exactly one point less than the judge: J100 moves by 20 * 0.4 * (-1) = -8
    assert summary["estimator"] == "prediction-powered J" and summary["correction"] == pytest.approx(-8.0)
    assert summary["value"] == pytest.approx(judge_j.mean() - 8.0)
    assert summary["value_ci_low"] < summary["value"] < summary["value_ci_high"]
    assert summary["judge_only"]["value"] == pytest.approx(judge_j.mean())
    readings = summary["readings"]
    assert readings["J"]["value"] == summary["value"] and readings["J"]["correction"] == pytest.approx(-8.0)
    # the judge reading moves by the whole difference, 20 * (-1); S, the metric alone, does not move
    judge_x20 = np.array([20.0 * i["judge_mean"] for i in items if i["J100"] is not None])
    assert readings["judge"]["correction"] == pytest.approx(-20.0)
    assert readings["judge"]["value"] == pytest.approx(judge_x20.mean() - 20.0)
    assert readings["judge"]["judge_only"]["value"] == pytest.approx(judge_x20.mean())
    s_values = [i["S"] for i in items]
    assert readings["S"]["value"] == pytest.approx(np.mean(s_values)) and "correction" not in readings["S"]
    assert (summary["human_items"], summary["human_ratings"], summary["ratings_outside_sample"]) == (20, 21, 1)
    assert summary["sample_size"] == 20 and summary["sample_rated"] == 20 and summary["to_review"] == 0
    assert summary["missing"] == 1 and summary["review_mode"] == "sample"
    rated = next(i for i in items if i["id"] == sampled[0])
    assert rated["J5"] == pytest.approx(0.6 * rated["S"] / 20 + 0.4 * (truth[sampled[0]] + 1))  # still the judge's
    assert rated["J5_people"] == pytest.approx(0.6 * rated["S"] / 20 + 0.4 * truth[sampled[0]])


def test_items_without_s_are_neither_sampled_nor_gated_and_stay_outside_the_corrected_readings(tmp_path):
    """Empty answers left unscored (scoring.empty_answers: skip) have no S, so no J: people are never asked
    about them, and in sample mode the corrected readings cover the items the sample is drawn from."""
    results, truth = write_cell(tmp_path, items=12)
    skipped = list(truth)[:3]
    rows = [{"id": i, "S": None if i in skipped else 40.0, "flags": ["skipped"] if i in skipped else []}
            for i in [*truth, "itinerary_basic-09999"]]  # fmt: skip
    write_jsonl_atomic(results.score_items(CELL), rows)
    for review in (SAMPLE, GATE_MODE):
        items = combined(results, {}, review)
        by_id = {i["id"]: i for i in items}
        assert not any(by_id[i]["sampled"] or by_id[i]["review"] or by_id[i]["J5"] is not None for i in skipped)
    items = combined(results, {}, SAMPLE)
    sampled = [i["id"] for i in items if i["sampled"]]
    assert len(sampled) == 9  # every item with a J: 12, less 3 without S (and the one the judge left unscored)
    ratings = [review_score(i, truth[i]) for i in sampled]
    summary = summarise_j(combined(results, human_scores(ratings, "m"), SAMPLE), BOOT, "sample")
    readings = summary["readings"]
    assert (readings["J"]["n"], readings["J"]["missing"]) == (9, 4)
    assert (readings["judge"]["n"], readings["judge"]["missing"]) == (9, 4)
    assert readings["judge"]["value"] == pytest.approx(np.mean([20.0 * truth[i] for i in sampled]))
    assert (readings["S"]["n"], readings["S"]["missing"]) == (10, 3) and readings["S"]["value"] == 40.0


def test_gate_mode_replaces_the_judge_where_people_rated_and_counts_their_ratings(tmp_path):
    results, truth = write_cell(tmp_path)
    first = list(truth)[:3]
    ratings = [review_score(i, truth[i], rater) for i in first for rater in ("r1", "r2")]
    items = combined(results, human_scores(ratings, "m"), GATE_MODE)
    summary = summarise_j(items, BOOT, "gate")
    assert (summary["human_items"], summary["human_ratings"]) == (3, 6)
    assert summary["review_mode"] == "gate" and not any(i["sampled"] for i in items)
    assert summary["to_review"] == len(items) - 3  # every other item is gated (S ~ 40: J5 < 3.5) or missing
    by_id = {i["id"]: i for i in items}
    assert by_id[first[0]]["J5"] == pytest.approx(0.6 * by_id[first[0]]["S"] / 20 + 0.4 * truth[first[0]])


def test_switching_the_review_mode_reruns_combine_j_and_what_cites_the_whole_config():
    from h2htalk.config import settings_hash
    from h2htalk.stages.table import command_reads

    before, after = default_config(), default_config({"review": {"mode": "sample", "sample_per_cell": 40}})
    reads = {command: keys for command, keys in command_reads().items() if keys}
    changed = {command for command, keys in reads.items() if settings_hash(before, keys) != settings_hash(after, keys)}
    assert changed == {"combine-j", "provenance"}  # the tables read the summaries combine-j writes


def test_table2_says_the_mode_and_how_many_ratings_each_judged_cell_rests_on(tmp_path):
    from h2htalk.stages.table import table_files

    paths = _summaries(tmp_path, "qwen2-7b-instruct", "sap", 40.0)
    judged = [p for p in paths if json.loads(p.read_text())["measure"] == "J"]
    for number, path in enumerate(judged):
        summary = json.loads(path.read_text())
        summary.update(review_mode="sample", human_items=10 * number, human_ratings=12 * number,
                       estimator="prediction-powered J" if number else "the judge's J alone",
                       review={"mode": "sample", "sample_per_cell": 30, "sample_seed": 23})  # fmt: skip
        write_json_atomic(path, summary)
    summaries = [json.loads(p.read_text()) for p in paths]
    [line] = review_notes(summaries, "J")
    assert line.startswith("Human review (review.mode sample, prediction-powered): a judged cell is the judge's mean J")
    assert "up to 30 of those items" in line and "its 3 judged cells rest on 36 ratings by people of 30 items" in line
    assert (
        "(cells on none: 1;" in line and "fewer than 2 rated sampled items, which show the judge's J alone: 1." in line
    )
    [judge] = review_notes(summaries, "judge")
    assert "the judge's mean score x20 over its items" in judge and "show the judge's score x20 alone: 1." in judge
    [metric] = review_notes(summaries, "S")
    assert "not S, so the judged cells here rest on none (tables.judged_cell: S)" in metric
    for judged_cell, items, ratings in (("J", "10", "12"), ("judge", "10", "12"), ("S", "0", "0")):
        prefix = tmp_path / judged_cell / "table2"
        out = table_files("table2", prefix.parent)
        table2(paths, out, RELEASED, judged_cell)  # its notes are review_notes' lines
        [row] = list(csv.DictReader(prefix.with_suffix(".csv").open(encoding="utf-8")))
        assert (row["itinerary_middle_human_items"], row["itinerary_middle_human_ratings"]) == (items, ratings)
        assert row["dialogue_base_human_items"] == "0"  # an S cell rests on no rating
    assert "review.mode sample" in (tmp_path / "J" / "table2.md").read_text(encoding="utf-8")
    gate = [{**s, "review_mode": "gate"} for s in summaries]
    assert review_notes(gate, "J")[0].startswith("Human review (review.mode gate, the paper's)")


def test_the_agreement_report_of_a_run(tmp_path):
    """The command on a small results tree: the rubric judge's scores rated by two people, safety turns rated
    with one tie, alpha per subtask, over the judged subtasks and for the safety study."""
    model, results = "qwen2-7b-instruct", Layout(str(tmp_path / "results"))
    config = {"models": [model], "baselines": [], "subtasks": ["itinerary_basic", "itinerary_middle"],
              "variants": ["sap"], "scoring": {"bootstrap": {"resamples": 200}, "embedders": ["usem3"]}}  # fmt: skip
    review = tmp_path / "review.csv"
    rows = ["model,variant,subtask,id,human_score,reviewer"]
    for subtask in config["subtasks"]:
        judge = [{"id": f"{subtask}-{k:05d}", "judge_mean": float(k % 5)} for k in range(12)]
        write_jsonl_atomic(results.judge_samples(Cell(model, "sap", subtask)), judge)
        write_jsonl_atomic(results.path("curated", subtask=subtask), [])  # what instance decisions would name
        for k in range(12):  # r1 gives the judge's score, r2 one less where it can
            rows += [f"{model},sap,{subtask},{subtask}-{k:05d},{k % 5},r1"]
            rows += [f"{model},sap,{subtask},{subtask}-{k:05d},{max(k % 5 - 1, 0)},r2"]
    review.write_text("\n".join(rows) + "\n", encoding="utf-8")
    verdicts = [{"id": f"s{k}-t1", "safety_score": 1 + k % 5, "violation": k % 2 == 0} for k in range(10)]
    write_jsonl_atomic(results.verdicts(Cell(model, "sap", "safety")), verdicts)
    need = [{"id": f"n{k}", "samples": [{"recognized": True, "met": k % 2 == 0}], "success": k % 2 == 0}
            for k in range(4)]  # fmt: skip
    write_jsonl_atomic(results.verdicts(Cell(model, "sap", "instruction_following")), need)
    safety = tmp_path / "safety.csv"
    safety.write_text(
        "model,variant,id,safety_score,violation,rater\n"
        + "".join(f"{model},sap,s{k}-t1,{1 + k % 5},{'yes' if k % 2 == 0 else 'no'},r1\n" for k in range(10))
        + f"{model},sap,s1-t1,2,yes,r2\n",  # r1 said no: a tie
        encoding="utf-8",
    )
    config.update(review={"imports": [str(review)], "store": str(tmp_path / "none.sqlite")},
                  studies={"human_ratings": [str(safety)]})  # fmt: skip
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config), encoding="utf-8")
    write_json_atomic(results.path("provenance"), {"git": {"revision": "abc"}})
    out = tmp_path / "figs" / "agreement"
    figures = ["--figures", str(out.parent)]
    assert main(["agreement", "--config", str(config_file), "--results", str(results.root), *figures]) == 0
    with open(f"{out}.csv", encoding="utf-8") as handle:
        table = {(r["scope"], r["field"], r["comparison"]): r for r in csv.DictReader(handle)}
    pooled = table[("judged subtasks", "human_score", "between raters")]
    assert (pooled["items"], pooled["ratings"], pooled["coders"]) == ("24", "48", "2")
    assert 0 < float(pooled["value"]) < 1 and pooled["measure"] == "krippendorff_alpha"
    assert float(pooled["value_ci_low"]) <= float(pooled["value"]) <= float(pooled["value_ci_high"])
    basic = table[("itinerary_basic", "human_score", "judge vs people")]
    assert basic["items"] == "12" and basic["ratings"] == "24"  # the judge against the median of r1 and r2
    violation = table[("safety", "violation", "judge vs people")]
    assert violation["items"] == "9" and float(violation["value"]) == pytest.approx(1.0)  # the tie is left out
    assert table[("safety", "violation", "between raters")]["items"] == "1"
    md = (tmp_path / "figs" / "agreement.md").read_text(encoding="utf-8")
    assert "## Items that need another rater" in md and f"{model}/sap/s1-t1" in md and "no yes" in md
    for field in ("recognized", "met"):  # verdicts are given at the desk only, and there is no store here
        assert table[("instruction following", field, "judge vs people")]["items"] == "0"
    meta = json.loads((tmp_path / "figs" / "agreement.meta.json").read_text(encoding="utf-8"))
    assert {str(review), str(safety)} <= {i["path"] for i in meta["inputs"]}

    # Table 2 of the same run carries the line over the judged subtasks, the same numbers as the report's
    for subtask in config["subtasks"]:
        cell = Cell(model, "sap", subtask, "usem3")
        reading = {"n": 12, "value": 50.0, "value_ci_low": 45.0, "value_ci_high": 55.0, "missing": 0}
        summary = {**cell.labels(), "measure": "J", **reading, "readings": dict.fromkeys(("J", "S", "judge"), reading),
                   "gate": {"alpha": 0.6}, "review_mode": "gate", "human_items": 12, "human_ratings": 24}  # fmt: skip
        write_json_atomic(results.j_summary(cell), summary)
    assert main(["table2", "--config", str(config_file), "--results", str(results.root), *figures]) == 0
    md = (tmp_path / "figs" / "table2.md").read_text(encoding="utf-8")
    assert "its 2 judged cells rest on 48 ratings by people of 24 items" in md
    line = next(x for x in md.splitlines() if x.startswith("- Agreement"))
    assert f"human score (ordinal): between raters {float(pooled['value']):.2f} [" in line
    assert "(24 items, 48 ratings, 2 raters); judge vs people" in line and line.endswith("Per subtask: agreement.md.")
