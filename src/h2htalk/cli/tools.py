"""Commands that are not stages: validate-config, validate-instances, score-upstream (outputs of your own in the
upstream layout, scored without the workflow) and rates (the llama.cpp rates a run's time estimate uses)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import add_bootstrap, add_command, embedder_settings, load_config, overrides
from h2htalk.progress import summary
from h2htalk.subtasks import SUBTASK_KEYS, SUBTASKS


def register(sub: Any) -> None:
    p = add_command(
        sub, "validate-config", cmd_validate_config,
        "check config files against the schema, and that the environment holds the API keys of the models they use",
    )  # fmt: skip
    p.add_argument("configfiles", nargs="+", metavar="FILE", help="later files overlay earlier ones")

    p = add_command(sub, "validate-instances", cmd_validate_instances, "check instance files against their schema")
    p.add_argument("files", nargs="+", type=Path)

    p = add_command(
        sub, "score-upstream", cmd_score_upstream,
        "score outputs in the upstream layout, matched by line order, against the references curation keeps",
        reads=("scoring", "embedders", "data.curate"),
    )  # fmt: skip
    add_bootstrap(p)
    p.add_argument("--tokenizer", choices=["jieba", "char"], help="lexical tokens (overrides scoring.tokenizer)")
    p.add_argument("--cache-dir", help="the embedding cache's folder (overrides scoring.cache_dir)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    overrides(p, tokenizer="scoring.tokenizer", cache_dir="scoring.cache_dir")
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

    p = add_command(
        sub, "rates", cmd_rates,
        "show the llama.cpp rates kept for the time a run says before it starts (measured, or learned from runs)",
    )  # fmt: skip
    p.add_argument("--reset", action="store_true", help="forget them all: the next run measures anew")


def cmd_validate_config(args: argparse.Namespace) -> int:
    from h2htalk.config import check_environment
    from h2htalk.config import load_config as load_files

    check_environment(load_files(args.configfiles))
    print(f"{' + '.join(args.configfiles)}: valid")
    return 0


def cmd_validate_instances(args: argparse.Namespace) -> int:
    from h2htalk.instance_schema import read_instances

    for path in args.files:
        print(f"{path}: {len(read_instances(path))} valid instances")
    return 0


def cmd_score_upstream(args: argparse.Namespace) -> int:
    from h2htalk.scoring.score_files import ScoringSetup, item_mean_s, score_upstream, upstream_outputs
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


def cmd_rates(args: argparse.Namespace) -> int:
    from h2htalk.plan.rates import rates_cache_file, read_cache, reset_cache

    path = rates_cache_file()
    if args.reset:
        print(f"{path}: removed" if reset_cache(path) else f"{path}: no rates kept")
        return 0
    cache = read_cache(path)
    print(f"{path}: " + (f"rates of {len(cache)} settings" if cache else "no rates kept"))
    for key, records in cache.items():
        print(f"\n{key}")
        for record in sorted(records, key=lambda r: (r.kind, r.made)):
            print(f"  {record.describe()}")
    return 0
