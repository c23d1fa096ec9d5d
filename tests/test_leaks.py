"""The leak check's known answers: planted copies of the reference are flagged, the clean demo set is not."""

from __future__ import annotations

import json
import random

import opencc
import pytest

from h2htalk.config import default_config
from h2htalk.instance_schema import check_instance
from h2htalk.instances.leaks import (
    FieldOverlap,
    field_overlap,
    instance_overlap,
    instance_overlaps,
    leak_record,
    leak_report,
    longest_common_substring,
    measure_leak,
    overlap_of,
    plant_leak,
    reference_readings,
)
from h2htalk.instances.sources import demo_instances
from h2htalk.settings import LeakSettings
from h2htalk.subtasks import SUBTASK_KEYS, get_subtask
from h2htalk.text_match import ngrams, normalise

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
    # invisible characters a reader does not see, marks and fillers included, hide nothing either
    assert normalise("要\u034f不\u3164要\ufe0f来\u0301杯\U000e0041咖\u200b啡") == "要不要来杯咖啡"
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
        # all fields together hold more (a schedule's 村上春树 and the reference's), still well under the line
        assert instance_overlap(instance, LEAK.ngram).overlap <= 0.35, instance["id"]
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


# A reference spread over several fields (or turns): each holds less than half of it, together all of it.
FILLER = [i["reference"] for key in SUBTASK_KEYS for i in demo_instances(key)]
TO_TRADITIONAL = opencc.OpenCC("s2t")


def cut(reference: str, k: int, n: int, rng: random.Random) -> list[str] | None:
    """``reference`` cut at random places into ``k`` pieces of at least ``n`` normalised characters each (none
    when it is too short for that)."""
    places = [i for i in range(1, len(reference)) if normalise(reference[:i]) != normalise(reference[: i - 1])]
    for _ in range(200):
        cuts = sorted(rng.sample(places, k - 1)) if len(places) >= k - 1 else None
        if cuts is None:
            return None
        pieces = [reference[a:b] for a, b in zip([0, *cuts], [*cuts, len(reference)], strict=True)]
        if all(len(normalise(piece)) >= n for piece in pieces):
            return pieces
    return None


def among_filler(piece: str, reference: str, rng: random.Random) -> str:
    """``piece`` between sentences of other references (none sharing an n-gram with this one)."""
    wanted = ngrams(normalise(reference), LEAK.ngram)
    others = [t for t in FILLER if not ngrams(normalise(t), LEAK.ngram) & wanted]
    return f"{rng.choice(others)}{piece}{rng.choice(others)}" if rng.random() < 0.8 else piece


def scattered(reference: str, k: int, rng: random.Random) -> dict | None:
    """An instance whose ``k`` fields each hold one piece of ``reference``, in a random order, with filler."""
    pieces = cut(reference, k, LEAK.ngram, rng)
    if pieces is None:
        return None
    rng.shuffle(pieces)
    fields = {f"field_{j}": among_filler(piece, reference, rng) for j, piece in enumerate(pieces)}
    return {"id": "x", "subtask": "dialogue_base", "reference": reference, "fields": fields, "flags": [],
            "provenance": {}}  # fmt: skip


def references() -> list[str]:
    """Every demo reference, and made-up ones of many lengths (with brackets, ASCII, times)."""
    rng = random.Random(7)
    made = ["".join(rng.choice("我你他的是在有个人这来们到时大地为子中说生国年着就那和要下以会可也去过")
                    for _ in range(rng.randint(8, 90))) + rng.choice(["", "（微笑）", " 08:30 Alex"])
            for _ in range(40)]  # fmt: skip
    return [*FILLER, *made]


@pytest.mark.parametrize("k", [2, 3, 4])
def test_a_reference_cut_into_pieces_over_several_fields_is_flagged(k):
    rng = random.Random(k)
    tried = 0
    for reference in references():
        for _ in range(3):
            instance = scattered(reference, k, rng)
            if instance is None:
                continue
            tried += 1
            whole = instance_overlap(instance, LEAK.ngram)
            assert whole.pieces == 1.0, (reference, instance["fields"])
            assert whole.ngram <= whole.pieces
            assert measure_leak(instance, LEAK) and "leak" in instance["flags"], (reference, instance["fields"])
            assert instance["provenance"]["leak"]["overlap"] == 1.0
    assert tried > 100  # the family is not empty: most references can be cut this way


