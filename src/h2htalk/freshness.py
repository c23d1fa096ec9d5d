"""Results that outlived what they were made from: found before a run, so that it rebuilds them.

Snakemake does not rebuild a missing intermediate file when the files made from it are present and newer: after
a job failed (its outputs removed) or a forced job was killed, a plain rerun says "nothing to be done" while the
tables still show numbers whose inputs are gone. Every result of a run has one address (``h2htalk.layout``) and
every stage declares its files cell by cell (``h2htalk.stages.table``), so the chain of each cell is known:
instances -> prompts -> answers -> scores, judge samples -> J; and the tables record the checksum of every input
they read. A result is stale when something it was made from is missing or
stale, and a table also when an input's checksum is not the one it recorded. Removing the stale results makes
the next run rebuild them, and everything missing under them, from the caches.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from h2htalk.io import read_json, remove_paths, sha256_file
from h2htalk.layout import Layout

Graph = dict[str, list[str]]  # a result -> what it is made from
Tables = dict[str, list[str]]  # a table's or figure's provenance file -> every file its job declares


def result_graph(config: dict[str, Any], results: Layout) -> Graph:
    """What each result of the configured run is made from, cell by cell: for every job of every stage in the
    stage table, each output it declares per cell is made from the inputs it declares per cell, of the same cell."""
    from h2htalk.stages.spec import Each, Scope
    from h2htalk.stages.table import STAGES

    scope = Scope(config, results)
    graph: Graph = {}
    for stage in STAGES:
        made = [spec for spec in stage.outputs.values() if isinstance(spec, Each)]
        sources = [spec for spec in stage.inputs.values() if isinstance(spec, Each)]
        if not (made and sources):
            continue
        for labels in stage.jobs(scope.run):
            for cell in stage.cells(scope.run, labels):
                inputs = list(dict.fromkeys(spec.of(scope, cell) for spec in sources))
                for spec in made:
                    graph[spec.of(scope, cell)] = inputs
    return graph


def table_outputs(config: dict[str, Any], results: Layout) -> Tables:
    """The tables and figures of the configured run, each job's by its provenance file: the files it declares."""
    from h2htalk.stages.spec import META, Scope
    from h2htalk.stages.table import product_jobs

    jobs = product_jobs(Scope(config, results))
    return {files[META][0]: [path for paths in files.values() for path in paths] for _, _, files in jobs}


def stale_results(graph: Graph, tables: Tables, store: str) -> dict[str, str]:
    """Every present result that was made from something missing or stale, and every table or figure whose
    recorded inputs are missing, stale or changed (its provenance file): path -> why. The review ``store`` is no
    such input: it changes with every rating of any sheet, and a job that reads ratings reruns when those it reads
    change (its ``ratings`` param)."""
    stale: dict[str, str] = {}
    known: dict[str, bool] = {}  # path -> stale (or missing)

    def gone(path: str) -> bool:
        if path not in known:
            known[path] = not os.path.exists(path) or any(gone(source) for source in graph.get(path, ()))
            if known[path] and os.path.exists(path):
                missing = next(s for s in graph[path] if gone(s))
                stale[path] = f"made from {missing}, which is {'stale' if missing in stale else 'missing'}"
        return known[path]

    for path in graph:
        gone(path)
    is_store = _names_file(store)
    for meta in sorted(meta for meta in tables if os.path.exists(meta)):
        inputs = [entry for entry in read_json(meta)["inputs"] if not is_store(entry["path"])]
        reason = _changed_input(inputs, gone)
        if reason:
            stale[meta] = reason
    return stale


def _names_file(named: str) -> Callable[[str], bool]:
    """Whether a path names the file ``named`` names, however each is spelt (a link, a folder linked, a second name
    of the file, a case-blind file system): one file where both are there, else one real path."""
    there = os.stat(named) if os.path.exists(named) else None
    real = os.path.realpath(named)

    def names(path: str) -> bool:
        try:
            found = os.stat(path)  # (one call per recorded input: a start of the paper run reads thousands)
        except OSError:
            return os.path.realpath(path) == real
        return there is not None and (found.st_dev, found.st_ino) == (there.st_dev, there.st_ino)

    return names


def _changed_input(inputs: Iterable[dict[str, Any]], gone: Any) -> str | None:
    for entry in inputs:
        path = entry["path"]
        if not os.path.exists(path):
            return f"made from {path}, which is missing"
        if gone(path):
            return f"made from {path}, which is stale"
        if not _same_file(path, entry):
            return f"made from {path}, which has changed since"
    return None


def _same_file(path: str, entry: dict[str, Any]) -> bool:
    """Whether ``path`` is the input a table recorded: the same size and modification time (then its checksum is
    not computed again; a start of the paper run reads thousands of inputs), or else the same checksum."""
    status = os.stat(path)
    if (entry.get("size"), entry.get("mtime_ns")) == (status.st_size, status.st_mtime_ns):
        return True
    return sha256_file(path) == entry["sha256"]


def clear_stale(config: dict[str, Any], results: Layout, log: logging.Logger, dry_run: bool = False) -> dict[str, str]:
    """Before a run: say in ``log`` which results of the configured run are stale (the first ten, and why) and remove
    them, so that the run rebuilds them and everything missing under them instead of "nothing to be done"; a dry run
    removes nothing. Returns them: path -> why."""
    tables = table_outputs(config, results)
    stale = stale_results(result_graph(config, results), tables, str(config["review"]["store"]))
    if stale:
        log.warning(
            f"{len(stale)} results were made from files that are gone or changed and "
            + ("would be rebuilt by a real run:" if dry_run else "are rebuilt:")
        )
        for path, why in list(stale.items())[:10]:
            log.warning(f"  {path}: {why}")
        if not dry_run:
            remove_stale(stale, tables)
    return stale


def clearing_stale_first(
    execute: Callable[..., Any], config: dict[str, Any], results: Layout, log: logging.Logger
) -> Callable[..., Any]:
    """Snakemake's ``Workflow.execute``, made to clear the stale results first (``clear_stale``), before it plans the
    jobs: Snakemake calls it to run jobs, dry-run them (which says the stale results) or touch their outputs (which
    leaves them), and only then, so --summary, --list-rules, a report or the linter remove nothing. The Snakefile
    cannot tell these modes apart as it loads: Snakemake gives its workflow the mode only afterwards."""

    @functools.wraps(execute)
    def execute_after_clearing_stale(*args: Any, **kwargs: Any) -> Any:
        plugin = kwargs["executor_plugin"] if "executor_plugin" in kwargs else args[0]  # dryrun, touch, local, ...
        settings = plugin.common_settings
        clear_stale(config, results, log, dry_run=settings.dryrun_exec or settings.touch_exec)
        return execute(*args, **kwargs)

    return execute_after_clearing_stale


def remove_stale(stale: dict[str, str], tables: Tables) -> list[Path]:
    """Remove the stale results: a table's or figure's every declared file (a bundle's folder too), and no file of
    another stage's that shares its name's start (table2_pairs is not table2's)."""
    return remove_paths([output for path in stale for output in tables.get(path, [path])])
