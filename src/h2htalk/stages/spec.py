"""What a stage is: one value that says what it reads, what it makes, what it runs over and where it runs.

A ``Stage`` is declared once (``h2htalk.stages.table``). The workflow makes its rule from it, the ``h2htalk``
command its sub-command, the freshness check its part of the result graph, the plan its model calls and
``docs/stages.md`` its reference. Files are declared as ``Layout`` kinds: ``Each(kind)`` for every cell the job
works on (the freshness graph links a cell's outputs to its own inputs), ``One(kind)`` for one result with the
job's labels, ``Figure`` for a file in the tables folder, ``Paths`` for anything else.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from h2htalk.cells import RunCells
from h2htalk.layout import Cell, Layout

Labels = Mapping[str, str]  # a job's wildcards: model, embedder, subtask, variant, study, figure
Where = Literal["local", "cpu", "model", "embedder"]


@dataclass(frozen=True)
class Scope:
    """What a stage's files and jobs are resolved in: the run's validated config and its results tree."""

    config: Mapping[str, Any]
    results: Layout

    @cached_property
    def run(self) -> RunCells:
        return RunCells(dict(self.config))


def unique(paths: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(paths))


@dataclass(frozen=True)
class Each:
    """``kind`` of every cell of the job (a cell kind of ``Layout.cell_path``)."""

    kind: str

    def of(self, scope: Scope, cell: Cell) -> str:
        return scope.results.cell_path(self.kind, cell)

    def paths(self, scope: Scope, labels: Labels, cells: Sequence[Cell]) -> list[str]:
        return unique(self.of(scope, cell) for cell in cells)


@dataclass(frozen=True)
class One:
    """One result of ``kind`` with the job's labels (and ``fixed`` ones); ``over``: one for each value of a label
    that the run lists (``subtasks``, ``judged_subtasks``)."""

    kind: str
    over: tuple[str, str] | None = None  # (label, RunCells attribute)

    def paths(self, scope: Scope, labels: Labels, cells: Sequence[Cell]) -> list[str]:
        if self.over is None:
            return [scope.results.path(self.kind, **labels)]
        label, values = self.over
        return [scope.results.path(self.kind, **{**labels, label: v}) for v in getattr(scope.run, values)]


@dataclass(frozen=True)
class Cells:
    """``kind`` of every cell of a run's list of cells (all judged cells, say), not only the job's own."""

    kind: str
    cells: Callable[[RunCells, Labels], list[Cell]]

    def paths(self, scope: Scope, labels: Labels, cells: Sequence[Cell]) -> list[str]:
        return unique(scope.results.cell_path(self.kind, cell) for cell in self.cells(scope.run, labels))


@dataclass(frozen=True)
class Figure:
    """A file of the tables folder: ``stem`` (with the job's labels) and ``suffix``."""

    stem: str
    suffix: str
    directory: bool = False

    def paths(self, scope: Scope, labels: Labels, cells: Sequence[Cell]) -> list[str]:
        return [scope.results.figure(self.stem.format(**labels) + self.suffix)]


@dataclass(frozen=True)
class Paths:
    """Anything else: a function of the scope and the job's labels (its docstring says what they are)."""

    paths_of: Callable[[Scope, Labels], Iterable[str]]

    def paths(self, scope: Scope, labels: Labels, cells: Sequence[Cell]) -> list[str]:
        return unique(str(p) for p in self.paths_of(scope, labels))


FileSpec = Each | One | Cells | Figure | Paths


def figure_files(stem: str, **suffixes: str) -> dict[str, Figure]:
    """A table's or figure's files (and its provenance, ``meta``): name -> suffix after ``stem``."""
    return {"meta": Figure(stem, ".meta.json"), **{name: Figure(stem, s) for name, s in suffixes.items()}}


def bundle(stem: str) -> dict[str, Figure]:
    """A folder of files in the tables folder (and its provenance)."""
    return {"meta": Figure(stem, ".meta.json"), "bundle": Figure(stem, "", directory=True)}


class Over:
    """The jobs of a stage: one for every combination of the run's values of its labels (none: one job), or those
    ``combos`` lists (labels whose values depend on each other)."""

    def __init__(
        self, combos: Callable[[RunCells], Iterable[tuple[str, ...]]] | None = None, /,
        **values: Callable[[RunCells], Iterable[str]],
    ) -> None:  # fmt: skip
        self.values, self.combos = values, combos

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.values)

    def __call__(self, run: RunCells) -> list[dict[str, str]]:
        if self.combos is not None:
            combos: Iterable[tuple[str, ...]] = dict.fromkeys(self.combos(run))
        else:
            combos = itertools.product(*(list(dict.fromkeys(f(run))) for f in self.values.values()))
        return [dict(zip(self.names, combo, strict=True)) for combo in combos]


@dataclass(frozen=True)
class Stage:
    """One stage: its rule, its command and its part of the plan, the freshness graph and the reference."""

    name: str  # the rule's name
    run: str  # "module:function" that does the work (imported when a job runs)
    help: str
    reads: tuple[str, ...] = ()  # config keys, dotted; "-key" removes a key of a section read whole
    jobs: Over = field(default_factory=Over)  # the labels of each job of a run
    cells: Callable[[RunCells, Labels], list[Cell]] = lambda run, labels: []
    inputs: Mapping[str, FileSpec] = field(default_factory=dict)
    outputs: Mapping[str, FileSpec] = field(default_factory=dict)
    # folders it adds to and keeps across runs (a history): not outputs, which Snakemake removes before a job runs
    keeps: Mapping[str, FileSpec] = field(default_factory=dict)
    starts: Callable[[Scope, Labels], list[str]] = lambda scope, labels: []  # registry names whose engines it starts
    entries: Callable[[Scope, Labels], list[str]] | None = None  # registry entries it reads (default: ``starts``)
    ratings: tuple[str, ...] = ()  # the review store's sheets it reads
    ratings_of_model: bool = False  # only its own model's ratings
    where: Where = "local"
    env: str = "data"
    memory_mb: int = 500
    minutes: int = 5  # runtime
    command: str = ""  # the sub-command (default: the name with dashes)
    options: tuple[str, ...] = ()  # option groups of its command: engine, bootstrap, scoring, font, root
    priority: int = 0  # among jobs ready at once, the higher first (Snakemake's priority)
    planned: bool = False  # the plan runs it (a stage that calls models, or one they read from)
    uses: tuple[str, ...] = ()  # folders of the package's resources its work reads (prompts, rubrics, known answers)
    report: tuple[str, ...] = ()  # outputs shown in Snakemake's report
    caption: str = ""  # the report's caption file (default: the name)

    @property
    def command_name(self) -> str:
        return self.command or self.name.replace("_", "-")

    @property
    def labels(self) -> tuple[str, ...]:
        """The job's labels: its rule's wildcards."""
        return self.jobs.names

    @property
    def records_inputs(self) -> bool:
        """A table or figure: its provenance (``meta``) records the checksum of every input."""
        return "meta" in self.outputs

    def files(self, which: str, scope: Scope, labels: Labels) -> dict[str, list[str]]:
        """The job's declared ``inputs`` or ``outputs``, resolved: name -> paths."""
        specs = self.inputs if which == "inputs" else self.outputs
        cells = self.cells(scope.run, labels)
        return {name: spec.paths(scope, labels, cells) for name, spec in specs.items()}

    def registry_entries(self, scope: Scope, labels: Labels) -> list[str]:
        return (self.entries or self.starts)(scope, labels)
