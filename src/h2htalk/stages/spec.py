"""What a stage is: one value that says what it reads, what it makes, what it runs over and where it runs.

A ``Stage`` is declared once, at the function that runs its jobs (``@stage(...)``), and checked there when it
loads (``h2htalk.stages.declare``); the registry (``h2htalk.stages.table``) collects them in pipeline order. The
workflow makes its rule from it, the ``h2htalk`` command its sub-command, the freshness check its part of the
result graph, the plan its model calls, the run's closing lines and report its product, and ``docs/stages.md``
its reference. Its files are declared as the kinds below.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any, Literal, Protocol

from h2htalk.cells import RunCells
from h2htalk.commands import OptionGroup
from h2htalk.errors import H2HTalkError
from h2htalk.layout import Cell, Layout
from h2htalk.sheets import Sheet
from h2htalk.stages.steps import Step


class StageError(H2HTalkError):
    """A stage declared wrong: raised as its module loads (``h2htalk.stages.declare``), or, for what only a job
    shows, when the job runs."""


Labels = Mapping[str, str]  # a job's wildcards: model, embedder, subtask, variant, study, figure
Where = Literal["local", "cpu", "model", "embedder"]
EachFile = Callable[[str, Cell], str]  # a stage's ``each``: the path of its declared file ``name`` of one cell


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


def label_values(found: Iterable[str]) -> Iterable[str]:
    """A label's values, as a function of the run gives them: one string would be as many jobs as its letters."""
    if isinstance(found, str | bytes | bytearray):
        raise TypeError(f"{found!r} is one string, not a list of values")
    return found


@dataclass(frozen=True)
class Each:
    """``kind`` of every cell of the job (a cell kind of ``Layout.cell_path``): the freshness graph links a cell's
    outputs to its own inputs."""

    kind: str

    def of(self, scope: Scope, cell: Cell) -> str:
        return scope.results.cell_path(self.kind, cell)

    def paths(self, scope: Scope, labels: Labels, cells: Sequence[Cell]) -> list[str]:
        return unique(self.of(scope, cell) for cell in cells)


