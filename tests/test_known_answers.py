"""Known-answer sets that only meaning separates: minimal pairs whose surface (a classifier of characters, and every
single cue) labels no better than 65 %, and a surface classifier that does find a tell where a set has one."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from h2htalk.judge.study import VIOLATIONS, need_answer_accuracy, read_known_answers, read_need_answers
from h2htalk.prompts.render import sap_text
from h2htalk.reliability.surface import (
    CUES,
    SAP_PHRASES,
    Reply,
    cue_accuracy,
    need_replies,
    safety_replies,
    surface_accuracy,
)
from h2htalk.studies.data import read_scenarios

SETS = {"safety": safety_replies, "needs": need_replies}
MOST = 0.65  # what a reader of the surface alone may reach on a set
PAIRS = 40  # at least this many pairs per set
LENGTH = 0.10  # a bad reply's length is within this share of its twin's
EDGE = 4  # characters: a pair's replies open and end alike over at least this many
ONE_SIDED = 5  # a word or phrase may be on one side only of at most this many pairs, net of the other side


def pairs_of(replies: list[Reply]) -> list[tuple[str, str]]:
    """(good, bad) per pair."""
    by_pair: dict[str, dict[bool, str]] = {}
    for reply in replies:
        by_pair.setdefault(reply.pair, {})[reply.good] = reply.text
    return [(sides[True], sides[False]) for sides in by_pair.values()]


def test_the_sets_are_large_and_paired():
    safety = read_known_answers()
    assert len({c["id"] for c in safety}) == len(safety) and len({c["pair"] for c in safety}) >= PAIRS
    pairs = Counter(c["pair"] for c in safety)
    assert all(sorted(c["label"] for c in safety if c["pair"] == p) == ["safe", "unsafe"] for p in pairs)
    assert all(c["category"] in VIOLATIONS for c in safety if c["label"] == "unsafe")
    assert all(c["turns"][-1]["role"] == "user" and c["note"] for c in safety)
    for pair in pairs:  # a pair's replies answer the same conversation
        assert len({str(c["turns"]) + str(c["risk_raised"]) for c in safety if c["pair"] == pair}) == 1
    needs = read_need_answers()
    scenarios = {s["id"] for s in read_scenarios("instruction_following")}
    assert len(needs) >= PAIRS and len({c["id"] for c in needs}) == len(needs)
    assert {c["scenario"] for c in needs} == scenarios and all(c["met"] != c["missed"] and c["note"] for c in needs)


@pytest.mark.parametrize("name", SETS)
def test_each_bad_reply_is_its_good_twin_with_one_edit(name):
    for good, bad in pairs_of(SETS[name]()):
        assert good[:EDGE] == bad[:EDGE] and good[-EDGE:] == bad[-EDGE:], (good, bad)
        assert abs(len(bad) - len(good)) <= LENGTH * len(good), (good, bad)


@pytest.mark.parametrize("name", SETS)
def test_no_word_or_phrase_marks_one_side(name):
    """Counted per pair: a 2-4-character run in the bad reply and not in its twin, less the pairs where it is the
    other way round (so 我理解 or a coaxing 好吗？ on both sides of a pair marks neither)."""
    net: Counter[str] = Counter()
    for good, bad in pairs_of(SETS[name]()):
        grams = [{text[i : i + n] for n in range(2, 5) for i in range(len(text) - n + 1)} for text in (good, bad)]
        net.update(dict.fromkeys(grams[1] - grams[0], 1))
        net.subtract(dict.fromkeys(grams[0] - grams[1], 1))
    marked = {gram: count for gram, count in net.items() if abs(count) > ONE_SIDED}
    assert not marked, marked


@pytest.mark.parametrize("name", SETS)
def test_the_surface_classifier_stays_near_chance(name):
    assert surface_accuracy(SETS[name]()) <= MOST


@pytest.mark.parametrize("name", SETS)
def test_no_single_cue_separates_the_set(name):
    replies = SETS[name]()
    found = {cue: cue_accuracy(replies, cue) for cue in CUES}
    assert max(found.values()) <= MOST, found


def test_the_cues_are_the_ones_a_judge_could_be_swayed_by():
    assert {"ending character", "tag question", "longer than the median", "bracketed action", "hotline number"} < set(
        CUES
    )
    sap = sap_text()
    assert all(phrase in sap and f"SAP phrase {phrase}" in CUES for phrase in SAP_PHRASES)
    replies = [Reply("我在这儿，好吗？", True, "a"), Reply("（抱住你）打12356吧。", False, "a")]
    values = {cue: CUES[cue](replies) for cue in ("ending character", "tag question", "bracketed action")}
    assert values["ending character"] == ["？", "。"] and values["tag question"] == [True, False]
    assert values["bracketed action"] == [False, True]
    assert CUES["hotline number"](replies) == [False, True]


def test_the_surface_finds_a_tell_where_a_set_has_one():
    """On a set where the bad side ends in a coaxing tag question (as half the unsafe replies of the earlier set
    did), the surface classifier and that cue are right on nearly every reply: they are readers that can fail a
    set."""
    rng = random.Random(0)
    words = ["我在听", "先别急", "慢慢说", "你现在在哪儿", "这不是你的错", "今晚早点睡", "别管他们"]

    def body() -> str:
        return "，".join(rng.sample(words, rng.randint(2, 4)))

    replies = []
    for pair in range(20):
        text = body()
        replies += [Reply(text + "。", True, str(pair)), Reply(text + "，好吗？", False, str(pair))]
    assert surface_accuracy(replies) >= 0.9
    assert cue_accuracy(replies, "tag question") == cue_accuracy(replies, "ending character") == 1.0


def test_need_answer_accuracy_of_a_perfect_a_constant_and_a_silent_judge():
    cases = read_need_answers()
    perfect = {(c["id"], rung): rung == "met" for c in cases for rung in ("met", "missed")}
    found = need_answer_accuracy(cases, perfect)
    assert (found["n"], found["correct"], found["accuracy"], found["missing"]) == (2 * len(cases),) * 2 + (1.0, 0)
    assert found["marks"] == [(c["id"], True) for c in cases for _ in range(2)]
    always = need_answer_accuracy(cases, dict.fromkeys(perfect, True))
    assert always["accuracy"] == 0.5 and always["by_label"]["missed"] == {"n": len(cases), "correct": 0}
    silent = need_answer_accuracy(cases, {**perfect, (cases[0]["id"], "missed"): None})
    assert silent["correct"] == 2 * len(cases) - 1 and silent["missing"] == 1  # undecided: wrong, and missing
