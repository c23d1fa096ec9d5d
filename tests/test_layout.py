"""The results tree: one address per result, instance sets side by side."""

from __future__ import annotations

import contextlib

import pytest

from h2htalk.cli import build_parser, main
from h2htalk.cli.options import resolve_instance_set
from h2htalk.config import default_config
from h2htalk.errors import H2HTalkError
from h2htalk.layout import CELL_KINDS, SHARED_KINDS, Cell, Layout, instances_set


def test_each_instance_set_has_its_own_name():
    assert instances_set(default_config({"instances": {"source": "demo"}})) == "demo"
    assert instances_set(default_config({})) == "reconstructed"  # the paper study's
    assert instances_set(default_config({"instances": {"source": "demo", "limit": 2}})) == "demo-first2"
    one = {"source": "file", "files": {"dialogue_base": "a.jsonl"}}
    mine = instances_set(default_config({"subtasks": ["dialogue_base"], "instances": one}))
    one["files"]["dialogue_base"] = "b.jsonl"
    other = instances_set(default_config({"subtasks": ["dialogue_base"], "instances": one}))
    assert mine.startswith("file-") and other.startswith("file-") and mine != other


def test_a_sets_results_live_under_its_name_and_the_data_is_shared():
    demo, paper = Layout("results", "demo"), Layout("results", "reconstructed")
    cell = Cell("m", "sap", "dialogue_base", "usem3")
    assert demo.score_summary(cell) == "results/sets/demo/scores/usem3/m/sap/dialogue_base.summary.json"
    assert paper.score_summary(cell) == "results/sets/reconstructed/scores/usem3/m/sap/dialogue_base.summary.json"
    for kind in ("curated", "reconstructed", "model_file", "prefetched_model"):
        assert kind in SHARED_KINDS
        labels = {"subtask": "dialogue_base", "model": "m"}
        assert demo.path(kind, **labels) == paper.path(kind, **labels) == Layout("results").path(kind, **labels)
    assert demo.path("logs") != paper.path("logs") and demo.path("config") != paper.path("config")
    assert (demo.figures, paper.figures, Layout().figures) == ("paper_figures/demo", "paper_figures/reconstructed",
                                                               "paper_figures")  # fmt: skip


def test_a_command_finds_the_one_set_of_its_tree_and_puts_its_tables_there(tmp_path):
    results = tmp_path / "results"
    args = build_parser().parse_args(["table1", "--results", str(results)])
    resolve_instance_set(args)
    table1 = args.results.figure("table1.csv")
    assert args.results.instance_set is None and table1 == "paper_figures/table1.csv"  # an empty tree: no set
    (results / "sets" / "demo").mkdir(parents=True)
    args = build_parser().parse_args(["table1", "--results", str(results)])
    resolve_instance_set(args)
    assert args.results.instance_set == "demo" and args.results.figure("table1.csv") == "paper_figures/demo/table1.csv"
    assert args.results.path("curation_report") == f"{results}/data/curation_report.json"  # shared
    args = build_parser().parse_args(["table1", "--results", str(results), "--instance-set", "reconstructed"])
    resolve_instance_set(args)
    assert args.results.path("provenance") == f"{results}/sets/reconstructed/provenance.json"


def test_a_tree_of_two_sets_needs_the_set_named(tmp_path, capsys):
    results = tmp_path / "results"
    for name in ("demo", "reconstructed"):
        (results / "sets" / name).mkdir(parents=True)
    assert main(["table1", "--results", str(results)]) == 2
    error = capsys.readouterr().err
    assert "holds the results of 2 instance sets (demo, reconstructed): name one with --instance-set" in error


def test_a_tree_finds_its_one_set_and_takes_a_tables_folder(tmp_path):
    results = Layout(str(tmp_path / "results"))
    assert results.the_set(None).instance_set is None and results.the_set("demo").instance_set == "demo"
    (tmp_path / "results" / "sets" / "demo").mkdir(parents=True)
    found = results.the_set(None, "elsewhere")
    assert found.instance_set == "demo" and found.figure("table1.csv") == "elsewhere/table1.csv"
    (tmp_path / "results" / "sets" / "reconstructed").mkdir()
    with pytest.raises(H2HTalkError, match=r"2 instance sets \(demo, reconstructed\): name one with --instance-set"):
        results.the_set(None)
    assert results.the_set("reconstructed").instance_set == "reconstructed"


def test_every_cell_kind_a_declaration_may_name_is_a_file_of_a_subtasks_cell_or_a_studys():
    layout, found = Layout("results", "demo"), {}
    for cell in (Cell("m", "sap", "dialogue_base", "e"), Cell("m", "sap", "safety", "e")):
        for kind in CELL_KINDS:
            with contextlib.suppress(KeyError):  # a kind of one sort of task alone (a study's verdicts, ...)
                found.setdefault(kind, []).append(layout.cell_path(kind, cell))
    assert all(found.get(kind) for kind in CELL_KINDS), found
    paths = [path for kind_paths in found.values() for path in kind_paths]
    assert len(set(paths)) == len(paths)  # each its own file
