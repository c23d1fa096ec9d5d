"""Results whose inputs are gone are found (and removed, so the next run rebuilds them)."""

from __future__ import annotations

from pathlib import Path

from h2htalk.config import default_config
from h2htalk.freshness import remove_stale, result_graph, stale_results, table_outputs
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
    assert stale_results(graph, TABLES) == {}
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
    stale = stale_results(result_graph(CONFIG, results), TABLES)
    scored = Cell(MODEL, "sap", "dialogue_base", "usem3")
    assert set(stale) == {results.score_items(scored), results.score_summary(scored), "paper_figures/table2.meta.json"}
    assert stale[results.score_summary(scored)] == f"made from {answers}, which is missing"
    assert stale["paper_figures/table2.meta.json"].endswith("dialogue_base.summary.json, which is stale")
    removed = remove_stale(stale, TABLES)
    table2 = {"table2.csv", "table2.md", "table2_heatmap.png", "table2.meta.json"}
    assert {p.name for p in removed if p.parent == figures} == table2
    assert (figures / "table1.csv").exists() and not Path(results.score_summary(scored)).exists()
    assert stale_results(result_graph(CONFIG, results), TABLES) == {}  # what is left is consistent


def test_a_table_whose_input_changed_is_stale(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results, _ = build(tmp_path)
    Path(results.path("instances", subtask="dialogue_base")).write_text("edited", encoding="utf-8")
    stale = stale_results(result_graph(CONFIG, results), TABLES)
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
    stale = stale_results(result_graph(CONFIG, results), TABLES)
    assert stale["paper_figures/viewer.meta.json"] == f"made from {answers}, which has changed since"
    removed = {p.name for p in remove_stale(stale, TABLES) if p.parent == figures}
    assert {"viewer", "viewer.meta.json"} <= removed
    assert not (figures / "viewer").exists() and (figures / "table1.csv").exists()


def test_an_input_touched_but_unchanged_is_not_stale(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results, _ = build(tmp_path)
    instances = Path(results.path("instances", subtask="dialogue_base"))
    instances.write_text(instances.read_text(encoding="utf-8"), encoding="utf-8")  # a new mtime, the same bytes
    assert stale_results(result_graph(CONFIG, results), TABLES) == {}


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
    stale = stale_results(result_graph(CONFIG, results), TABLES)
    assert "paper_figures/table2.meta.json" in stale and "paper_figures/table2_pairs.meta.json" not in stale
    remove_stale(stale, TABLES)
    assert sorted(p.name for p in figures.glob("table2*")) == sorted([*others, "table2_pairs.meta.json"])

    Path(instances).write_text("edited", encoding="utf-8")
    stale = stale_results(result_graph(CONFIG, results), TABLES)
    assert set(stale) >= {"paper_figures/table2_pairs.meta.json"}
    removed = {p.name for p in remove_stale(stale, TABLES) if p.parent == figures}
    assert removed == {"table2_pairs.csv", "table2_pairs.meta.json", "table2_ranks.csv", "table2_ranks.png"}
    assert sorted(p.name for p in figures.glob("table2*")) == ["table2_partial.csv"]