def test_exact_halves_in_two_fields_leak_though_no_field_holds_more_than_half():
    reference = "要不要来杯咖啡呀，我陪你坐会儿好吧"  # 16 characters: two halves of 8
    fields = {"your_current_schedule": "遥斗在阳台：要不要来杯咖啡呀", "user_feedback": "我陪你坐会儿好吧（笑）"}
    instance = {"id": "x", "subtask": "itinerary_response", "reference": reference, "flags": [], "provenance": {},
                "fields": fields}  # fmt: skip
    record = leak_record(instance, LEAK)
    assert record["largest_field"] == 0.5  # what used to decide: not above 0.5
    assert record["instance"] == {"ngram": round(10 / 13, 4), "pieces": 1.0}  # 5 + 5 of the 13 grams
    assert record["leak"] and record["overlap"] == 1.0


@pytest.mark.parametrize("subtask", SUBTASK_KEYS)
def test_pieces_in_separate_texts_of_a_real_input_are_flagged(subtask):
    """The same in the subtask's own fields: each piece in a text of its own (a turn, a list item, a field),
    added where the instance has too few."""
    rng = random.Random(subtask)
    for instance in demo_instances(subtask):
        for k in (2, 3, 4):
            pieces = cut(instance["reference"], k, LEAK.ngram, rng)
            if pieces is None:
                continue
            leaked = json.loads(json.dumps(instance))
            for piece in pieces:
                name = rng.choice(sorted(leaked["fields"]))
                value = leaked["fields"][name]
                if name == "history_dialogues":
                    value.insert(rng.randint(0, len(value)), {"speaker": rng.choice(["user", "companion"]),
                                                              "text": piece})  # fmt: skip
                elif isinstance(value, list):
                    value.insert(rng.randint(0, len(value)), piece)
                else:
                    leaked["fields"][name] = f"{value}\n{among_filler(piece, instance['reference'], rng)}"
            assert measure_leak(leaked, LEAK), (instance["id"], k, pieces)


def variants(text: str, rng: random.Random) -> list[str]:
    """``text`` in traditional characters, with some of its characters traditional, and in full-width forms."""
    traditional = TO_TRADITIONAL.convert(text)
    changed = [i for i, (a, b) in enumerate(zip(text, traditional, strict=True)) if a != b]
    some = set(rng.sample(changed, min(len(changed), 8)))
    mixed = "".join(traditional[i] if i in some else c for i, c in enumerate(text))
    full_width = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)
    return [traditional, mixed, full_width, TO_TRADITIONAL.convert(full_width)]


@pytest.mark.parametrize("subtask", SUBTASK_KEYS)
def test_a_copy_in_another_script_is_still_a_copy(subtask):
    rng = random.Random(subtask)
    for instance in demo_instances(subtask):
        field = next(name for name in get_subtask(subtask).fields if name != "hobbies")
        for variant in variants(instance["reference"], rng):
            leaked = plant_leak({**instance, "reference": variant}, field=field)
            leaked["reference"] = instance["reference"]
            assert measure_leak(leaked, LEAK), (instance["id"], variant)
            # s2t then t2s is not always the identity (背 -> 揹 stays 揹), so a copy may keep a character or two
            assert leaked["provenance"]["leak"]["fields"][field]["ngram"] >= 0.9, (instance["id"], variant)


def test_traditional_characters_read_as_simplified():
    assert normalise("要不要來杯咖啡？我陪你坐會兒。") == normalise("要不要来杯咖啡？我陪你坐会儿。")
    assert normalise("ＡＬＥＸ在０８：３０發來訊息") == "ALEX在0830发来讯息"
    # every demo reference made traditional reads as itself again, but for the few characters whose traditional
    # form folds back to a variant of its own (想象 -> 想像 stays 想像; 1 character in 10,000 over the release)
    pairs = [(normalise(t), normalise(TO_TRADITIONAL.convert(t))) for t in FILLER if TO_TRADITIONAL.convert(t) != t]
    assert len(pairs) > 20 and all(len(a) == len(b) for a, b in pairs)
    differing = sum(x != y for a, b in pairs for x, y in zip(a, b, strict=True))
    assert differing <= 0.01 * sum(len(a) for a, _ in pairs)
