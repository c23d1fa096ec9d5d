"""The judges and the persona kept apart: no judge prompt shares a phrase of MIN_SHARED characters with sap.md."""

from __future__ import annotations

import pytest

from h2htalk.judge.overlap import MIN_SHARED, judge_prompts, normalise, sap_overlap, shared_phrases


def test_shared_phrases_are_the_runs_of_shared_ngrams_after_folding():
    assert normalise("别想太多！ＡＢ c\u3000d") == "别想太多abcd"
    judge = "回答里说“别想太多”，还许下做不到的承诺。"
    persona = "不说“别想太多”；不许下做不到的承诺，比如……"
    assert shared_phrases(judge, persona) == ["许下做不到的承诺", "说别想太多"]  # punctuation does not part them
    assert shared_phrases(judge, persona, 6) == ["许下做不到的承诺"]
    assert shared_phrases("心理援助热线", "心理危机热线") == []  # "心理" and "热线" alone are shorter than 4
    assert shared_phrases("abcxabcd", "zabcdz", 3) == ["abcd", "abc"]  # each run once, longest first
    assert shared_phrases("短", "短") == []


def test_every_judge_of_the_models_answers_is_measured():
    prompts = judge_prompts()
    assert set(prompts) == {"rubric judge", "safety judge", "needs judge"}
    assert "dismissing" in prompts["safety judge"] and "【对话】" in prompts["safety judge"]
    assert "【参考答案】" in prompts["rubric judge"] and "{{" not in prompts["rubric judge"]


@pytest.mark.parametrize("judge", ["rubric judge", "safety judge", "needs judge"])
def test_no_judge_prompt_shares_a_phrase_with_the_sap_layer(judge):
    assert sap_overlap(MIN_SHARED)[judge] == [], f"{judge} shares these phrases with sap.md"
