"""The review desk's commands' work, given the ``review`` settings: load the results' items and assign them, issue
tokens, serve the web page, tell each task's progress, rate offline (export, import), check the log's hashes."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from h2htalk.desk_store.store import ReviewStore
from h2htalk.errors import DataError, H2HTalkError
from h2htalk.layout import Layout
from h2htalk.progress import summary


def load_items(config: dict[str, Any], results: Layout, tasks: Sequence[str]) -> None:
    """Put the results' items of ``tasks`` into the store and assign each to ``review.raters_per_item`` raters."""
    from h2htalk.review.collect import desk_items

    review = config["review"]
    found = desk_items(config, results, tasks)
    items = [item for task_items in found.values() for item in task_items]
    with ReviewStore(review["store"], create=True) as store:
        report = store.load(items, review["raters"], review["raters_per_item"], review["seed"])
    counts = ", ".join(f"{task} {len(task_items)}" for task, task_items in found.items())
    summary(
        f"{len(items)} items ({counts}): {report.new} new, {report.changed} changed, {report.unchanged} unchanged; "
        f"{report.assignments} assignments to {len(review['raters'])} raters",
        out=review["store"],
    )


def new_tokens(review: Mapping[str, Any], raters: Sequence[str]) -> list[tuple[str, str]]:
    """A new login token for each of ``raters`` (their old one stops working and their sessions end)."""
    if unknown := [r for r in raters if r not in review["raters"]]:
        raise H2HTalkError(f"not among review.raters: {', '.join(unknown)}")
    with ReviewStore(review["store"], create=True) as store:
        store.add_raters(raters)
        return [(rater, store.new_token(rater)) for rater in raters]


def serve(
    review: Mapping[str, Any], host: str, port: int, certfile: Path | None = None, keyfile: Path | None = None,
    public_url: str | None = None, insecure_http: bool = False,
) -> None:  # fmt: skip
    """Serve the desk's web page until stopped, where it may serve (``serving.check_serving``)."""
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


def progress_lines(store_path: str | os.PathLike[str]) -> list[str]:
    """Each task's progress: rated of assigned, in all and per rater."""
    with ReviewStore(store_path) as store:
        progress = store.progress()
    lines = []
    for task, raters in progress.items():
        rated, assigned = sum(c["rated"] for c in raters.values()), sum(c["assigned"] for c in raters.values())
        each = ", ".join(f"{r} {c['rated']}/{c['assigned']}" for r, c in sorted(raters.items()))
        lines.append(f"{task}: {rated}/{assigned} rated ({each})")
    return lines


def export_items(review: Mapping[str, Any], rater: str, task: str, out: Path) -> None:
    """``rater``'s open items of ``task`` as CSV in ``out``, to rate offline."""
    from h2htalk.review.offline import export_open_items

    with ReviewStore(review["store"]) as store:
        count = export_open_items(store, rater, task, review["seed"], out)
    summary(f"{count} open {task} items of {rater}", out=out)


def import_files(store_path: str | os.PathLike[str], task: str, files: Sequence[Path]) -> None:
    """Append the ratings of filled-in offline CSV ``files`` of ``task`` to the store."""
    from h2htalk.review.offline import import_ratings

    with ReviewStore(store_path) as store:
        stored, already = import_ratings(store, task, files)
    summary(f"{stored} ratings stored, {already} already in the store")


def verified_lines(store_path: str | os.PathLike[str], head: str | None = None) -> list[str]:
    """What the store's recomputed hash chain and item hashes show (and that its log holds ``head``, a log head a
    table names), or an error naming the first row that does not match."""
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
