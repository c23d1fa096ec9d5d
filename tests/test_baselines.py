"""Baselines and calibration: the chance floor, the majority answer, echoing the input, the oracle."""

from __future__ import annotations

import pytest

from h2htalk.config import default_config, load_registry
from h2htalk.generation.baselines import baseline_responses, last_input_text
from h2htalk.generation.generate import PromptFile, generate_model
from h2htalk.instances.schema import read_instances
from h2htalk.instances.sources import demo_instances
from h2htalk.io import read_jsonl
from h2htalk.layout import Cell
from h2htalk.llm.calls import EngineOptions
from h2htalk.prompts.render import write_prompts
from h2htalk.scoring.score_files import ScoringSetup, score_generation_file
from h2htalk.settings import GenerationSettings
from h2htalk.subtasks import SUBTASK_KEYS
from h2htalk.tables.calibration import calibration_rows

from .conftest import REPO_ROOT, demo_file


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
    feedback = demo_instances("itinerary_response")[0]
    assert last_input_text(feedback) == feedback["fields"]["user_feedback"]
    basic = demo_instances("itinerary_basic")[0]
    assert last_input_text(basic) == basic["fields"]["history_memory"]


def test_oracle_scores_100_on_every_subtask_end_to_end(tmp_path):
    registry = load_registry(REPO_ROOT / "config" / "models.yaml")
    config = default_config({"scoring": {"cache_dir": str(tmp_path / "emb"), "bootstrap": {"resamples": 100}}})
    instances = {subtask: demo_file(tmp_path / "instances", subtask) for subtask in SUBTASK_KEYS}
    prompts = {}
    for subtask in SUBTASK_KEYS:
        prompts[subtask] = tmp_path / "prompts" / "sap" / f"{subtask}.jsonl"
        write_prompts(read_instances(instances[subtask]), "sap", prompts[subtask])
    setup = ScoringSetup.from_config(config, "usem3", config["embedders"]["usem3"])
    settings = GenerationSettings.from_config(config)
    engines = EngineOptions(settings.client, settings.seed)
    summaries = []
    for name in ("baseline-oracle", "baseline-random-reference"):
        files = [PromptFile("sap", s, prompts[s], tmp_path / name / "sap" / f"{s}.jsonl") for s in SUBTASK_KEYS]
        summary = generate_model(registry[name], files, settings, engines, instances=instances)
        assert summary["sent"] == 0  # no language model
        for subtask in SUBTASK_KEYS:
            result = score_generation_file(
                tmp_path / name / "sap" / f"{subtask}.jsonl",
                instances[subtask],
                tmp_path / "s" / f"{name}-{subtask}.items.jsonl",
                tmp_path / "s" / f"{name}-{subtask}.json",
                setup,
                Cell(name, "sap", subtask, "usem3").labels(),
            )
            summaries.append(result)
            if name == "baseline-oracle":
                assert result["S"] == pytest.approx(100.0), subtask
            else:
                assert result["S"] < 100.0
    rows = calibration_rows(summaries, "J")
    oracle_rows = [r for r in rows if r["model"] == "baseline-oracle"]
    assert len(oracle_rows) == 11 and all(r["rescaled"] == pytest.approx(1.0) for r in oracle_rows)
    floor_rows = [r for r in rows if r["model"] == "baseline-random-reference"]
    assert all(r["rescaled"] == pytest.approx(0.0) for r in floor_rows)
    record = read_jsonl(tmp_path / "baseline-oracle" / "sap" / "dialogue_base.jsonl")[0]
    assert record["provenance"]["baseline"] == "oracle" and record["finish_reason"] == "baseline"
