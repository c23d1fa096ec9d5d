"""Review desk commands: desk-load (items from the results tree into the store, and who rates what), desk-token,
desk-serve (the web page), desk-status, desk-export and desk-import (rating offline), desk-verify (the log's
hash chain)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import add_command, add_results, load_config
from h2htalk.desk_store.tasks import TASKS

LOAD_READS = (
    "models", "baselines", "rubric_judge.baselines", "subtasks", "variants", "scoring.embedders", "studies.models",
    "instances.source", "review.store", "review.raters", "review.raters_per_item", "review.seed",
)  # fmt: skip
STORE_READS = ("review.store", "review.seed")


def register(sub: Any) -> None:
    p = add_command(
        sub, "desk-load", cmd_load, "put the results' items for people into the review desk's store and assign them",
        reads=LOAD_READS,
    )  # fmt: skip
    add_results(p)
    p.add_argument("--task", action="append", choices=list(TASKS), help="load only these tasks (default: all)")

    p = add_command(
        sub, "desk-token", cmd_token,
        "print a new login token for each named rater (their old one stops working and their sessions end)",
        reads=("review.store", "review.raters"),
    )  # fmt: skip
    p.add_argument("raters", nargs="+", metavar="RATER")

    p = add_command(sub, "desk-serve", cmd_serve, "serve the review desk's web page", reads=STORE_READS)
    p.add_argument(
        "--host", default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, where raters log in by name; anywhere else with their token)",
    )  # fmt: skip
    p.add_argument("--port", type=int, default=8765, help="port to listen on (default: 8765)")
    p.add_argument("--certfile", type=Path, help="serve HTTPS with this certificate (PEM; with --keyfile)")
    p.add_argument("--keyfile", type=Path, help="the certificate's private key (PEM)")
    p.add_argument(
        "--public-url",
        help="the URL raters open, where a TLS proxy or an SSH tunnel on this machine forwards to the desk on a "
        "loopback --host (raters then need tokens)",
    )
    p.add_argument(
        "--insecure-http", action="store_true",
        help="serve plain HTTP on a network address anyway: anyone on the path can read tokens and cookies",
    )  # fmt: skip

    p = add_command(sub, "desk-status", cmd_status, "each task's progress, per rater", reads=("review.store",))

    p = add_command(
        sub, "desk-export", cmd_export, "a rater's open items of one task as CSV, to rate offline", reads=STORE_READS
    )
    p.add_argument("--rater", required=True)
    p.add_argument("--task", required=True, choices=list(TASKS))
    p.add_argument("--out", type=Path, required=True, help="the CSV file to write")

    p = add_command(
        sub, "desk-import", cmd_import, "append the ratings of filled-in offline CSV files to the store",
        reads=("review.store",),
    )  # fmt: skip
    p.add_argument("--task", required=True, choices=list(TASKS))
    p.add_argument("files", nargs="+", type=Path, metavar="FILE")

    p = add_command(
        sub, "desk-verify", cmd_verify,
        "recompute the store's hash chain and item hashes: the log's head, or the first row that does not match",
        reads=("review.store",),
    )  # fmt: skip
    p.add_argument(
        "--head", metavar="HEX", help="a log head a table names (its .meta.json): check that this log holds it"
    )


def cmd_load(args: argparse.Namespace) -> int:
    from h2htalk.review.desk import load_items

    load_items(load_config(args), args.results, args.task or list(TASKS))
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    from h2htalk.review.desk import new_tokens

    for rater, token in new_tokens(load_config(args)["review"], args.raters):
        print(f"{rater}\t{token}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from h2htalk.review.desk import serve

    serve(load_config(args)["review"], args.host, args.port, args.certfile, args.keyfile, args.public_url,
          args.insecure_http)  # fmt: skip
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from h2htalk.review.desk import progress_lines

    for line in progress_lines(load_config(args)["review"]["store"]):
        print(line)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from h2htalk.review.desk import export_items

    export_items(load_config(args)["review"], args.rater, args.task, args.out)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from h2htalk.review.desk import import_files

    import_files(load_config(args)["review"]["store"], args.task, args.files)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from h2htalk.review.desk import verified_lines

    print("\n".join(verified_lines(load_config(args)["review"]["store"], args.head)))
    return 0
