"""Curation: normalisation, stable ids, flags (never deletions), anonymisation and the safety screen."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from h2htalk.config import default_config
from h2htalk.data.anonymise import anonymise, id_card_checksum_ok, jieba_name_finder
from h2htalk.data.curate import FLAGS, curate_lines, curate_subtask, record_id
from h2htalk.data.fetch import fetch_release
from h2htalk.data.screen import load_quality_rules, load_safety_lexicon
from h2htalk.errors import DataError
from h2htalk.io import read_jsonl
from h2htalk.settings import CurateOptions, UpstreamSource
from h2htalk.subtasks import get_subtask

SOURCE = {"file": "x.jsonl", "commit": "0" * 40, "sha256": "0" * 64}
NO_NAMES = CurateOptions.from_config(default_config({"data": {"curate": {"anonymise": {"person_name": "ignore"}}}}))


def release(texts: list[str], bom: bool = False, crlf: bool = True) -> bytes:
    end = "\r\n" if crlf else "\n"
    body = end.join(json.dumps({"response": t}, ensure_ascii=False) for t in texts) + end
    return ("\ufeff" if bom else "").encode("utf-8") + body.encode("utf-8")


def curate_texts(texts: list[str], options: CurateOptions = NO_NAMES, **kwargs):
    subtask = replace(get_subtask("dialogue_emotion"), released=len(texts))
    return curate_lines(subtask, release(texts, **kwargs), options, SOURCE)


def test_bom_crlf_nfc_and_trim():
    decomposed = "cafe\u0301"  # e + combining acute: NFC composes it to é
    records, _ = curate_texts([f"  （微笑）{decomposed}  ", "第二行\t"], bom=True)
    assert records[0]["text"] == "（微笑）café"
    assert records[1]["text"] == "第二行"
    assert [r["id"] for r in records] == ["dialogue_emotion-00001", "dialogue_emotion-00002"]
    assert [r["source"]["line"] for r in records] == [1, 2]


def test_text_otherwise_unchanged():
    text = '（轻轻捧起你的脸）"完美不是被爱的原因，真实才是。"\n第二段……'
    records, _ = curate_texts([text], crlf=False)
    assert records[0]["text"] == text
    assert records[0]["flags"] == [] and records[0]["kept"]


def test_ids_are_stable_and_follow_upstream_lines():
    assert record_id("dialogue_base", 7) == "dialogue_base-00007"
    first, _ = curate_texts(["甲", "乙", "丙"])
    second, _ = curate_texts(["甲", "乙", "丙"])
    assert [r["id"] for r in first] == [r["id"] for r in second]


def test_flags_are_flags_never_deletions():
    texts = [
        "未提取到关键信息。",
        "（抱歉，这个输入与我的角色设定不符。作为竹内遥斗，我会这样表达：）\n\n今天在事务所……",
        "改写后：\n我正在准备毕业论文和找工作，有点小烦恼呢~",
        "（微笑）你好呀",
        "（微笑）你好呀",
        "   ",
        "他妈的，别烦我",
    ]
    records, report = curate_texts(texts)
    assert len(records) == len(texts) == report["released"]
    flags = [r["flags"] for r in records]
    assert flags[0] == ["filler"]
    assert flags[1] == ["meta_refusal"]
    assert flags[2] == ["leftover_instruction"]
    assert flags[3] == []
    assert flags[4] == ["duplicate"] and records[4]["duplicate_of"] == records[3]["id"]
    assert flags[5] == ["empty"]
    assert flags[6] == ["sensitive"] and records[6]["sensitive"] == ["offensive"]
    # default exclusions: empty, meta_refusal, leftover_instruction, sensitive
    assert [r["kept"] for r in records] == [True, False, False, True, True, False, False]
    assert report["kept"] == 3
    assert report["flags"] == {
        "empty": 1,
        "filler": 1,
        "meta_refusal": 1,
        "leftover_instruction": 1,
        "duplicate": 1,
        "sensitive": 1,
        "pii": 0,
    }
    assert set(report["flags"]) == set(FLAGS)
    assert report["flagged_ids"]["duplicate"] == ["dialogue_emotion-00005"]


def test_exclusion_list_is_configurable():
    options = replace(NO_NAMES, exclude_flags=("filler", "duplicate"))
    records, report = curate_texts(["未提取到关键信息。", "好", "好"], options)
    assert [r["kept"] for r in records] == [False, True, False]
    assert report["options"]["exclude_flags"] == ["filler", "duplicate"]


def test_in_character_apologies_are_not_meta():
    rules = load_quality_rules()
    assert rules.flags('"抱歉，是我考虑不周...下次我会记得你不喜欢菠萝，要试试我改良的经典配方吗？"') == []
    assert rules.flags('（虽然这不是竹内遥斗的日程，但根据角色设定可以这样回应）"今天……"') == ["meta_refusal"]
    assert rules.flags("作为一个AI，我无法回答这个问题。") == ["meta_refusal"]
    assert rules.flags("（注：根据规则，我将以第一人称可爱语调重写）\n\n我觉得晚餐好难选呀") == ["leftover_instruction"]


def test_safety_lexicon_matches_words_not_substrings():
    lexicon = load_safety_lexicon()
    assert lexicon.categories("今天，艾米和莱姆穿上蓝色情侣装，一起探索美食的乐趣。") == []
    assert lexicon.categories("19:00 窗台独赏夜景") == []
    assert lexicon.categories("你这个傻逼") == ["offensive"]
    assert lexicon.categories("他们在讨论共产党的历史") == ["political"]
    assert lexicon.categories("我今天好难过，想哭") == []


def test_structured_identifiers_are_replaced_and_counted():
    text = (
        "我的电话是13812345678，座机010-12345678，邮箱 ming.li@example.com，"
        "身份证11010519491231002X，主页 https://example.com/me?x=1 见。"
    )
    assert id_card_checksum_ok("11010519491231002X")
    result = anonymise(text, {"phone": "replace", "email": "replace", "id_card": "replace", "url": "replace"})
    assert result.text == "我的电话是[PHONE]，座机[PHONE]，邮箱 [EMAIL]，身份证[ID]，主页 [URL] 见。"
    assert dict(result.counts) == {"phone": 2, "email": 1, "id_card": 1, "url": 1}


def test_id_card_needs_a_valid_checksum():
    result = anonymise("编号110105194912310021", {"id_card": "replace", "phone": "replace"})
    assert result.text == "编号110105194912310021"
    assert "id_card" not in result.counts


def test_flag_mode_counts_without_changing_text():
    text = "联系我 13812345678"
    result = anonymise(text, {"phone": "flag"})
    assert result.text == text and result.counts["phone"] == 1


def test_person_names_exclude_the_persona():
    finder = jieba_name_finder(["竹内遥斗", "竹内", "遥斗"])
    text = "竹内遥斗和艾米丽一起去公园，莎莎也来了。"
    names = finder(text)
    assert "竹内遥斗" not in names and "竹内" not in names
    assert "艾米丽" in names
    replaced = anonymise(text, {"person_name": "replace"}, finder)
    assert "竹内遥斗" in replaced.text and "艾米丽" not in replaced.text
    assert "[NAME]" in replaced.text


def test_pii_flag_and_record_counts():
    options = replace(NO_NAMES, anonymise={**NO_NAMES.anonymise, "person_name": "flag"})
    records, report = curate_texts(["（微笑）艾米丽今天来找我了。", "你好，打给我 13812345678"], options)
    assert records[0]["flags"] == ["pii"] and records[0]["pii"] == {"person_name": 1}
    assert "艾米丽" in records[0]["text"]  # flag mode: text unchanged
    assert records[1]["text"] == "你好，打给我 [PHONE]"
    assert report["pii"]["phone"] == 1 and report["pii"]["person_name"] == 1


def test_malformed_line_names_file_and_line():
    subtask = replace(get_subtask("dialogue_emotion"), released=2)
    data = b'{"response": "ok"}\r\n{"response": 5}\r\n'
    with pytest.raises(DataError, match=r"dialogue_emotion\.jsonl: line 2: 'response' must be a string \(int\)"):
        curate_lines(subtask, data, NO_NAMES, SOURCE)


def test_curate_checks_the_manifest_checksum(synthetic_release, tmp_path):
    source = replace(UpstreamSource.from_config(default_config()), commit="a" * 40, url_template="unused/{file}")
    up, manifest = tmp_path / "up", tmp_path / "manifest.json"
    fetch_release(up, manifest, source, upstream_dir=synthetic_release)
    upstream = [str(up / "dialogue_schedule.jsonl")]
    out, rep = str(tmp_path / "c.jsonl"), str(tmp_path / "c.json")
    done = curate_subtask("itinerary_initialization", upstream, str(manifest), out, rep, NO_NAMES)
    records, report = read_jsonl(out), json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    assert len(records) == report["released"] == 76
    assert done.subject == "itinerary_initialization" and done.facts.startswith("76 released")
    assert records[0]["source"] == {
        "file": "dialogue_schedule.jsonl",
        "commit": "a" * 40,
        "sha256": records[0]["source"]["sha256"],
        "line": 1,
    }
    (up / "dialogue_schedule.jsonl").write_bytes(b'{"response": "tampered"}\r\n' * 76)
    with pytest.raises(DataError, match="differs from the manifest"):
        curate_subtask("itinerary_initialization", upstream, str(manifest), out, rep, NO_NAMES)
