"""Figures 4-6: the numbers behind each figure on a fixture, the font, and the written files."""

from __future__ import annotations

import csv
import warnings
from importlib.metadata import distribution
from pathlib import Path

import matplotlib
import pytest
from fontTools.ttLib import TTFont

from h2htalk.errors import H2HTalkError
from h2htalk.figures import FIGURE_NAMES, plots
from h2htalk.figures.plots import (
    FONT_DIRS_ENV,
    figure4_wordcloud,
    figure5_verb_noun,
    figure6_lengths,
    find_cjk_font,
    input_texts,
    missing_glyphs,
    packaged_cjk_font,
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


# matplotlib's own copy: a font with no Chinese glyph, on every machine
DEJAVU = str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")


@pytest.fixture(scope="module")
def font():
    return find_cjk_font()


@pytest.fixture
def no_system_fonts(tmp_path, monkeypatch):
    """The system font search pointed at an empty folder: only the packaged font is left."""
    empty = tmp_path / "no-fonts"
    empty.mkdir()
    monkeypatch.setenv(FONT_DIRS_ENV, str(empty))
    return empty


def drawn_as_boxes(text: str, font_path: str) -> set[str]:
    """Characters of ``text`` that the font's cmap maps to no glyph, or to .notdef (the box)."""
    cmap = TTFont(font_path, fontNumber=0, lazy=True).getBestCmap()
    return {ch for ch in set(text) if not ch.isspace() and cmap.get(ord(ch), ".notdef") == ".notdef"}


def glyph_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "missing from font" in str(w.message)]


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
    assert missing_glyphs(DEJAVU, "咖啡") == {"咖", "啡"}


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
    panels = {"inputs": ("Inputs", inputs), "outputs": ("Outputs", outputs)}
    stats = figure6_lengths(panels, font, tmp_path / "f6.png", tmp_path / "f6.csv")
    assert stats["inputs"]["n"] == 2 and stats["outputs"]["n"] == 15
    summary = [r for r in csv.DictReader((tmp_path / "f6.csv").open(encoding="utf-8")) if r["tokens"] == "summary"]
    assert float(summary[0]["mean"]) == pytest.approx(stats["inputs"]["mean"])
    for name in ("f4.png", "f5.png", "f6.png"):
        assert (tmp_path / name).stat().st_size > 5_000


def test_auto_uses_the_packaged_font_when_no_system_font_is_found(no_system_fonts, monkeypatch):
    packaged = packaged_cjk_font()
    installed = distribution("pylopdf-fonts-zh-cn").locate_file("pylopdf_fonts_zh_cn/NotoSansSC-Regular.otf")
    assert packaged is not None and Path(packaged) == Path(installed)
    assert find_cjk_font("auto") == packaged
    assert find_cjk_font() == packaged
    monkeypatch.delenv(FONT_DIRS_ENV)
    assert find_cjk_font("auto", font_dirs=[no_system_fonts]) == packaged  # the parameter, not the variable


def test_the_packaged_font_draws_the_figures_chinese_not_boxes(no_system_fonts, tmp_path):
    font = find_cjk_font("auto")
    assert font == packaged_cjk_font()
    outputs = TEXTS * 3
    inputs = ["你好呀", "今天去哪里玩"]
    drawn = "".join(word_frequencies(outputs + inputs)) + "放下咖啡杯听音乐公园散步樱花"
    assert drawn_as_boxes(drawn, font) == set()
    assert missing_glyphs(font, drawn) == set()
    assert drawn_as_boxes("咖啡", DEJAVU) == {"咖", "啡"}  # the check can see boxes
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figure4_wordcloud(outputs + inputs, font, tmp_path / "f4.png", tmp_path / "f4.csv", top=20)
        figure5_verb_noun(outputs + inputs, font, tmp_path / "f5.png", tmp_path / "f5.csv", top=5)
        figure6_lengths({"inputs": ("输入", inputs)}, font, tmp_path / "f6.png", tmp_path / "f6.csv")
        plt = plots._pyplot(font)  # matplotlib warns for each glyph it has to draw as a box
        fig, ax = plt.subplots()
        ax.set_title("".join(sorted(set(drawn))))
        fig.canvas.draw()
        plt.close(fig)
    assert glyph_warnings(caught) == []
    for name in ("f4.png", "f5.png", "f6.png"):
        assert (tmp_path / name).stat().st_size > 5_000
    with warnings.catch_warnings(record=True) as caught:  # and the same check sees boxes in a Latin-only font
        warnings.simplefilter("always")
        plt = plots._pyplot(DEJAVU)
        fig, ax = plt.subplots()
        ax.set_title("咖啡")
        fig.canvas.draw()
        plt.close(fig)
    assert glyph_warnings(caught)


def test_a_cjk_font_in_the_searched_folders_comes_before_the_packaged_one(no_system_fonts):
    packaged = packaged_cjk_font()
    (no_system_fonts / "fake-hei.ttf").write_bytes(Path(DEJAVU).read_bytes())  # named like one, no glyphs
    assert find_cjk_font("auto") == packaged
    system = no_system_fonts / "sub" / "NotoSansCJK-Regular.otf"
    system.parent.mkdir()
    system.symlink_to(packaged)
    assert find_cjk_font("auto") == str(system)


