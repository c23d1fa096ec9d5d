"""The review desk's commands (``@command``), given the ``review`` settings: load the results' items and assign
them, issue tokens, serve the web page, tell each task's progress, rate offline (export, import), check the log's
hashes."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from h2htalk.commands import command
from h2htalk.desk_store.store import ReviewStore
from h2htalk.desk_store.tasks import TASKS
from h2htalk.errors import DataError, H2HTalkError
from h2htalk.layout import Layout
from h2htalk.progress import summary
from h2htalk.stages.declared import CELLS

LOAD_READS = (
    *CELLS, "studies.models", "instances.source", "review.store", "review.raters", "review.raters_per_item",
    "review.seed",
)  # fmt: skip
STORE_READS = ("review.store", "review.seed")


@command("desk-load", reads=LOAD_READS, choices={"tasks": TASKS}, each={"tasks": "--task"})
def load_items(config: dict[str, Any], results: Layout, tasks: Sequence[str] | None = None) -> None:
    """Put the results' items for people into the review desk's store and assign them.

    Each item to review.raters_per_item raters.

    tasks: load only these tasks (default: all)
    """
    from h2htalk.review.collect import desk_items

    review = config["review"]
    found = desk_items(config, results, list(tasks or TASKS))
    items = [item for task_items in found.values() for item in task_items]
    with ReviewStore(review["store"], create=True) as store:
        report = store.load(items, review["raters"], review["raters_per_item"], review["seed"])
    counts = ", ".join(f"{task} {len(task_items)}" for task, task_items in found.items())
    summary(
        f"{len(items)} items ({counts}): {report.new} new, {report.changed} changed, {report.unchanged} unchanged; "
        f"{report.assignments} assignments to {len(review['raters'])} raters",
        out=review["store"],
    )


@command("desk-token", reads=("review.store", "review.raters"), metavar={"raters": "RATER"})
def new_tokens(review: Mapping[str, Any], raters: Sequence[str], /) -> list[tuple[str, str]]:
    """Print a new login token for each named rater (their old one stops working and their sessions end).

    raters: the raters (of review.raters) to give a new token
    """
    if unknown := [r for r in raters if r not in review["raters"]]:
        raise H2HTalkError(f"not among review.raters: {', '.join(unknown)}")
    with ReviewStore(review["store"], create=True) as store:
        store.add_raters(raters)
        return [(rater, store.new_token(rater)) for rater in raters]


@command("desk-serve", reads=STORE_READS)
def serve(
    review: Mapping[str, Any], host: str = "127.0.0.1", port: int = 8765, certfile: Path | None = None,
    keyfile: Path | None = None, public_url: str | None = None, insecure_http: bool = False,
) -> None:  # fmt: skip
    """Serve the review desk's web page.

    Until stopped, and only where it may serve (``serving.check_serving``).

    host: address to listen on (on 127.0.0.1 raters log in by name; anywhere else with their token)
    port: port to listen on
    certfile: serve HTTPS with this certificate (PEM; with --keyfile)
    keyfile: the certificate's private key (PEM)
    public_url: the URL raters open, where a TLS proxy or an SSH tunnel on this machine forwards to the desk on a
        loopback --host (raters then need tokens)
    insecure_http: serve plain HTTP on a network address anyway: anyone on the path can read tokens and cookies
    """
    import uvicorn

    from h2htalk.review.app import desk_app
    from h2htalk.review.hosts import needs_tokens
    from h2htalk.review.serving import INSECURE_WARNING, check_serving, read_tls_in_records

    check_serving(host, port, certfile, keyfile, public_url, insecure_http)
    path, tokens = review["store"], needs_tokens(host) or bool(public_url)
    with ReviewStore(path) as store:
        with_token = [r for r in store.raters() if store.has_token(r)]
    if tokens and not with_token:
        raise H2HTalkError(
            f"--host {host}: on any address but 127.0.0.1 raters log in with a token: give them tokens first "
            "(h2htalk desk-token)"
        )
    tls = certfile is not None
    insecure = insecure_http and not tls
    app = desk_app(
        path, review["seed"], host=host, tls=tls, public_url=public_url, warning=INSECURE_WARNING if insecure else ""
    )
    where = f"[{host}]" if ":" in host else host
    url = f"{'https' if tls else 'http'}://{where}:{port}/"
    through = f", reached at {public_url}" if public_url else ""
    if tls:
        read_tls_in_records()
    if insecure:
        print(f"warning: {INSECURE_WARNING}", file=sys.stderr)
    summary(f"review desk on {url}{through} (raters log in with their {'name and token' if tokens else 'name'}; "
            "Ctrl-C stops it)")  # fmt: skip
    uvicorn.run(
        app, host=host, port=port, log_level="warning",
        ssl_certfile=certfile and str(certfile), ssl_keyfile=keyfile and str(keyfile),
    )  # fmt: skip


@command("desk-status", reads=("review.store",))
def progress_lines(review: Mapping[str, Any]) -> list[str]:
    """Each task's progress, per rater.

    Rated of assigned, in all and per rater.
    """
    with ReviewStore(review["store"]) as store:
        progress = store.progress()
    lines = []
    for task, raters in progress.items():
        rated, assigned = sum(c["rated"] for c in raters.values()), sum(c["assigned"] for c in raters.values())
        each = ", ".join(f"{r} {c['rated']}/{c['assigned']}" for r, c in sorted(raters.items()))
        lines.append(f"{task}: {rated}/{assigned} rated ({each})")
    return lines


@command("desk-export", reads=STORE_READS, choices={"task": TASKS})
def export_items(review: Mapping[str, Any], rater: str, task: str, out: Path) -> None:
    """A rater's open items of one task as CSV, to rate offline.

    rater: the rater whose open items these are
    task: the task of the items
    out: the CSV file to write
    """
    from h2htalk.review.offline import export_open_items

    with ReviewStore(review["store"]) as store:
        count = export_open_items(store, rater, task, review["seed"], out)
    summary(f"{count} open {task} items of {rater}", out=out)


@command("desk-import", reads=("review.store",), choices={"task": TASKS}, metavar={"files": "FILE"})
def import_files(review: Mapping[str, Any], files: Sequence[Path], /, task: str) -> None:
    """Append the ratings of filled-in offline CSV files to the store.

    files: the CSV files desk-export wrote, filled in
    task: the task they rate
    """
    from h2htalk.review.offline import import_ratings

    with ReviewStore(review["store"]) as store:
        stored, already = import_ratings(store, task, files)
    summary(f"{stored} ratings stored, {already} already in the store")


@command("desk-verify", reads=("review.store",), metavar={"head": "HEX"})
def verified_lines(review: Mapping[str, Any], head: str | None = None) -> list[str]:
    """Recompute the store's hash chain and item hashes: the log's head, or the first row that does not match.

    What they show (and that its log holds ``head``), or an error naming the first row that does not match.

    head: a log head a table names (its .meta.json): check that this log holds it
    """
    store_path = review["store"]
    with ReviewStore(store_path) as store:
        found = store.verify(head)
    if found.problems:
        raise DataError(f"{store_path} does not match its hashes:\n" + "\n".join(f"  - {p}" for p in found.problems))
    if found.head_row == 0:
        raise DataError(f"{store_path}: no row of its log has the head {head}: the log it names is not this one")
    lines = [
        f"{store_path}: {found.ratings} ratings and {found.items} items match their hashes",
        f"log head {found.head or '(no rating yet)'}\nitems {found.items_digest}",
    ]
    if found.head_row:
        lines.append(f"{head} is the link of log row {found.head_row}: this log holds the log it names")
    return lines
