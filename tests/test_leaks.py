"""The leak check's known answers: planted copies of the reference are flagged, the clean demo set is not."""

from __future__ import annotations

import random

import pytest

from h2htalk.config import default_config
from h2htalk.instances.leaks import (
    FieldOverlap,
    field_overlap,
    instance_overlaps,
    leak_report,
    longest_common_substring,
    measure_leak,
    normalise,
    overlap_of,
    plant_leak,
    reference_readings,
)
from h2htalk.instances.schema import check_instance
from h2htalk.instances.sources import demo_instances
from h2htalk.settings import LeakSettings
from h2htalk.subtasks import SUBTASK_KEYS, get_subtask

LEAK = LeakSettings.from_config(default_config())
DIALOGUE_SUBTASKS = [key for key in SUBTASK_KEYS if "history_dialogues" in get_subtask(key).fields]
SCHEDULE_FIELDS = [("dialogue_schedule", "today_schedule"), ("itinerary_advanced", "itinerary"),
                   ("itinerary_advanced", "specific_arrangements"), ("itinerary_middle", "today_routine"),
                   ("itinerary_response", "your_current_schedule")]  # fmt: skip


def longest_common_substring_brute_force(a: str, b: str) -> int:
    return max((j - i for i in range(len(a)) for j in range(i + 1, len(a) + 1) if a[i:j] in b), default=0)


def test_longest_common_substring_agrees_with_brute_force():
    rng = random.Random(3)
    for _ in range(300):
        a = "".join(rng.choice("甲乙丙丁") for _ in range(rng.randint(0, 12)))
        b = "".join(rng.choice("甲乙丙丁") for _ in range(rng.randint(0, 12)))
        assert longest_common_substring(a, b) == longest_common_substring_brute_force(a, b), (a, b)


def test_formatting_does_not_hide_a_copy():
    assert normalise("（放下咖啡杯） 要不要来杯咖啡？\n我陪你坐会儿。") == "放下咖啡杯要不要来杯咖啡我陪你坐会儿"
    assert normalise("ＡＢＣ１２３") == "ABC123"  # full-width letters and digits read as ASCII (NFKC)
    copy = field_overlap("要 不 要 来 杯 咖 啡 ？ 我陪你坐会儿!!", "要不要来杯咖啡？我陪你坐会儿。", 4)
    assert copy.substring == 1.0 and copy.ngram == 1.0


def test_the_companion_saying_the_reference_without_its_gesture_is_a_copy():
    """The case that started it: the rebuilt history ends with the companion saying the reference's words, which
    are half of the reference's characters once its bracketed action counts."""
    reference = '（放下手中的设计图纸，声音温和）"要不要来杯咖啡？我陪你坐会儿。"'
    history = [{"speaker": "user", "text": "你那杯换成热可可了，我记得你晚上喝咖啡会睡不着。"},
               {"speaker": "companion", "text": "要不要来杯咖啡？我陪你坐会儿。"}]  # fmt: skip
    assert field_overlap(history, reference, 4) == FieldOverlap(1.0, 1.0)
    assert reference_readings(reference, 4) == [
        "放下手中的设计图纸声音温和要不要来杯咖啡我陪你坐会儿",
        "要不要来杯咖啡我陪你坐会儿",
    ]
    instance = {"id": "dialogue_base-01212", "subtask": "dialogue_base", "reference": reference,
                "fields": {"history_dialogues": history}, "flags": [], "provenance": {}}  # fmt: skip
    assert measure_leak(instance, LEAK)
    assert reference_readings("（笑）好呀，走吧", 4) == ["笑好呀走吧"]  # what is said is too short to tell a copy by


def test_a_copy_never_spans_two_turns_but_its_ngrams_add_up():
    turns = [{"speaker": "companion", "text": "要不要来杯咖啡"}, {"speaker": "user", "text": "我陪你坐会儿"}]
    overlap = field_overlap(turns, "要不要来杯咖啡我陪你坐会儿", 4)
    assert overlap.substring == pytest.approx(7 / 13)  # the longer half, not the whole
    assert overlap.ngram == pytest.approx(7 / 10)  # 4 + 3 of the 10 grams; the 3 across the turn boundary are not


