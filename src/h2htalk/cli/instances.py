"""Instances stage commands: instances, validate-instances, reconstruct, join-csv."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import (
    REGISTRY_READS,
    add_command,
    add_engine,
    add_results,
    engine_options,
    load_config,
    registry_entry,
)
from h2htalk.progress import summary
from h2htalk.subtasks import SUBTASK_KEYS


def register(sub: Any) -> None:
    p = add_command(
        sub, "instances", cmd_instances, "write one subtask's validated instance set (instances.source)",
        reads=("instances",),
    )  # fmt: skip
    add_results(p)
    p.add_argument("--subtask", required=True, choices=SUBTASK_KEYS)

    p = add_command(sub, "validate-instances", cmd_validate_instances, "check instance files against their schema")
    p.add_argument("files", nargs="+", type=Path)

    p = add_command(
        sub, "reconstruct", cmd_reconstruct, "rebuild the subtasks' inputs from their references, verified by vote",
        reads=(
            *REGISTRY_READS, "generation", "instances.reconstruct", "instances.review_imports", "subtasks",
            "review.store",
        ),
    )  # fmt: skip
    add_results(p)
    add_engine(p)

    p = add_command(sub, "join-csv", cmd_join_csv, "concatenate CSV files that share a header")
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True)


def cmd_instances(args: argparse.Namespace) -> int:
    from h2htalk.instances.sources import source_file, write_instances

    instances = load_config(args)["instances"]
    file = source_file(instances, args.subtask, args.results)
    out = args.results.path("instances", subtask=args.subtask)
    count = write_instances(args.subtask, out, file=file, limit=instances["limit"])
    limited = f", the first {instances['limit']}" if instances["limit"] is not None else ""
    summary(f"{count} instances ({file or 'demo set'}{limited})", subject=args.subtask, out=out)
    return 0


def cmd_validate_instances(args: argparse.Namespace) -> int:
    from h2htalk.instances.schema import read_instances

    for path in args.files:
        print(f"{path}: {len(read_instances(path))} valid instances")
    return 0


def cmd_reconstruct(args: argparse.Namespace) -> int:
    from h2htalk.instances.reconstruct import ReconstructFiles, reconstruct_to_files
    from h2htalk.settings import ReconstructSettings

    config = load_config(args)
    options = ReconstructSettings.from_config(config)
    names = list(dict.fromkeys([options.generator, *options.voters]))
    registry = {name: registry_entry(config, name, args.results) for name in names}
    path = args.results.path
    files = [
        ReconstructFiles(
            key,
            Path(path("curated", subtask=key)),
            Path(path("reconstructed", subtask=key)),
            Path(path("reconstruction_report", subtask=key)),
            Path(path("instance_review", subtask=key)),
        )
        for key in config["subtasks"]
    ]
    decisions = config["instances"]["review_imports"]
    engines, store = engine_options(args, config, names), config["review"]["store"]
    reports = reconstruct_to_files(files, registry, options, engines, decisions, store)
    counts = ("sampled", "kept_after_review", "flagged", "leaked", "failed")
    totals = {key: sum(r[key] for r in reports) for key in counts}
    summary(
        f"{len(reports)} subtasks; {totals['sampled']} sampled, {totals['kept_after_review']} kept, "
        f"{totals['flagged']} flagged, {totals['leaked']} leaked, {totals['failed']} failed"
    )
    return 0


def cmd_join_csv(args: argparse.Namespace) -> int:
    from h2htalk.io import join_csv

    summary(f"{join_csv(args.files, args.out)} rows", out=args.out)
    return 0
