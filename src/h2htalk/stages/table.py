"""The stage registry: every stage of the workflow, collected from the modules that declare them (``@stage`` at
the function that runs its jobs), in pipeline order.

The order is the modules' in ``PIPELINE``, then any module of ``h2htalk.stages.jobs`` (a stage you add), each
module's stages in the order it declares them: the plan runs the stages that call models in it, and the
reference in ``docs/stages.md`` lists them in it. Importing the registry checks every stage (``h2htalk.stages.declare``)
and that no two stages share a name or write one file.
"""

from __future__ import annotations

import os
import pkgutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from h2htalk.commands import declared_in
from h2htalk.config import default_config
from h2htalk.layout import Layout
from h2htalk.stages import jobs
from h2htalk.stages.declare import (
    check_labels,
    check_names,
    check_one_writer,
    check_reachable,
    check_reached,
    check_step_names,
)
from h2htalk.stages.spec import Figure, Product, Scope, Stage

# The modules that declare the workflow's stages, in pipeline order. Importing them must stay cheap (every job and
# dry run does): their heavy libraries (numpy, scipy, nltk, torch, ...) are imported inside the functions.
PIPELINE = (
    "h2htalk.data.fetch",
    "h2htalk.data.weights",
    "h2htalk.data.curate",
    "h2htalk.data.curation_report",
    "h2htalk.instances.reconstruct",
    "h2htalk.instances.sources",
    "h2htalk.prompts.render",
    "h2htalk.studies.data",
    "h2htalk.generation.provision",
    "h2htalk.generation.generate",
    "h2htalk.studies.run",
    "h2htalk.scoring.cells",
    "h2htalk.judge.run",
    "h2htalk.reliability.run",
    "h2htalk.judge.combine",
    "h2htalk.review.queue",
    "h2htalk.provenance",
    "h2htalk.tables.table1",
    "h2htalk.tables.table2_pairs_files",  # Table 2 reads its pairs
    "h2htalk.tables.table2_files",
    "h2htalk.tables.table3",
    "h2htalk.tables.human_review",
    "h2htalk.tables.calibration",
    "h2htalk.figures.plots",
    "h2htalk.figures.fig7",
    "h2htalk.reliability.card",
    "h2htalk.export.run_results",
    "h2htalk.export.leaderboard",
    "h2htalk.export.every_eval_ever",
    "h2htalk.export.viewer",
    "h2htalk.plan",
)


def _plan_reads_what_it_plans(stages: list[Stage]) -> tuple[Stage, ...]:
    """A stage that plans (the plan) runs every planned stage's function, so it reads every key they read (and
    reruns when one changes)."""
    # (a key a planned stage leaves out of a section is one another planned stage may read)
    planned = [key for stage in stages if stage.planned for key in stage.reads if not key.startswith("-")]

    def widest(reads: tuple[str, ...]) -> tuple[str, ...]:  # a key under a section read whole is in it already
        keys = dict.fromkeys([*reads, *planned])
        return tuple(key for key in keys if not any(key.startswith(f"{section}.") for section in keys))

    return tuple(replace(stage, reads=widest(stage.reads)) if stage.plans else stage for stage in stages)


def _declared() -> list[Stage]:
    found, added = [], sorted(f"{jobs.__name__}.{info.name}" for info in pkgutil.iter_modules(jobs.__path__))
    for module in (*PIPELINE, *added):
        functions = declared_in(module, "stages")
        check_reachable(module, functions)
        found += [stage for function in functions for stage in function.stages]
    return found


STAGES: tuple[Stage, ...] = _plan_reads_what_it_plans(_declared())
BY_NAME = {stage.name: stage for stage in STAGES}
check_names(STAGES)
check_step_names(STAGES)
# the schema's default run, with one model under test (it has none, and so no job of one model)
CHECKED_RUN = Scope({**default_config(), "models": ["a-model"]}, Layout("results", "demo"))
check_reached(STAGES, *check_one_writer(STAGES, CHECKED_RUN))
check_labels(STAGES, CHECKED_RUN)


def product_jobs(scope: Scope) -> Iterator[tuple[Product, dict[str, str], dict[str, list[str]]]]:
    """Each job of a table's, figure's or export's stage in the run of ``scope``: its product, labels and outputs."""
    for stage in STAGES:
        for labels in stage.jobs(scope.run) if stage.product else ():
            yield stage.product, labels, stage.files("outputs", scope, labels)


def command_reads() -> dict[str, tuple[str, ...]]:
    """Each stage's command -> the config keys it reads (what reruns its jobs when they change)."""
    return {stage.command_name: stage.reads for stage in STAGES}


def table_files(name: str, folder: str | os.PathLike[str]) -> dict[str, Path]:
    """The files stage ``name`` writes into the tables folder, were that folder ``folder``: name -> path."""
    scope = Scope(default_config(), Layout(figures=str(folder)))
    stage = BY_NAME[name]
    labels = {label: f"{{{label}}}" for label in stage.labels}
    figures = {key: spec for key, spec in stage.outputs.items() if isinstance(spec, Figure)}
    return {key: Path(spec.paths(scope, labels, [])[0]) for key, spec in figures.items()}