def test_a_reference_shorter_than_n_is_one_gram():
    assert field_overlap("我们去吃面吧", "吃面", 4).ngram == 1.0
    assert field_overlap("我们去吃饭吧", "吃面", 4).ngram == 0.0


@pytest.mark.parametrize("subtask", SUBTASK_KEYS)
def test_clean_demo_instances_are_not_flagged(subtask):
    for instance in demo_instances(subtask):
        overlap = overlap_of(instance_overlaps(instance, LEAK.ngram))
        assert overlap < LEAK.threshold / 2, (instance["id"], overlap)  # far from the line, not just under it
        assert not measure_leak(instance, LEAK) and "leak" not in instance["flags"]


@pytest.mark.parametrize("subtask", DIALOGUE_SUBTASKS)
def test_the_reference_in_the_last_companion_turn_is_flagged(subtask):
    for instance in demo_instances(subtask):
        for edits in {0, len(instance["reference"]) // 12}:  # word for word, and a character in 12 changed
            leaked = plant_leak(instance, edits=edits)
            check_instance(leaked, leaked["id"])
            overlaps = instance_overlaps(leaked, LEAK.ngram)
            assert overlaps["history_dialogues"].overlap > LEAK.threshold, (instance["id"], edits)
            assert measure_leak(leaked, LEAK) and "leak" in leaked["flags"]
            recorded = leaked["provenance"]["leak"]
            assert recorded["leak"] and recorded["overlap"] > LEAK.threshold
            assert (recorded["fields"]["history_dialogues"]["substring"] == 1.0) == (edits == 0)
        assert plant_leak(instance)["fields"]["history_dialogues"] != instance["fields"]["history_dialogues"]


@pytest.mark.parametrize(("subtask", "field"), SCHEDULE_FIELDS)
def test_the_reference_copied_into_a_schedule_field_with_small_edits_is_flagged(subtask, field):
    for instance in demo_instances(subtask):
        edits = max(2, len(instance["reference"]) // 25)  # a changed character every 25 or so
        leaked = plant_leak(instance, field=field, edits=edits)
        check_instance(leaked, leaked["id"])
        overlaps = instance_overlaps(leaked, LEAK.ngram)
        assert overlaps[field].ngram > LEAK.threshold and overlaps[field].substring < 1.0, instance["id"]
        assert measure_leak(leaked, LEAK)
        others = [name for name in overlaps if name != field]
        assert all(overlaps[name].overlap < LEAK.threshold for name in others)


def test_the_report_counts_the_leaks_per_field():
    clean = demo_instances("dialogue_schedule")
    leaked = [plant_leak(clean[0]), plant_leak(clean[1], field="today_schedule", edits=2)]
    report = leak_report(clean + leaked, LEAK)
    assert report["overlap"]["count"] == 5 and report["overlap"]["above_threshold"] == 2
    assert report["fields"]["history_dialogues"]["above_threshold"] == 1
    assert report["fields"]["today_schedule"]["above_threshold"] == 1
    assert report["fields"]["current_schedule"]["above_threshold"] == 0
    assert report["overlap"]["max"] == 1.0 and report["overlap"]["q50"] < LEAK.threshold
    assert (report["threshold"], report["ngram"], report["action"]) == (0.5, 4, "review")


def test_a_report_over_several_subtasks_counts_each_field_where_it_is():
    schedule, feedback = demo_instances("dialogue_schedule"), demo_instances("itinerary_response")
    report = leak_report([*schedule, plant_leak(feedback[0], field="user_feedback")], LEAK)
    assert report["fields"]["history_dialogues"]["count"] == 3 and report["fields"]["user_feedback"]["count"] == 1
    assert report["fields"]["user_feedback"]["above_threshold"] == 1 and report["overlap"]["above_threshold"] == 1
