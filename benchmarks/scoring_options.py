"""What the two scoring choices the paper leaves open do to the numbers, measured on the release.

    python benchmarks/scoring_options.py --references /path/to/H2HTalk/data [--seed 0]

Pairs: every released reference (4,589) against a seeded shuffle of the references of its subtask (the
random-reference baseline's answers: real texts, with the release's own spacing). For each subtask it prints
the mean BLEU-1 and BLEU-4 with whitespace tokens dropped (the default) and kept (upstream's
``list(jieba.cut())``), the largest change of one pair's BLEU-1, and the mean ROUGE-1 and ROUGE-L as F-measure
(default, the upstream code) and as recall (the paper's text). All on 0 to 100. Nothing is asserted; the
figures go into the README.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from metric_engine import load_pairs  # the same pairs as the metric engine benchmark

from h2htalk.scoring.lexical import bleu_1_to_4, rouge_1_l
from h2htalk.scoring.tokenizers import get_tokenizer
from h2htalk.subtasks import SUBTASKS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--references", required=True, type=Path, help="folder with the 11 upstream files")
    parser.add_argument("--seed", type=int, default=0)
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


if __name__ == "__main__":
    main()
