"""A run on the demo instances says so on every table and figure built from its instances or answers."""

from __future__ import annotations

from h2htalk.cells import RunCells
from h2htalk.config import default_config
from h2htalk.instances.sources import run_notes
from h2htalk.io import write_json_atomic, write_jsonl_atomic
from h2htalk.stages.table import command_reads, table_files
from h2htalk.tables.calibration import write_calibration
from h2htalk.tables.human_review import write_agreement
from h2htalk.tables.table3 import write_table3

from .test_table2 import RUN, table2

NOTE = "Demo instances, 3 per subtask: a check of the pipeline, not a finding."


def test_the_note_comes_with_the_demo_source_only():
    assert run_notes(default_config({"instances": {"source": "demo"}})) == [NOTE]  # 33 demo inputs, 3 a subtask
    two = default_config({"instances": {"source": "demo"}, "subtasks": ["dialogue_base", "itinerary_basic"]})
    assert run_notes(two) == [NOTE]
    assert run_notes(default_config()) == []  # the paper study: reconstructed instances


def test_a_limited_run_says_it_is_partial():
    limited = (
        "At most 2 instances per subtask (instances.limit): a partial run, not comparable with the paper's Table 2."
    )
    demo = run_notes(default_config({"instances": {"source": "demo", "limit": 2}}))
    assert demo == ["Demo instances, 2 per subtask: a check of the pipeline, not a finding.", limited]
    assert run_notes(default_config({"instances": {"source": "demo", "limit": 5}}))[0] == NOTE  # 3 is all there is
    assert run_notes(default_config({"instances": {"limit": 2}})) == [limited]  # the benchmark, but partial


def test_every_command_that_draws_the_runs_results_reads_the_instance_source():
    reads = command_reads()
    for command in ("table2", "table3", "agreement", "calibration", "figure", "fig7", "results-json", "viewer"):
        assert {"instances.source", "instances.limit"} <= set(reads[command]), command
    assert "instances.source" not in reads["table1"]  # the release's counts: the same in every run
    # the instances stage takes its first instances; the reconstruction, which the limit does not cut, reads
    # neither it nor the section holding it (a new limit reruns no reconstruction)
    assert "instances" in reads["instances"] and not {"instances", "instances.limit"} & set(reads["reconstruct"])


def _summary(path, model, subtask, value):
    labels = {"model": model, "variant": "sap", "subtask": subtask, "embedder": "usem3", "measure": "S", "n": 3}
    write_json_atomic(path, {**labels, "value": value, "value_ci_low": value, "value_ci_high": value})
    return path


def test_tables_2_and_3_the_agreement_report_and_the_calibration_carry_the_note(tmp_path):
    paths = [
        _summary(tmp_path / f"{m}.json", m, "dialogue_base", v)
        for m, v in (("qwen2-7b-instruct", 30.0), ("baseline-random-reference", 10.0), ("baseline-oracle", 100.0))
    ]
    demo_run = default_config({**RUN, "instances": {"source": "demo"}})
    table2(paths, table_files("table2", tmp_path), {"dialogue_base": 1}, "J", demo_run)
    write_table3([{"model": "m", "variant": "w/ SAP"}], [], None, table_files("table3", tmp_path), 0.95, [NOTE])
    write_agreement([], [], table_files("agreement", tmp_path), 0.95, [NOTE])
    floor = tmp_path / "floor.jsonl"
    write_jsonl_atomic(floor, [{"ss": 12.0}, {"ss": 20.0}])
    calibration = table_files("calibration", tmp_path)
    demo = default_config({"instances": {"source": "demo", "limit": 5}, "scoring": {"embedders": ["usem3"]}})
    write_calibration([str(p) for p in paths], [str(floor)], demo, RunCells(demo), calibration)
    for name in ("table2.md", "table2.tex", "table3.md", "table3.tex", "agreement.md", "calibration.md"):
        assert NOTE in (tmp_path / name).read_text(encoding="utf-8"), name
    table2(paths, table_files("table2", tmp_path / "paper"), {"dialogue_base": 1}, "J")
    assert "Demo instances" not in (tmp_path / "paper" / "table2.md").read_text(encoding="utf-8")
