"""Commands that are not stages: validate-config, validate-instances, score-upstream (outputs of your own in the
upstream layout, scored without the workflow) and rates (the llama.cpp rates a run's time estimate uses)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import add_command, add_scoring, load_config
from h2htalk.subtasks import SUBTASK_KEYS


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
    add_scoring(p)
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
    from h2htalk.scoring.upstream import score_outputs

    score_outputs(
        load_config(args), args.outputs_dir, args.references, args.out, embedder=args.embedder,
        subtasks=args.subtasks or (), out_items=args.items, cache=not args.no_cache,
    )  # fmt: skip
    return 0


def cmd_rates(args: argparse.Namespace) -> int:
    from h2htalk.plan.rates import kept_rates, rates_cache_file

    print("\n".join(kept_rates(rates_cache_file(), args.reset)))
    return 0
