"""Figures 4-6: the numbers behind each figure on a fixture, the font, and the written files."""

from __future__ import annotations

import csv

import pytest

from h2htalk.figures.plots import (
    figure4_wordcloud,
    figure5_verb_noun,
    figure6_lengths,
    find_cjk_font,
    input_texts,
    missing_glyphs,
)
from h2htalk.figures.stats import describe_lengths, strip_layout, token_lengths, verb_noun_pairs, word_frequencies
from h2htalk.io import write_jsonl_atomic

TEXTS = [
    "（轻轻放下咖啡杯）今天我们去公园散步吧。",
    "（轻轻放下咖啡杯）公园的樱花开了。",
    "我们一起听音乐，然后去公园散步。",
    "记忆内容：喜欢听音乐。\n记忆类别：娱乐\n记忆重要性：1",
    "未提取到关键信息。",
]


@pytest.fixture(scope="module")
def font():
    return find_cjk_font()


def test_word_counts_on_a_fixture():
    counts = word_frequencies(TEXTS)
    assert counts["公园"] == 3
    assert counts["轻轻"] == 2 and counts["咖啡杯"] == 2
    assert counts["散步"] == 2 and counts["音乐"] == 2
    # stop words, single characters and the references' own layout labels are not counted
    for absent in ("我们", "的", "吧", "内容", "类别", "重要性", "提取", "关键", "信息"):
        assert absent not in counts, absent
    assert strip_layout("记忆内容：喜欢猫") == " 喜欢猫"


def test_top_verb_noun_pairs_on_a_fixture():
    pairs, method = verb_noun_pairs(TEXTS, prefer_spacy=False)
    assert pairs[("放下", "咖啡杯")] == 2
    assert pairs[("听", "音乐")] == 2
    assert pairs.most_common(2)[0][1] == 2
    assert method.startswith("jieba part-of-speech tags")


def test_lengths_on_a_fixture():
    # jieba (pinned): 我爱你 is one word; 今天/天气/很/好; spaces are not tokens
    assert token_lengths(["我爱你", "今天 天气 很好", "你好"]) == [1, 4, 1]
    stats = describe_lengths([2, 4, 9])
    assert stats == {"n": 3, "mean": 5.0, "median": 4.0, "min": 2, "max": 9}


def test_inputs_are_the_instances_fields(tmp_path):
    path = tmp_path / "i.jsonl"
    dialogue = [{"speaker": "user", "text": "你好"}, {"speaker": "companion", "text": "嗨"}]
    write_jsonl_atomic(path, [
        {"fields": {"history_dialogues": dialogue}},
        {"fields": {"hobbies": ["摄影", "咖啡"], "history_memory": "喜欢老建筑"}},
    ])  # fmt: skip
    assert input_texts([path]) == ["你好\n嗨", "摄影\n咖啡\n喜欢老建筑"]


def test_font_has_every_glyph_the_figures_draw(font):
    words = "".join(word_frequencies(TEXTS))
    assert missing_glyphs(font, words + "放下咖啡杯听音乐") == set()
    assert missing_glyphs("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "咖啡") == {"咖", "啡"}


def test_figures_are_written_with_their_numbers(tmp_path, font):
    outputs = TEXTS * 3
    inputs = ["你好呀", "今天去哪里玩"]
    counts = figure4_wordcloud(outputs, font, tmp_path / "f4.png", tmp_path / "f4.csv", top=20)
    rows = list(csv.DictReader((tmp_path / "f4.csv").open(encoding="utf-8")))
    assert rows[0]["word"] == "公园" and int(rows[0]["count"]) == counts["公园"] == 9
    figure5_verb_noun(outputs, font, tmp_path / "f5.png", tmp_path / "f5.csv", top=5)
    pairs = list(csv.DictReader((tmp_path / "f5.csv").open(encoding="utf-8")))
    assert {(r["verb"], r["noun"]) for r in pairs[:2]} == {("放下", "咖啡杯"), ("听", "音乐")}
    assert pairs[0]["method"].startswith("jieba")
    stats = figure6_lengths(inputs, outputs, font, tmp_path / "f6.png", tmp_path / "f6.csv")
    assert stats["inputs"]["n"] == 2 and stats["outputs"]["n"] == 15
    summary = [r for r in csv.DictReader((tmp_path / "f6.csv").open(encoding="utf-8")) if r["tokens"] == "summary"]
    assert float(summary[0]["mean"]) == pytest.approx(stats["inputs"]["mean"])
    for name in ("f4.png", "f5.png", "f6.png"):
        assert (tmp_path / name).stat().st_size > 5_000
