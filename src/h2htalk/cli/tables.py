"""Table commands: provenance, table1, table2, calibration."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import add_config, add_provenance, load_config, write_meta
from h2htalk.progress import summary


def register(sub: Any) -> None:
    p = sub.add_parser("provenance", help="write the run's provenance (git, config, data, versions, hardware)")
    add_config(p)
    p.add_argument("--manifest", type=Path, required=True, help="the fetch manifest")
    p.add_argument("--root", type=Path, default=Path("."), help="the checkout (for the git revision)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(handler=cmd_provenance)

    p = sub.add_parser("table1", help="Table 1 (.csv, .md, .tex) from the per-subtask curation reports")
    p.add_argument("reports", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True, help="output path without extension")
    add_provenance(p)
    p.set_defaults(handler=cmd_table1)

    p = sub.add_parser("table2", help="Table 2, its heatmap, the paper comparison and the paper audit")
    add_config(p)
    p.add_argument("summaries", nargs="+", type=Path, help="S and J summaries (JSON)")
    p.add_argument("--out", type=Path, required=True, help="output path without extension")
    add_provenance(p)
    p.set_defaults(handler=cmd_table2)

    p = sub.add_parser("calibration", help="chance floor, oracle, rescaled scores and unrelated-pair SS")
    p.add_argument("summaries", nargs="+", type=Path, help="S and J summaries (JSON), baselines included")
    p.add_argument("--floor-items", nargs="+", type=Path, default=[], help="per-item scores of the random reference")
    p.add_argument("--out", type=Path, required=True, help="output path without extension")
    add_provenance(p)
    p.set_defaults(handler=cmd_calibration)


def cmd_provenance(args: argparse.Namespace) -> int:
    from h2htalk.provenance import write_provenance

    record = write_provenance(load_config(args), args.manifest, args.out, args.root)
    summary(f"git {record['git']['revision']} config {record['config_sha256'][:12]} -> {args.out}")
    return 0


def cmd_table1(args: argparse.Namespace) -> int:
    from h2htalk.tables.table1 import write_table1

    write_table1(args.reports, args.out)
    write_meta(args, args.out, args.reports)
    summary(f"wrote {args.out}.csv, .md, .tex")
    return 0


def cmd_table2(args: argparse.Namespace) -> int:
    from h2htalk.tables.table2_files import write_table2

    config = load_config(args)
    registry, paper = config["model_registry"], config["paper"]["table2"]
    weights = config["tables"]["overall_weights"]
    write_table2(args.summaries, registry, paper, args.out, weights, notes=shared_roles(config))
    write_meta(args, args.out, [*args.summaries, registry, paper])
    summary(f"wrote {args.out}.csv, .md, .tex, _heatmap.png, _vs_paper.csv, _paper_audit.csv")
    return 0


def cmd_calibration(args: argparse.Namespace) -> int:
    from h2htalk.tables.calibration import write_calibration

    rows = write_calibration(args.summaries, args.floor_items, args.out)
    write_meta(args, args.out, [*args.summaries, *args.floor_items])
    summary(f"{len(rows)} rows -> {args.out}.md, {args.out}.csv")
    return 0


def shared_roles(config: dict[str, Any]) -> list[str]:
    """Notes for Table 2 when a model under test also wrote or judged what it is scored on, or when the
    baselines' judged cells are S."""
    notes = []
    reconstruct = config["instances"]["reconstruct"]
    if config["instances"]["source"] == "reconstructed":
        for role, names in (("wrote the inputs", [reconstruct["generator"]]), ("voted on them", reconstruct["judges"])):
            for name in dict.fromkeys(names):
                if name in config["models"]:
                    notes.append(f"{name} is a model under test and also {role} (instance reconstruction).")
    if config["judge"]["model"] in config["models"]:
        notes.append(f"{config['judge']['model']} is a model under test and also the rubric judge of Levels I-III.")
    if config["baselines"] and not config["judge"]["baselines"]:
        notes.append("The baselines' Level I-III cells are S, not J: they are not judged (judge.baselines: false).")
    return notes
