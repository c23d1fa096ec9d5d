"""Instances stage commands: instances, validate-instances, reconstruct, join-csv."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import add_config, add_engine, engine_options, load_config, same_length
from h2htalk.progress import summary
from h2htalk.subtasks import SUBTASK_KEYS


def register(sub: Any) -> None:
    p = sub.add_parser("instances", help="write one subtask's validated instance set (the demo set, or a file)")
    p.add_argument("--subtask", required=True, choices=SUBTASK_KEYS)
    p.add_argument("--file", type=Path, help="an instance file (JSONL, instance schema); default: the demo set")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(handler=cmd_instances)

    p = sub.add_parser("validate-instances", help="check instance files against the instance schema")
    p.add_argument("files", nargs="+", type=Path)
    p.set_defaults(handler=cmd_validate_instances)

    p = sub.add_parser("reconstruct", help="rebuild one subtask's inputs from its references, verified by vote")
    add_config(p)
    add_engine(p)
    p.add_argument("--subtask", nargs="+", required=True, choices=SUBTASK_KEYS)
    p.add_argument("--curated", type=Path, nargs="+", required=True, help="each subtask's curated references")
    p.add_argument("--decisions", type=Path, action="append", default=[], help="filled-in review CSV (repeatable)")
    p.add_argument("--out", type=Path, nargs="+", required=True, help="each subtask's kept instances (JSONL)")
    p.add_argument("--report", type=Path, nargs="+", required=True, help="counts: sampled, kept, flagged, failed")
    p.add_argument("--review", type=Path, nargs="+", required=True, help="CSV of flagged and failed items, per subtask")
    p.set_defaults(handler=cmd_reconstruct)

    p = sub.add_parser("join-csv", help="concatenate CSV files that share a header")
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(handler=cmd_join_csv)


def cmd_instances(args: argparse.Namespace) -> int:
    from h2htalk.instances.sources import write_instances

    count = write_instances(args.subtask, args.out, file=args.file)
    summary(f"{args.subtask}: {count} instances ({args.file or 'demo set'}) -> {args.out}")
    return 0


def cmd_validate_instances(args: argparse.Namespace) -> int:
    from h2htalk.instances.schema import read_instances

    for path in args.files:
        print(f"{path}: {len(read_instances(path))} valid instances")
    return 0


def cmd_reconstruct(args: argparse.Namespace) -> int:
    from h2htalk.cli.options import registry_entry
    from h2htalk.instances.reconstruct import ReconstructFiles, reconstruct_to_files
    from h2htalk.settings import ReconstructSettings

    config = load_config(args)
    options = ReconstructSettings.from_config(config)
    names = list(dict.fromkeys([options.generator, *options.judges]))
    registry = {name: registry_entry(config, name, args) for name in names}
    same_length(args, "subtask", "curated", "out", "report", "review")
    cells = zip(args.subtask, args.curated, args.out, args.report, args.review, strict=True)
    files = [ReconstructFiles(*cell) for cell in cells]
    reports = reconstruct_to_files(files, registry, options, engine_options(args, config, names), args.decisions)
    totals = {key: sum(r[key] for r in reports) for key in ("sampled", "kept_after_review", "flagged", "failed")}
    summary(
        f"reconstructed {len(reports)} subtasks: sampled {totals['sampled']}, kept {totals['kept_after_review']}, "
        f"flagged {totals['flagged']}, failed {totals['failed']}"
    )
    return 0


def cmd_join_csv(args: argparse.Namespace) -> int:
    from h2htalk.io import join_csv

    summary(f"{join_csv(args.files, args.out)} rows -> {args.out}")
    return 0