def test_an_explicit_font_file(tmp_path):
    packaged = packaged_cjk_font()
    assert find_cjk_font(packaged) == packaged
    missing = tmp_path / "nope" / "NoSuchFont.otf"
    with pytest.raises(H2HTalkError, match=r"figures\.cjk_font .*NoSuchFont\.otf.* is not a file.*or to auto"):
        find_cjk_font(str(missing))
    with pytest.raises(H2HTalkError, match="lacks Chinese glyphs"):
        find_cjk_font(DEJAVU)


def test_no_font_anywhere_is_a_clear_error(no_system_fonts, monkeypatch):
    monkeypatch.setattr(plots, "PACKAGED_FONT", ("no-such-font-dist", "no_such_font_package", "X.otf"))
    with pytest.raises(H2HTalkError) as error:
        find_cjk_font("auto")
    message = str(error.value)
    assert message.startswith("no CJK font found")
    assert str(no_system_fonts) in message and FONT_DIRS_ENV in message  # what was searched
    assert "no-such-font-dist, which is not installed" in message
    assert "pip install -e ." in message and "apt-get install fonts-noto-cjk" in message  # how to fix it


def _demo_run(tmp_path):
    """Curated references (one not kept) and instance files, as a results tree holds them."""
    curated = tmp_path / "curated.jsonl"
    write_jsonl_atomic(curated, [
        {"text": "（微笑）今天我们去公园散步吧。", "kept": True},
        {"text": "我们一起去公园听音乐。", "kept": True},
        {"text": "请重新生成：这一句与设定不符。", "kept": False},
    ])  # fmt: skip
    instances = tmp_path / "instances.jsonl"
    write_jsonl_atomic(instances, [{"fields": {"hobbies": ["摄影", "天文望远镜"]}, "reference": "周末去看星星吧。"}])
    return [curated], [instances]


def test_figures_4_and_5_draw_the_release_and_figure_6_keeps_every_source_in_its_own_panel(tmp_path, monkeypatch):
    curated, instances = _demo_run(tmp_path)
    titles = {}
    monkeypatch.setattr(plots, "_save", lambda fig, path: titles.update({path.stem: _titles(fig)}))
    settings = {"cjk_font": "auto", "top_words": 10, "top_pairs": 5}
    config = {"figures": settings, "instances": {"source": "demo", "limit": None}, "subtasks": ["dialogue_base"]}
    note = "Demo instances, 3 per subtask: a check of the pipeline, not a finding."  # the demo run's note
    for number, name in FIGURE_NAMES.items():
        files = {suffix: tmp_path / f"f{number}.{suffix}" for suffix in ("png", "csv")}
        done = plots.draw_figure(name, curated, instances, config, files)
        assert done.subject == str(number) and "->" not in done.facts  # where it went: from its declaration
    words = {r["word"]: int(r["count"]) for r in csv.DictReader((tmp_path / "f4.csv").open(encoding="utf-8"))}
    assert words["公园"] == 2 and "天文望远镜" not in words and "重新" not in words  # kept references only
    assert "the released references kept by curation (2 texts" in titles["f4"]
    assert "the released references kept by curation (2 texts)" in titles["f5"]
    panels = [r for r in csv.DictReader((tmp_path / "f6.csv").open(encoding="utf-8")) if r["tokens"] == "summary"]
    assert {r["panel"]: int(r["count"]) for r in panels} == {"inputs": 1, "outputs": 1, "released": 2}
    for label in ("Inputs: demo instances (n=1)", "Outputs: the references of the same demo instances (n=1)",
                  "Outputs: the released references kept by curation (n=2)", note):  # fmt: skip
        assert label in titles["f6"], label
    assert note not in titles["f4"] + titles["f5"]  # built from the release alone, the same in any run


def _titles(fig) -> str:
    """Every title of a figure: its own and its axes'."""
    own = fig._suptitle.get_text() if fig._suptitle is not None else ""
    return "\n".join([own, *(ax.get_title() for ax in fig.axes)])


def test_figure_7_says_when_its_run_is_a_demo(tmp_path, monkeypatch):
    from h2htalk.figures import fig7

    titles = []
    monkeypatch.setattr(fig7, "write_png_atomic", lambda fig, path, **_: titles.append(_titles(fig)))
    rows = [
        {"model": "m", "variant": "sap", "scenario_type": t, "n": 2, "missing": 0, "success_rate": 50.0,
         "ci_low": 0.0, "ci_high": 100.0}
        for t in ("implicit_help", "ambiguous", "context_aware")
    ]  # fmt: skip
    note = "Demo instances, 3 per subtask: a check of the pipeline, not a finding."
    fig7.write_fig7(rows, tmp_path / "f7.png", tmp_path / "f7.csv", 0.95, [note])
    fig7.write_fig7(rows, tmp_path / "f7.png", tmp_path / "f7.csv", 0.95)
    assert note in titles[0] and note not in titles[1]


def test_a_figure_listed_but_not_drawn_says_so_not_drawn_as_another(monkeypatch, tmp_path):
    from h2htalk.config import default_config

    monkeypatch.setitem(plots.FIGURE_NAMES, 7, "fig7_new")
    outputs = {"png": str(tmp_path / "fig7_new.png"), "csv": str(tmp_path / "fig7_new.csv")}
    with pytest.raises(H2HTalkError, match=r"^Figure 7 \(fig7_new\) is listed \(figures\.FIGURES\), but draw_figure"):
        plots.draw_figure("fig7_new", [], [], default_config(), outputs)
    assert not any(tmp_path.iterdir())