@dataclass(frozen=True)
class One:
    """One result of ``kind`` with the job's labels; ``over``: one for each value of a label
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
    directory: bool = False  # a folder of files (a bundle: the viewer, an export)

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
    """A table's or figure's files: name -> suffix after ``stem`` (its provenance is added by ``stage``)."""
    return {name: Figure(stem, s) for name, s in suffixes.items()}


def no_cells(run: RunCells, labels: Labels) -> list[Cell]:
    return []


def no_models(scope: Scope, labels: Labels) -> list[str]:
    return []


class Over:
    """The jobs of a stage: one for every combination of the run's values of its labels (none: one job), or those
    ``combos`` lists (labels whose values depend on each other)."""

    def __init__(
        self, combos: Callable[[RunCells], Iterable[tuple[str, ...]]] | None = None, /,
        **values: Callable[[RunCells], Iterable[str]],
    ) -> None:  # fmt: skip
        self.values, self.combos = values, combos

    def __call__(self, run: RunCells) -> list[dict[str, str]]:
        if self.combos is not None:
            combos: Iterable[tuple[str, ...]] = dict.fromkeys(self.combos(run))
        else:
            combos = itertools.product(*(list(dict.fromkeys(label_values(f(run)))) for f in self.values.values()))
        found = [tuple(combo) for combo in combos]
        if wrong := next((combo for combo in found if len(combo) != len(self.values)), None):  # else zip's own error
            raise ValueError(f"{wrong!r}: {len(wrong)} values for the labels {', '.join(self.values) or '(none)'}")
        return [dict(zip(self.values, combo, strict=True)) for combo in found]


# a product's provenance, which the machinery adds to its declaration (``stage``): the run's as an input, and a
# ``.meta.json`` beside its first output (the checksum of every input it read)
PROVENANCE, META = "provenance", "meta"
ProductKind = Literal["table", "figure", "export"]  # the report's category: Tables, Figures, Exports


@dataclass(frozen=True)
class Product:
    """A table, figure or export a stage makes: the one place it is named. ``main``: the output opened to read it
    (``inner``: its file inside a bundle's folder); ``shown``: the outputs in Snakemake's report; ``first``: among
    what a run says to open first."""

    kind: ProductKind
    title: str | Mapping[str, str]  # "Table 2": the closing lines' label (by the job's one label, where it has one)
    caption: str | Mapping[str, str]  # what it is, in a few words (the report's caption is ``report/NAME.rst``)
    main: str
    shown: tuple[str, ...] = ()
    first: bool = False
    inner: str = ""
    listed: bool = True  # in a run's closing lines (Table 2's partial form and its pairs are Table 2's parts)

    def opened(self, files: Mapping[str, Sequence[str]]) -> Path:
        """The file opened to read it, among its job's outputs (``files``)."""
        return Path(files[self.main][0], self.inner)

    def where(self, files: Mapping[str, Sequence[str]]) -> str:
        """Where a job put it, from the job's outputs: its main file, then the others that are there, by what follows
        the main file's stem where they share it (``table1.md (+ .csv .tex)``); its provenance left out."""
        main = self.opened(files)
        stem = main.stem
        there = [Path(p) for name, ps in files.items() if name != META for p in ps if os.path.isfile(p)]
        beside = sorted(p.name.removeprefix(stem) if p.name.startswith(stem) else p.name for p in there if p != main)
        return f"{main}" + (f" (+ {' '.join(beside)})" if beside else "")

    def about(self, labels: Labels) -> tuple[str, str]:
        """(title, caption) of the job of ``labels``."""
        title, caption = (text if isinstance(text, str) else text[next(iter(labels.values()))]
                          for text in (self.title, self.caption))  # fmt: skip
        return title, caption


@dataclass(frozen=True)
class Grows:
    """The work of a job that starts no model that grows with the run (``plan.work``): ``per`` seconds (a key of the
    throughput table's ``cpu`` section) for each of the run's planned requests of ``steps`` (none named: every
    request), and for a job of one model (a ``model`` label) only those of its model (one whose model asks none, a
    baseline answering from the instances: as many as the model with the most)."""

    per: str
    steps: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stage:
    """One stage: its rule, its command and its part of the plan, the freshness graph and the reference."""

    name: str  # the rule's name
    run: Callable[..., Any]  # the function that does the work: its parameters are what the job is given
    help: str
    reads: tuple[str, ...] = ()  # config keys, dotted; "-key" removes a key of a section read whole
    jobs: Over = field(default_factory=Over)  # the labels of each job of a run
    cells: Callable[[RunCells, Labels], list[Cell]] = no_cells  # the job's cells, which its ``Each`` files are of
    inputs: Mapping[str, FileSpec] = field(default_factory=dict)
    outputs: Mapping[str, FileSpec] = field(default_factory=dict)
    # folders it adds to and keeps across runs (a history): not outputs, which Snakemake removes before a job runs
    keeps: Mapping[str, FileSpec] = field(default_factory=dict)
    starts: Callable[[Scope, Labels], list[str]] = no_models  # registry names whose engines it starts (where="model")
    entries: Callable[[Scope, Labels], list[str]] | None = None  # registry entries it reads (default: ``starts``)
    ratings: tuple[Sheet, ...] = ()  # the review store's sheets it reads (a job of one model: that model's ratings)
    where: Where = "local"
    env: str = "data"
    memory_mb: int = 500
    minutes: int = 5  # runtime
    command: str = ""  # the sub-command (default: the name with dashes)
    options: tuple[OptionGroup, ...] = ()  # option groups of its command
    priority: int = 0  # among jobs ready at once, the higher first (Snakemake's priority)
    planned: bool = False  # the plan runs it (a stage that calls models, or one they read from)
    plans: bool = False  # it runs every planned stage's function, so it reads every key they read
    steps: tuple[Step, ...] = ()  # its model calls, as the plan counts them and the throughput table prices them
    grows: Grows | None = None  # its job's work that grows with the run (the time said before a run counts it)
    uses: tuple[str, ...] = ()  # folders of the package's resources its work reads (prompts, rubrics, known answers)
    product: Product | None = None  # a table, figure or export: its provenance (``meta``) is added to its outputs
    # in the run's default target (``all``) where this says so for the run's config (default: a product is)
    in_all: bool | Callable[[Mapping[str, Any]], bool] | None = None
    targets: str | Callable[[Labels], str] = ""  # a named target of all its jobs (``snakemake scores``), or of each

    @property
    def command_name(self) -> str:
        return self.command or self.name.replace("_", "-")

    @property
    def labels(self) -> tuple[str, ...]:
        """The job's labels: its rule's wildcards."""
        return tuple(self.jobs.values)

    def step(self, part: str = "") -> str:
        """The name of ``part`` of its model calls (none: its own name; ``judge.sample``: its part ``judge``'s
        sample), one it declares (``steps``)."""
        name = f"{self.name}.{part}" if part else self.name
        if not any(name in step.names(self.name) for step in self.steps):
            raise ValueError(f"stage {self.name!r} declares no step {name!r} (its steps=...)")
        return name

    def in_default_target(self, config: Mapping[str, Any]) -> bool:
        if self.in_all is None:
            return self.product is not None
        return self.in_all(config) if callable(self.in_all) else self.in_all

    def files(self, which: Literal["inputs", "outputs", "keeps"], scope: Scope, labels: Labels) -> dict[str, list[str]]:
        """The job's declared ``inputs``, ``outputs`` or ``keeps``, resolved: name -> paths."""
        cells = self.cells(scope.run, labels)
        return {name: spec.paths(scope, labels, cells) for name, spec in getattr(self, which).items()}

    def job(self, config: Mapping[str, Any], results: Layout, labels: Labels, models: Models, **more: Any) -> Job:
        """The job of ``labels`` in the run of ``config`` (validated) and ``results``: the settings it reads, its cells
        and its files resolved (``more``: the command's ``options``, the registry's ``stages``)."""
        from h2htalk.config import settings_view

        scope, view = Scope(config, results), settings_view(config, self.reads, f"stage {self.name}")
        return Job(
            self, view, results, dict(labels), self.cells(scope.run, labels),
            self.files("inputs", scope, labels), self.files("outputs", scope, labels), models, **more,
        )  # fmt: skip


@cache
def typed_settings() -> dict[str, type]:
    """The settings a parameter may ask for by its type: the classes made from the config alone (not the base of
    those made from one section, which names none)."""
    from h2htalk import settings

    return {
        name: value for name, value in vars(settings).items()
        if inspect.isclass(value) and hasattr(value, "from_config") and value is not settings.FromSection
        and len(inspect.signature(value.from_config).parameters) == 1
    }  # fmt: skip


def typed_setting(annotation: Any) -> type | None:
    """The settings class a parameter's annotation names (as text, or the class itself), or None."""
    return next((kind for name, kind in typed_settings().items() if annotation in (name, kind)), None)


@dataclass(frozen=True)
class Done:
    """What a job says when it ends: ``STAGE SUBJECT: FACTS -> OUT (TIME)``, its stage's name first."""

    facts: str
    subject: str = ""
    out: str | os.PathLike[str] | None = None  # a product's default: where it went (``Product.where``)


class Models(Protocol):
    """How a job reaches models: registry entries and engines, for real or planned."""

    def entry(self, name: str, pinned: bool = True) -> dict[str, Any]: ...

    def engines(self, names: list[str]) -> Any: ...


class Declared(dict[str, Any]):
    """A job's files by name, as its function is given them: one it does not declare is named with those it does."""

    def __init__(self, stage: str, files: Mapping[str, Any]) -> None:
        super().__init__(files)
        self.stage = stage

    def __missing__(self, name: str) -> Any:
        raise StageError(f"stage {self.stage}: no file {name!r} is declared (its files: {', '.join(self)})")


@dataclass
class Job:
    stage: Stage
    config: dict[str, Any]  # only what the stage reads
    results: Layout
    labels: dict[str, str]
    cells: list[Cell]
    inputs: dict[str, list[str]]
    outputs: dict[str, list[str]]
    models: Models
    options: argparse.Namespace = field(default_factory=argparse.Namespace)
    stages: tuple[Stage, ...] = ()  # the registry's (what the plan plans)

    def call(self) -> Done:
        """Run the stage's function, given what its parameters name (``argument``): what it says."""
        done = self.stage.run(**{name: self.argument(name, p.annotation)
                                 for name, p in inspect.signature(self.stage.run).parameters.items()})  # fmt: skip
        if not isinstance(done, Done):
            raise StageError(f"stage {self.stage.name}: {self.stage.run.__qualname__} returned {done!r}, not a Done")
        return done

    def argument(self, name: str, annotation: Any) -> Any:
        """A file the stage declares (one path, or a list where it may be several), a label, a typed setting, or what
        the machinery gives (config, run, cells, results, models, options, each, inputs, outputs, stage: the declaration
        it runs as, stages)."""
        for files, specs in ((self.inputs, self.stage.inputs), (self.outputs, self.stage.outputs)):
            if name in specs:
                one = isinstance(specs[name], Figure) or (isinstance(specs[name], One) and specs[name].over is None)
                return files[name][0] if one else files[name]
        if name in self.labels:
            return self.labels[name]
        if kind := typed_setting(annotation):
            return kind.from_config(self.config)
        if name == "outputs":  # the one-file outputs by name (a table's csv, md, tex, ...)
            return Declared(
                self.stage.name, {name: paths[0] for name, paths in self.outputs.items() if len(paths) == 1}
            )
        return Declared(self.stage.name, self.inputs) if name == "inputs" else getattr(self, name)

    @property
    def run(self) -> RunCells:
        return RunCells(self.config)

    def each(self, name: str, cell: Cell) -> str:
        """The path of input or output ``name`` (declared ``Each``) of one of the job's cells."""
        spec = self.stage.inputs.get(name) or self.stage.outputs.get(name)
        if not isinstance(spec, Each):
            each = [n for n, s in (*self.stage.inputs.items(), *self.stage.outputs.items()) if isinstance(s, Each)]
            raise StageError(f"stage {self.stage.name}: each({name!r}): no file of each cell of that name ({each})")
        return spec.of(Scope(self.config, self.results), cell)
