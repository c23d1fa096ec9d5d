"""Scoring stage commands: score (generation records), score-upstream (outputs in the upstream layout)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import add_bootstrap, add_config, load_config, overrides, same_length
from h2htalk.progress import summary


def _add_scoring(p: argparse.ArgumentParser) -> None:
    add_config(p)
    add_bootstrap(p)
    p.add_argument("--embedder", help="an embedder defined under `embedders` (default: the first of scoring.embedders)")
    p.add_argument("--tokenizer", choices=["jieba", "char"], help="lexical tokens (overrides scoring.tokenizer)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    overrides(p, tokenizer="scoring.tokenizer")


def register(sub: Any) -> None:
    p = sub.add_parser("score", help="score generation files against their references (the embedder loads once)")
    _add_scoring(p)
    p.add_argument("--generations", type=Path, nargs="+", required=True, help="JSONL of {id, response, ...}")
    p.add_argument("--references", type=Path, nargs="+", required=True, help="instances {id, reference} or {id, text}")
    p.add_argument("--out-items", type=Path, nargs="+", required=True, help="per-item scores (JSONL), one per file")
    p.add_argument("--out-summary", type=Path, nargs="+", required=True, help="summaries with bootstrap CIs (JSON)")
    p.add_argument("--model", help="label the scores with this model (default: what the generation records say)")
    p.add_argument("--variant", help="label the scores with this variant (default: the records')")
    p.add_argument("--subtask", help="label the scores with this subtask (default: the records')")
    p.set_defaults(handler=cmd_score)

    p = sub.add_parser("score-upstream", help="score outputs in the upstream layout, matched by line order")
    _add_scoring(p)
    p.add_argument("outputs_dir", type=Path, help='folder with one {"response": ...} JSONL per upstream file name')
    p.add_argument("--references", type=Path, required=True, help="folder with the 11 upstream reference files")
    p.add_argument("--out", type=Path, required=True, help="CSV, one row per subtask")
    p.add_argument("--items", type=Path, help="also write per-item scores to this JSONL")
    p.set_defaults(handler=cmd_score_upstream)


def _setup(args: argparse.Namespace) -> Any:
    from h2htalk.metrics.score_files import ScoringSetup

    return ScoringSetup.from_config(load_config(args), args.embedder, cache=not args.no_cache)


def cmd_score(args: argparse.Namespace) -> int:
    from h2htalk.metrics.score_files import score_generation_file

    same_length(args, "generations", "references", "out_items", "out_summary")
    setup = _setup(args)
    labels = {key: getattr(args, key) for key in ("model", "variant", "subtask") if getattr(args, key)}
    files = zip(args.generations, args.references, args.out_items, args.out_summary, strict=True)
    summaries = [score_generation_file(g, r, i, s, setup, labels) for g, r, i, s in files]
    means = ", ".join(f"{s['S']:.2f}" for s in summaries[:11])
    summary(
        f"scored {len(summaries)} files, {sum(s['n'] for s in summaries)} items (S {means}) with {setup.embedder.name}"
    )
    return 0


def cmd_score_upstream(args: argparse.Namespace) -> int:
    from h2htalk.metrics.score_files import score_upstream

    setup = _setup(args)
    rows = score_upstream(args.outputs_dir, args.references, args.out, setup, out_items=args.items)
    for row in rows:
        print(f"{row['subtask']:<28} n={row['n']:>5}  S={row['S']:6.2f}")
    print(f"-> {args.out} ({setup.embedder.name})")
    return 0
