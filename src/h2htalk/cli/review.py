"""Review desk commands: desk-load (items from the results tree into the store, and who rates what), desk-token,
desk-serve (the web page), desk-status, desk-export and desk-import (rating offline), desk-verify (the log's
hash chain)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from h2htalk.cli.options import add_command, add_results, load_config
from h2htalk.desk_store.tasks import TASKS
from h2htalk.errors import DataError, H2HTalkError
from h2htalk.progress import summary

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
    from h2htalk.desk_store.store import ReviewStore
    from h2htalk.review.collect import desk_items

    config = load_config(args)
    review = config["review"]
    found = desk_items(config, args.results, args.task or list(TASKS))
    items = [item for task_items in found.values() for item in task_items]
    with ReviewStore(review["store"], create=True) as store:
        report = store.load(items, review["raters"], review["raters_per_item"], review["seed"])
    counts = ", ".join(f"{task} {len(task_items)}" for task, task_items in found.items())
    summary(
        f"{len(items)} items ({counts}): {report.new} new, {report.changed} changed, {report.unchanged} unchanged; "
        f"{report.assignments} assignments to {len(review['raters'])} raters",
        out=review["store"],
    )
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    from h2htalk.desk_store.store import ReviewStore

    config = load_config(args)
    unknown = [r for r in args.raters if r not in config["review"]["raters"]]
    if unknown:
        raise H2HTalkError(f"not among review.raters: {', '.join(unknown)}")
    with ReviewStore(config["review"]["store"], create=True) as store:
        store.add_raters(args.raters)
        for rater in args.raters:
            print(f"{rater}\t{store.new_token(rater)}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from h2htalk.desk_store.store import ReviewStore
    from h2htalk.review.app import desk_app
    from h2htalk.review.hosts import needs_tokens
    from h2htalk.review.serving import INSECURE_WARNING, check_serving, read_tls_in_records

    check_serving(args.host, args.port, args.certfile, args.keyfile, args.public_url, args.insecure_http)
    config = load_config(args)
    path, tokens = config["review"]["store"], needs_tokens(args.host) or bool(args.public_url)
    with ReviewStore(path) as store:
        with_token = [r for r in store.raters() if store.has_token(r)]
    if tokens and not with_token:
        raise H2HTalkError(
            f"--host {args.host}: on any address but 127.0.0.1 raters log in with a token: give them tokens first "
            "(h2htalk desk-token)"
        )
    tls = args.certfile is not None
    insecure = args.insecure_http and not tls
    app = desk_app(
        path, config["review"]["seed"], host=args.host, tls=tls, public_url=args.public_url,
        warning=INSECURE_WARNING if insecure else "",
    )  # fmt: skip
    login = "name and token" if tokens else "name"
    where = f"[{args.host}]" if ":" in args.host else args.host
    url = f"{'https' if tls else 'http'}://{where}:{args.port}/"
    through = f", reached at {args.public_url}" if args.public_url else ""
    if tls:
        read_tls_in_records()
    if insecure:
        print(f"warning: {INSECURE_WARNING}", file=sys.stderr)
    summary(f"review desk on {url}{through} (raters log in with their {login}; Ctrl-C stops it)")
    uvicorn.run(
        app, host=args.host, port=args.port, log_level="warning",
        ssl_certfile=args.certfile and str(args.certfile), ssl_keyfile=args.keyfile and str(args.keyfile),
    )  # fmt: skip
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from h2htalk.desk_store.store import ReviewStore

    with ReviewStore(load_config(args)["review"]["store"]) as store:
        progress = store.progress()
    for task, raters in progress.items():
        rated, assigned = sum(c["rated"] for c in raters.values()), sum(c["assigned"] for c in raters.values())
        each = ", ".join(f"{r} {c['rated']}/{c['assigned']}" for r, c in sorted(raters.items()))
        print(f"{task}: {rated}/{assigned} rated ({each})")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from h2htalk.desk_store.store import ReviewStore
    from h2htalk.review.offline import export_open_items

    config = load_config(args)
    with ReviewStore(config["review"]["store"]) as store:
        count = export_open_items(store, args.rater, args.task, config["review"]["seed"], args.out)
    summary(f"{count} open {args.task} items of {args.rater}", out=args.out)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from h2htalk.desk_store.store import ReviewStore
    from h2htalk.review.offline import import_ratings

    with ReviewStore(load_config(args)["review"]["store"]) as store:
        stored, already = import_ratings(store, args.task, args.files)
    summary(f"{stored} ratings stored, {already} already in the store")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from h2htalk.desk_store.store import ReviewStore

    path = load_config(args)["review"]["store"]
    with ReviewStore(path) as store:
        found = store.verify(args.head)
    if found.problems:
        raise DataError(f"{path} does not match its hashes:\n" + "\n".join(f"  - {p}" for p in found.problems))
    if found.head_row == 0:
        raise DataError(f"{path}: no row of its log has the head {args.head}: the log it names is not this one")
    print(f"{path}: {found.ratings} ratings and {found.items} items match their hashes")
    print(f"log head {found.head or '(no rating yet)'}\nitems {found.items_digest}")
    if found.head_row:
        print(f"{args.head} is the link of log row {found.head_row}: this log holds the log it names")
    return 0
