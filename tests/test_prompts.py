"""Instances and prompts: the schema, the demo set, strict rendering, the SAP layer, stable hashes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from h2htalk.errors import DataError
from h2htalk.instance_schema import check_instance, read_instances
from h2htalk.instances.sources import demo_instances, instance_set, write_instances
from h2htalk.prompts.render import persona_text, render_instance, sap_text, task_assistant_text
from h2htalk.settings import VARIANTS
from h2htalk.subtasks import SUBTASK_KEYS, get_subtask


@pytest.fixture(scope="module")
def demo() -> dict[str, list[dict]]:
    return {key: demo_instances(key) for key in SUBTASK_KEYS}


def test_demo_set_covers_every_subtask(demo):
    assert set(demo) == set(SUBTASK_KEYS)
    assert all(len(items) >= 3 for items in demo.values())
    assert sum(len(items) for items in demo.values()) >= 33
    for key, items in demo.items():
        for item in items:
            assert item["subtask"] == key
            assert set(item["fields"]) == set(get_subtask(key).fields)
            assert item["reference"].strip()


def test_issue_field_names_per_subtask():
    fields = {key: get_subtask(key).fields for key in SUBTASK_KEYS}
    assert fields["dialogue_base"] == ("history_dialogues",)
    assert set(fields["dialogue_schedule"]) == {"today_schedule", "current_schedule", "history_dialogues"}
    assert set(fields["itinerary_basic"]) == {"hobbies", "history_memory"}
    assert fields["itinerary_middle"] == ("today_routine",)
    assert set(fields["itinerary_advanced"]) == {"itinerary", "specific_arrangements"}
    assert set(fields["itinerary_response"]) == {"your_current_schedule", "user_feedback"}
    assert fields["recollection_refinement"] == ("history_memory",)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_subtask_renders_in_both_variants(demo, variant):
    for items in demo.values():
        for item in items:
            prompt = render_instance(item, variant)
            assert prompt.messages[0]["role"] == "system" and prompt.messages[1]["role"] == "user"
            assert "{{" not in prompt.user and "{%" not in prompt.user
            for value in item["fields"].values():
                sample = (
                    value if isinstance(value, str) else (value[0] if isinstance(value[0], str) else value[0]["text"])
                )
                assert sample.splitlines()[0] in prompt.user


def test_variants_differ_only_by_the_sap_layer(demo):
    for key, items in demo.items():
        base = persona_text() if get_subtask(key).persona else task_assistant_text()
        for item in items:
            with_sap, without = render_instance(item, "sap"), render_instance(item, "nosap")
            assert with_sap.user == without.user
            assert without.system == base
            assert with_sap.system == f"{base}\n\n{sap_text()}"


def test_the_persona_goes_where_the_upstream_templates_put_it():
    # upstream's mem_sum, mem_rewrite, mem_greet, routine_level_I and routine_level_II insert no persona
    without = {key for key in SUBTASK_KEYS if not get_subtask(key).persona}
    assert without == {
        "recollection_synthesis", "recollection_refinement", "recollection_initialization",
        "itinerary_basic", "itinerary_middle",
    }  # fmt: skip
    assert all("竹内遥斗" not in get_subtask(key).template for key in without)
    assert "竹内遥斗" not in task_assistant_text()


def test_the_persona_carries_the_release_facts():
    text = persona_text()
    for fact in (
        "竹内遥斗", "建筑师", "七成半", "两成半", "大哥哥", "知己", "好朋友在一场意外中离开", "格外保护",
        "黑咖啡", "钢琴", "健身", "牛排", "《理想国》", "明信片", "虚伪的应酬", "急救", "初遇", "熟悉", "恋人",
        "占有欲", "很快就自己调整好",
    ):  # fmt: skip
        assert fact in text, fact


def test_length_limits_as_upstream():
    assert "整段不超过30个字" in get_subtask("dialogue_emotion").template  # 1-2 sentences, whole reply
    assert "一到两个短句" in get_subtask("dialogue_emotion").template
    greet = get_subtask("itinerary_initialization").template
    assert "根据你现在的记忆，主动给伴侣发一条消息" in greet  # a greeting drawn from memory (upstream routine_greet)


def test_sap_layer_covers_the_papers_principles():
    text = sap_text()
    for needle in (
        "安全基地",
        "情感可及",
        "五比一",
        "不诱导依赖",
        "情绪调节",
        "支持自主",
        "原则式协商",
        "危机处理",
        "12356",
        "不说“别想太多”",
        "不转移话题",
    ):
        assert needle in text, needle
    assert "竹内遥斗" in persona_text() and "建筑" in persona_text()


def test_dialogue_history_renders_one_line_per_turn(demo):
    item = demo["dialogue_base"][0]
    user = render_instance(item, "nosap").user
    for turn in item["fields"]["history_dialogues"]:
        speaker = "用户" if turn["speaker"] == "user" else "竹内遥斗"
        assert f"{speaker}：{turn['text']}" in user


def test_missing_field_is_a_clear_error(demo):
    item = json.loads(json.dumps(demo["dialogue_schedule"][0]))
    del item["fields"]["current_schedule"]
    with pytest.raises(DataError, match=r"the dialogue_schedule template needs a field it lacks: 'current_schedule'"):
        render_instance(item, "sap")
    with pytest.raises(DataError, match=r"field 'fields\.current_schedule'"):
        check_instance(item, "x.jsonl: line 1")


def test_invalid_instance_file_names_file_line_and_field(tmp_path, demo):
    good = demo["itinerary_response"][0]
    bad = json.loads(json.dumps(good))
    bad["id"] = "itinerary_response-bad"
    bad["fields"]["user_feedback"] = ""
    path = tmp_path / "instances.jsonl"
    path.write_text(
        json.dumps(good, ensure_ascii=False) + "\n" + json.dumps(bad, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    with pytest.raises(DataError, match=r"instances\.jsonl: line 2: field 'fields\.user_feedback'"):
        read_instances(path)
    wrong_speaker = json.loads(json.dumps(demo["dialogue_base"][0]))
    wrong_speaker["fields"]["history_dialogues"][1]["speaker"] = "assistant"
    with pytest.raises(DataError, match=r"field 'fields\.history_dialogues\[1\]\.speaker'"):
        check_instance(wrong_speaker, "f: line 3")
    extra = json.loads(json.dumps(demo["itinerary_middle"][0]))
    extra["fields"]["hobbies"] = ["跑步"]
    with pytest.raises(DataError, match=r"field 'fields'"):
        check_instance(extra, "f: line 4")


def test_instances_from_a_file_must_match_the_subtask(tmp_path, demo):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(demo["dialogue_base"][0], ensure_ascii=False) + "\n", encoding="utf-8")
    assert instance_set("dialogue_base", path) == demo["dialogue_base"][:1]
    with pytest.raises(DataError, match="belong to another subtask"):
        instance_set("dialogue_emotion", path)
    done = write_instances("dialogue_emotion", [], str(tmp_path / "demo.jsonl"), {"instances": {"limit": None}})
    assert done.facts == f"{len(demo['dialogue_emotion'])} instances (demo set)"
    assert read_instances(tmp_path / "demo.jsonl") == demo["dialogue_emotion"]


def test_hashes_are_stable_across_processes():
    code = (
        "import json; from h2htalk.instances.sources import demo_instances;"
        "from h2htalk.prompts.render import render_instance;"
        "print(json.dumps([render_instance(i, v).record()['hashes'] for v in ('sap','nosap')"
        " for i in demo_instances('dialogue_emotion')]))"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout
        for seed in ("1", "2")
    ]
    assert runs[0] == runs[1]
    hashes = json.loads(runs[0])
    assert len({h["system_sha256"] for h in hashes}) == 2  # one per variant
    assert all(re.fullmatch(r"[0-9a-f]{64}", h["user_sha256"]) for h in hashes)


def test_demo_references_follow_their_prompts(demo):
    for item in demo["dialogue_base"] + demo["dialogue_schedule"]:
        assert re.search(r"（[^）]+）", item["reference"]), item["id"]
    for item in demo["recollection_synthesis"]:
        ref = item["reference"]
        blocks = ref.split("\n\n")
        assert ref == "未提取到关键信息。" or all(
            re.fullmatch(r"记忆内容：.{1,20}\n记忆类别：\S+\n记忆重要性：[012]", block) for block in blocks
        ), item["id"]
    for item in demo["itinerary_middle"]:
        schedule = item["reference"].split("\n\n")[0].splitlines()
        assert len(schedule) <= 6  # at most five activities and the sleep line
        assert all(re.fullmatch(r"\d\d:\d\d \S{1,8}", line) for line in schedule), item["id"]
        assert int(schedule[-1][:2]) >= 20
    for item in demo["itinerary_advanced"]:
        assert re.match(r"1\. \d\d:\d\d时，", item["reference"])
    for item in demo["itinerary_basic"]:
        assert item["reference"].startswith("今天，") and len(item["reference"]) <= 100
    for item in demo["recollection_refinement"]:
        assert len(item["reference"]) <= 50


def test_a_subtask_is_defined_in_one_file(tmp_path):
    from importlib import resources

    from h2htalk.errors import ConfigError
    from h2htalk.subtasks import load_definitions

    shipped = resources.files("h2htalk.resources").joinpath("subtasks")
    (tmp_path / "fields.yaml").write_text(shipped.joinpath("fields.yaml").read_text("utf-8"), encoding="utf-8")
    text = shipped.joinpath("itinerary_basic.yaml").read_text("utf-8")
    (tmp_path / "my_subtask.yaml").write_text(text.replace("position: 7", "position: 12"), encoding="utf-8")
    (added,) = load_definitions(tmp_path)
    assert (added.key, added.measure, added.fields) == ("my_subtask", "J", ("hobbies", "history_memory"))
    (tmp_path / "broken.yaml").write_text(text.replace("measure: J\n", "").replace("hobbies,", "hobies,"), "utf-8")
    with pytest.raises(ConfigError, match=r"broken\.yaml: .*'measure' is a required property.*'hobies' is not in"):
        load_definitions(tmp_path)


def test_the_limit_keeps_the_first_instances_of_a_set_in_its_order(tmp_path, demo):
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in demo["dialogue_base"]), encoding="utf-8")
    done = write_instances("dialogue_base", [str(path)], str(tmp_path / "two.jsonl"), {"instances": {"limit": 2}})
    assert done.facts == f"2 instances ({path}, the first 2)"
    assert read_instances(tmp_path / "two.jsonl") == demo["dialogue_base"][:2]
    assert instance_set("dialogue_base", limit=1) == demo["dialogue_base"][:1]
    assert instance_set("dialogue_base", limit=50) == demo["dialogue_base"]
