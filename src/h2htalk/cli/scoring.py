"""Scoring stage commands: score (a model's cells), score-upstream (outputs in the upstream layout)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import (
    REGISTRY_READS,
    add_bootstrap,
    add_command,
    add_results,
    embedder_settings,
    load_config,
    overrides,
    registry_entry,
)
from h2htalk.progress import summary
from h2htalk.subtasks import SUBTASK_KEYS, SUBTASKS

SCORE_READS = ("scoring", "embedders", "subtasks", "variants", *REGISTRY_READS)


def _add_scoring(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    p.add_argument("--tokenizer", choices=["jieba", "char"], help="lexical tokens (overrides scoring.tokenizer)")
    p.add_argument("--cache-dir", help="the embedding cache's folder (overrides scoring.cache_dir)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    overrides(p, tokenizer="scoring.tokenizer", cache_dir="scoring.cache_dir")


def register(sub: Any) -> None:
    p = add_command(sub, "score", cmd_score, "score every Table 2 cell of one model with one embedder", SCORE_READS)
    add_results(p)
    _add_scoring(p)
    p.add_argument("--model", required=True, help="registry name")
    p.add_argument("--embedder", required=True, help="an embedder defined under `embedders`")

    p = add_command(
        sub, "score-studies", cmd_score_studies,
        "score the safety study's answers of every study model against the safe references, with one embedder",
        reads=("scoring", "embedders", "variants", "studies.models", "models"),
    )  # fmt: skip
    add_results(p)
    _add_scoring(p)
    p.add_argument("--embedder", required=True, help="an embedder defined under `embedders`")

    p = add_command(
        sub, "score-upstream", cmd_score_upstream,
        "score outputs in the upstream layout, matched by line order, against the references curation keeps",
        reads=("scoring", "embedders", "data.curate"),
    )  # fmt: skip
    _add_scoring(p)
    p.add_argument(
        "outputs_dir", type=Path,
        help='folder with one {"response": ...} JSONL per upstream file name; the subtasks whose file is there are '
        "scored",
    )  # fmt: skip
    p.add_argument("--subtasks", nargs="+", choices=SUBTASK_KEYS, metavar="SUBTASK",
                   help="score only these subtasks (their files must be there)")  # fmt: skip
    p.add_argument("--references", type=Path, required=True, help="folder with the 11 upstream reference files")
    p.add_argument("--embedder", help="an embedder defined under `embedders` (default: the first of scoring.embedders)")
    p.add_argument("--out", type=Path, required=True, help="CSV, one row per subtask")
    p.add_argument("--items", type=Path, help="also write per-item scores to this JSONL")


def cmd_score(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells

    config = load_config(args)
    registry_entry(config, args.model)  # a name the registry knows
    cells = RunCells(config).scoring(args.model, args.embedder)
    return _score(args, config, cells, f"{args.model} with {args.embedder}")


def cmd_score_studies(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells

    config = load_config(args)
    return _score(args, config, RunCells(config).study_scoring(args.embedder), f"safety study with {args.embedder}")


def _score(args: argparse.Namespace, config: dict[str, Any], cells: list[Any], subject: str) -> int:
    """Score ``cells`` with the embedder of ``args`` (loaded once)."""
    from h2htalk.scoring.score_files import ScoringSetup, score_generation_file

    results = args.results
    embedder = embedder_settings(config, args.embedder, results)
    setup = ScoringSetup.from_config(config, args.embedder, embedder, cache=not args.no_cache)
    setup.embedder.check()
    summaries = [
        score_generation_file(
            results.generations(cell),
            results.references(cell.variant, cell.task),
            results.score_items(cell),
            results.score_summary(cell),
            setup,
            cell.labels(),
        )
        for cell in cells
    ]
    items = sum(s["n"] for s in summaries)
    summary(f"{len(summaries)} cells, {items} items; {mean_s_by_variant(summaries)}", subject=subject)
    return 0


def cmd_score_upstream(args: argparse.Namespace) -> int:
    from h2htalk.scoring.score_files import ScoringSetup, score_upstream, upstream_outputs
    from h2htalk.scoring.signatures import signature_string
    from h2htalk.settings import CurateOptions

    config = load_config(args)
    name = args.embedder or config["scoring"]["embedders"][0]
    setup = ScoringSetup.from_config(config, name, embedder_settings(config, name), cache=not args.no_cache)
    setup.embedder.check()  # before anything is read: an embedder that cannot load fails in a second
    subtasks = upstream_outputs(args.outputs_dir, args.subtasks or ())
    absent = [s for s in SUBTASKS if s not in subtasks]
    print(f"scoring {len(subtasks)} of {len(SUBTASKS)} subtasks" + (
        f"; not scored: {', '.join(f'{s.key} ({s.upstream_file})' for s in absent)}" if absent else ""))  # fmt: skip
    print(ss_line(setup.embedder.describe()))
    print(f"signature: {signature_string(setup.signature())}")
    cache = setup.cache_file()
    print(f"embedding cache: {cache.resolve() if cache else 'none (--no-cache)'}")
    curation = CurateOptions.from_config(config)
    rows = score_upstream(
        args.outputs_dir, args.references, args.out, setup, curation, subtasks=subtasks, out_items=args.items
    )
    for row in rows:
        print(f"{row['subtask']:<28} n={row['n']:>5} of {row['released']:>5} released  S={row['S']:6.2f}")
    items = sum(row["n"] for row in rows)
    mean = item_mean_s(rows)
    facts = f"{len(rows)} subtasks, {items} items; " + (f"mean S {mean:.1f}" if mean is not None else "no item scored")
    summary(facts, subject=f"with {setup.embedder.name}", out=args.out)
    return 0


def ss_line(embedder: dict[str, Any]) -> str:
    """Which embedder this run's SS uses, beside the paper's (BGE-M3)."""
    used = f"SS embedder: {embedder['name']} ({embedder['revision']})"
    if embedder["kind"] == "bge-m3":
        return f"{used}: BGE-M3, as the paper's SS"
    return f"{used}; the paper's SS uses BGE-M3 (--embedder bge-m3): this SS, and S, differ from the paper's"


def item_mean_s(cells: list[dict[str, Any]]) -> float | None:
    """S over every scored item of ``cells`` (score summaries or rows: ``S`` and ``n``; cells weighted by items)."""
    scored = [cell for cell in cells if cell["n"]]
    return sum(c["S"] * c["n"] for c in scored) / sum(c["n"] for c in scored) if scored else None


def mean_s_by_variant(summaries: list[dict[str, Any]]) -> str:
    """``mean S 24.1 (nosap), 23.9 (sap)``: each variant's item mean."""
    variants = dict.fromkeys(cell["variant"] for cell in summaries)
    means = {v: item_mean_s([c for c in summaries if c["variant"] == v]) for v in variants}
    shown = [f"{mean:.1f} ({variant})" for variant, mean in means.items() if mean is not None]
    return "mean S " + ", ".join(shown) if shown else "no item scored"
