"""``@stage(...)``: a stage declared at the function that runs its jobs, and checked as it loads. A mistake in a
declaration fails the import of its module (and so of the registry), and one across declarations (two stages of
one name, command or file, a step no stage declares, a hidden function) the import of the registry, naming the
stage and the field, before any rule, command or job exists."""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from dataclasses import replace
from importlib import resources
from typing import Any, get_args

from h2htalk.commands import unknown_fields, unknown_options
from h2htalk.config import UndeclaredSetting, schema_defaults, settings_view, wrong_reads
from h2htalk.layout import CELL_KINDS, PATTERNS
from h2htalk.stages.spec import (
    META,
    PROVENANCE,
    Cells,
    Each,
    Figure,
    One,
    Paths,
    ProductKind,
    Stage,
    StageError,
    Where,
    label_values,
    no_cells,
    no_models,
    typed_setting,
)
from h2htalk.stages.steps import declared_steps


def stage(name: str, help: str, **declared: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the function below as the stage ``name`` (the fields of ``Stage``), checked as it loads. A product's
    provenance is added here: the run's provenance as an input, and a ``meta`` file beside its first output (the
    checksum of every input it read). One function may run several stages (decorators stacked, the first one
    first)."""

    def declare(function: Callable[..., Any]) -> Callable[..., Any]:
        if wrong := unknown_fields(Stage, declared):  # targets= misspelt target=: named, not a TypeError
            raise failed(name, function, *wrong.split(": ", 1))
        found = Stage(name, function, help, **declared)
        if found.product is not None:
            for field, made in MADE_BY_THE_MACHINERY.items():
                if made in getattr(found, field):
                    raise failed(name, function, f"{field}.{made}", "a product's provenance, which the machinery adds")
            first = next(iter(found.outputs.values()), None)
            if not isinstance(first, Figure):
                raise failed(name, function, "outputs", "a product's files are in the tables folder (Figure)")
            found = replace(found, inputs={PROVENANCE: One("provenance"), **found.inputs},
                            outputs={META: Figure(first.stem, ".meta.json"), **found.outputs})  # fmt: skip
        elif any(isinstance(spec, Figure) for spec in found.outputs.values()):
            raise failed(name, function, "outputs", "a file in the tables folder is a product's (product=...)")
        function.stages = (checked(found), *getattr(function, "stages", ()))  # type: ignore[attr-defined]
        DECLARED.setdefault(function.__module__, {})[function] = None
        return function

    return declare


# What the machinery gives a stage's function besides its files, labels and typed settings (``Job.argument``)
MACHINERY = frozenset({"config", "run", "cells", "results", "models", "options", "each", "inputs", "outputs", "stage",
                       "stages"})  # fmt: skip
MADE_BY_THE_MACHINERY = {"inputs": PROVENANCE, "outputs": META}  # a product's provenance: never a parameter
READ_BY_MODEL_JOBS = {"model_file", "prefetched_model"}  # the files of the models a job starts (Rules.model_files)


DECLARED: dict[str, dict[Callable[..., Any], None]] = {}  # module -> the functions declared in it, in order


def declared_first(files: dict[str, Any]) -> list[tuple[str, Any]]:
    """A stage's files by name, those it declares before the provenance the machinery adds (named first in errors)."""
    return sorted(files.items(), key=lambda item: item[0] in MADE_BY_THE_MACHINERY.values())


def failed(name: str, function: Callable[..., Any], field: str, why: str) -> StageError:
    """The error of stage ``name``'s ``field``, declared wrong at ``function``."""
    return StageError(f"stage {name}: {field}: {why} (at {function.__module__}.{function.__qualname__})")


def checked(stage: Stage) -> Stage:
    """``stage``, or a ``StageError`` naming it and the field declared wrong."""

    def fail(field: str, why: str) -> None:
        raise failed(stage.name, stage.run, field, why)

    parameters = inspect.signature(stage.run).parameters
    named = [*stage.inputs, *stage.outputs, *stage.labels]  # a parameter is given one of them, never two
    for name in (n for n in named if named.count(n) > 1 or n in MACHINERY):
        machinery = (
            "the name of an argument the machinery gives (results, config, ...): name the file or label otherwise"
        )
        fail(name, machinery if name in MACHINERY else "named twice among the inputs, outputs and labels: one hides it")
    for name, parameter in parameters.items():
        if not (name in named or name in MACHINERY or typed_setting(parameter.annotation)):
            fail(name, "a parameter that is no declared input, output, label, machinery argument or typed setting")
    for field, files in (("inputs", stage.inputs), ("outputs", stage.outputs), ("keeps", stage.keeps)):
        for name, spec in files.items():
            kinds = {Each: CELL_KINDS, Cells: CELL_KINDS, One: PATTERNS}.get(type(spec))
            if kinds is not None and spec.kind not in kinds:  # type: ignore[union-attr]
                listed = "layout.CELL_KINDS" if kinds is CELL_KINDS else "layout.PATTERNS"
                fail(f"{field}.{name}", f"{spec.kind!r} is no kind of {listed}")  # type: ignore[union-attr]
    for field, files in (("inputs", stage.inputs), ("outputs", stage.outputs)):
        for name, spec in files.items():  # a file of each cell may be reached through ``each(name, cell)``
            reached = (name, field, "each") if isinstance(spec, Each) else (name, field)
            if not any(n in parameters for n in reached) and name != MADE_BY_THE_MACHINERY[field]:
                fail(f"{field}.{name}", f"declared but not a parameter of {stage.run.__name__}")
            if isinstance(spec, Each) and stage.cells is no_cells:
                fail(f"{field}.{name}", "a file of each cell, but the stage declares no cells (cells=...)")
    if stage.steps and not stage.planned:
        fail("steps", "model calls the plan would not count: a stage that declares them is planned (planned=True)")
    if any(wrong := wrong_reads(stage.reads, "the stage")):
        fail(*wrong)
    view = settings_view(schema_defaults(), stage.reads, "the stage")
    try:
        _ = view["review"]["store"] if stage.ratings else None
    except UndeclaredSetting:
        fail("ratings", "sheets of the review store, which 'review.store' names: declare that key (reads=)")
    for name, parameter in parameters.items():  # a typed setting reads only what the stage declares
        if kind := typed_setting(parameter.annotation):
            try:
                kind.from_config(view)
            except KeyError as exc:
                fail(name, f"{kind.__name__}: {exc}")
    for folder in stage.uses:  # a folder that is not there would leave the stage out of date when its files change
        if not resources.files("h2htalk.resources").joinpath(folder).is_dir():
            fail(f"uses {folder!r}", "no folder of the package's resources (src/h2htalk/resources/)")
    for label, values in stage.jobs.values.items():  # a job's labels come from the run when the registry loads
        if not callable(values):
            fail(f"jobs {label}", f"{values!r} is not a function of the run's cells (Over({label}=lambda run: ...))")
    if wrong := unknown_options(stage.options):
        fail("options", wrong)
    if "options" in parameters and not stage.options and stage.where != "model":  # its flags gone, no value read
        fail("options", f"{stage.run.__name__} takes its command's options, but the stage declares no option group")
    if "engine" in stage.options:  # a model job's: declared again, a second --server-log would break every command
        fail("options", "'engine': the engine's options are a model job's (where='model'), which has them already")
    if not (stage.in_all is None or isinstance(stage.in_all, bool) or callable(stage.in_all)):
        fail("in_all", f"{stage.in_all!r} is neither True, False nor a function of the run's config")
    for field in ("memory_mb", "minutes"):  # Snakemake's resources: whole numbers
        if not isinstance(value := getattr(stage, field), int) or isinstance(value, bool) or value <= 0:
            fail(field, f"{value!r} is not a whole number above 0")
    if stage.where not in get_args(Where):
        fail("where", f"{stage.where!r} is none of {', '.join(get_args(Where))}")
    if (stage.where == "model") == (stage.starts is no_models):
        fail("starts", "a stage starts models (starts=...) where, and only where, it is a model job (where='model')")
    if stage.where == "embedder" and "embedder" not in stage.labels:
        fail("where", "an embedder job is placed by its embedder: it runs once per embedder (an 'embedder' label)")
    for name, spec in stage.outputs.items():  # ("csv": "answer_lengthscsv")
        if isinstance(spec, Figure) and not spec.directory and not re.search(r"\.\w+\Z", spec.suffix):
            fail(f"outputs.{name}", f"suffix {spec.suffix!r} has no extension (as '.csv' or '_ranks.csv')")
    if product := stage.product:
        if product.kind not in get_args(ProductKind):
            fail("product", f"kind {product.kind!r} is none of {', '.join(get_args(ProductKind))}")
        if not isinstance(product.first, bool) or not isinstance(product.shown, tuple):
            fail("product", "its first is True or False, and its shown a tuple of its outputs' names")
        for field, name in (("main", product.main), *(("shown", name) for name in product.shown)):
            if name not in stage.outputs:
                fail(f"product.{field} {name!r}", "none of its outputs")
        if product.inner and not getattr(stage.outputs[product.main], "directory", False):
            fail("product inner", f"a file inside its main output, which is no folder ({product.main!r})")
        if any(not isinstance(text, str) for text in (product.title, product.caption)) and len(stage.labels) != 1:
            fail("product", "a title or caption by the job's label, but its jobs have not one label")
    return stage


def check_step_names(stages: tuple[Stage, ...]) -> None:
    """Every step a declaration names (the answers a step's verdicts are of, the steps a job's work grows with) is
    one some stage declares: a misspelt name would put a judge out of its place, or count no request."""
    declared = declared_steps(stages)
    for stage in stages:
        named = [("steps", step.judges) for step in stage.steps if step.judges]
        named += [("grows", name) for name in (stage.grows.steps if stage.grows else ())]
        for field, name in named:
            if name not in declared:
                raise StageError(f"stage {stage.name}: {field}: {name!r} is no step a stage declares")


def check_names(stages: tuple[Stage, ...]) -> None:
    """No two stages have one name or one command (a rule, a sub-command and a plan step each)."""
    seen: dict[tuple[str, str], Stage] = {}
    targets = {stage.targets: stage for stage in stages if isinstance(stage.targets, str) and stage.targets}
    for target in targets.keys() & {"all", *(stage.name for stage in stages)}:
        raise StageError(f"stage {targets[target].name}: targets: {target!r} is the name of a rule too")
    for stage in stages:
        if not stage.name.isidentifier() or stage.name == "all":  # a rule's name, and a word of its command line
            raise StageError(f"stage {stage.name}: name: a rule's name is a Python identifier, and not 'all'")
        for field, name in (("name", stage.name), ("command", stage.command_name)):
            if (first := seen.setdefault((field, name), stage)) is not stage:
                functions = " and ".join(f"{s.run.__module__}.{s.run.__qualname__}" for s in (first, stage))
                raise StageError(f"stage {stage.name}: {field}: {name!r} is declared twice ({functions})")


def check_one_writer(
    stages: tuple[Stage, ...], scope: Any, run: str = "the schema's default run", inputs: bool = True
) -> tuple[dict[str, str], set[str]]:
    """Every job of ``stages`` in the ``run`` of ``scope`` resolves its outputs (and its ``inputs`` and models), and
    no file is written twice (by two stages, or two jobs or files of one), or inside a folder another stage writes
    or keeps (two stages may write one kind of file for different jobs: generate and baseline_answers, each for
    its own models); with ``inputs``, that no stage reads what a later stage writes, or a file of the results or the
    tables folder (``Each``, ``One``, ``Cells``, ``Figure``) that no stage writes. Returns what it resolved: each
    output's stage, and the inputs (with ``inputs``)."""
    writer: dict[str, str] = {}
    folders: dict[str, str] = {}  # a folder output or kept -> its stage
    outputs: dict[str, str] = {}  # an output (not a folder kept) -> its stage
    read: set[str] = set()
    early: dict[str, tuple[str, str]] = {}  # a file read before any stage wrote it: its first reader's (stage, input)
    derived: set[str] = set()  # the inputs of the results or the tables folder (not Paths: a config file, ...)
    fields = ("outputs", "keeps", "inputs") if inputs else ("outputs", "keeps")
    for stage in stages:
        at, made = "jobs", []  # the field being resolved, named where it fails
        try:  # a label its jobs lack, a misspelt list of the run: named here, not by a rule or a job
            jobs = stage.jobs(scope.run)
            at = "in_all"
            stage.in_default_target(scope.config)
            for labels in jobs:
                at = "cells"
                cells = stage.cells(scope.run, labels)
                for field in fields:
                    for name, spec in declared_first(getattr(stage, field)):
                        at = f"{field}.{name}"  # one file however its path is spelt (a/./b, a//b)
                        made.append((field, name, list(map(os.path.normpath, spec.paths(scope, labels, cells)))))
                        derived.update(made[-1][2] if field == "inputs" and not isinstance(spec, Paths) else ())
                at = "starts"  # a list of names: one string is as many models as letters
                if inputs:
                    label_values(stage.starts(scope, labels))
                at = "product"  # its title and caption, by its label where they are so
                if stage.product:
                    stage.product.about(labels)
        except Exception as exc:
            labels = ", ".join(stage.labels) or "none"  # a KeyError is most often a label its jobs lack
            raise StageError(f"stage {stage.name}: {at}: {type(exc).__name__}: {exc}, in {run}"
                             f" (its jobs' labels: {labels})") from exc  # fmt: skip
        for name, paths in ((name, paths) for field, name, paths in made if field == "inputs"):
            read.update(paths)
            for path in (path for path in paths if path not in writer):
                early.setdefault(path, (stage.name, name))
        own: set[str] = set()
        for field, name, paths in ((f, n, ps) for f, n, ps in made if f != "inputs"):
            for path in paths:
                twice = field == "outputs" and path in own  # a folder kept is one all its jobs add to
                if twice or writer.setdefault(path, stage.name) != stage.name:
                    by = "two of its jobs or files" if twice else f"{writer[path]} too"
                    raise StageError(f"stage {stage.name}: {field}.{name}: {path} is written by {by} (in {run})")
                own.add(path)
                if field == "outputs":
                    outputs[path] = stage.name
                if field == "keeps" or getattr(stage.outputs[name], "directory", False):
                    folders[path] = stage.name
    # a later stage's file: a cycle, or a plan that runs a stage before what it reads (its own jobs' files are in order)
    if late := next((p for p in sorted(early.keys() & outputs.keys()) if outputs[p] != early[p][0]), None):
        raise StageError(
            f"stage {early[late][0]}: inputs.{early[late][1]}: {late} is written by {outputs[late]}, which"
            " the pipeline runs after it (a stage reads what earlier stages write: table.PIPELINE's order)"
        )
    # a file of the results or the tables folder no stage writes: a misspelt stem or kind (Snakemake: a missing input)
    if unmade := next((p for p in sorted(derived - writer.keys()) if not any(p.startswith(f"{f}/") for f in folders)),
                      None):  # fmt: skip
        raise StageError(f"stage {early[unmade][0]}: inputs.{early[unmade][1]}: {unmade} is written by no stage (in"
                         f" {run})")  # fmt: skip
    for folder, owner in folders.items():
        for path, name in writer.items():
            if path.startswith(f"{folder}/") and name != owner:
                raise StageError(f"stage {name}: outputs: {path} is inside {folder}, which {owner} writes or keeps")
    return outputs, read


def check_labels(stages: tuple[Stage, ...], scope: Any) -> None:
    """A job's labels are in each of its outputs' paths (else every job of the stage writes one path, which Snakemake
    refuses naming the rule alone), and its cells are its labels' own (a job of one model, its model's cells: the
    run's other cells are ``Cells(kind, cells)``), in the run of ``scope``."""
    for stage in (stage for stage in stages if stage.labels):
        patterns = stage.files("outputs", scope, {label: f"{{{label}}}" for label in stage.labels})
        for name, paths in declared_first(patterns):
            if lacking := [label for label in stage.labels if any(f"{{{label}}}" not in path for path in paths)]:
                field = "cells" if isinstance(stage.outputs[name], Each) else f"outputs.{name}"  # its cells' paths
                raise StageError(f"stage {stage.name}: {field}: no {{{lacking[0]}}} in {paths[0]} ({name}): a job's"
                                 " label is in each of its files' paths, or its jobs would write one file")  # fmt: skip
        for labels in stage.jobs(scope.run):
            for cell in stage.cells(scope.run, labels):
                of = cell.labels()  # its model, variant, subtask or study, and embedder
                if wrong := next((label for label in labels if label in of and of[label] != labels[label]), None):
                    raise StageError(f"stage {stage.name}: cells: the job of {wrong} {labels[wrong]} has a cell of"
                                     f" {of[wrong]}: a job's cells are its labels' own (the run's other cells:"
                                     " Cells(kind, cells))")  # fmt: skip


def check_reached(stages: tuple[Stage, ...], outputs: dict[str, str], read: set[str]) -> None:
    """Each stage of labels (a rule of wildcards, which Snakemake takes as no target) that writes files in a run is one
    a run makes: a target has its files (its product, ``targets=``, ``in_all=``) or a stage reads them; ``outputs``
    (each output's stage) and ``read`` (every input) are that run's, as ``check_one_writer`` resolved them. A stage
    without labels is the target of its name (``snakemake table2``)."""
    writing, reached = set(outputs.values()), {outputs[path] for path in read if path in outputs}
    for stage in (stage for stage in stages if stage.labels and stage.name in writing - reached):
        kinds = {getattr(spec, "kind", "") for spec in stage.outputs.values()}
        if not (stage.product or stage.targets or stage.in_all not in (None, False) or kinds & READ_BY_MODEL_JOBS):
            raise StageError(f"stage {stage.name}: targets: no stage reads its files and no target has them, so no run"
                             " makes them (give it a named target: targets='NAME', snakemake NAME)")  # fmt: skip


def check_reachable(module: str, functions: list[Callable[..., Any]]) -> None:
    """Every function ``module`` declared a stage at is one of its ``functions`` (the module's own names): one hidden
    by a later definition of its name, or declared inside a class, would leave its stages out silently."""
    for function in DECLARED.get(module, {}):
        if function not in functions:
            names = ", ".join(stage.name for stage in function.stages)  # type: ignore[attr-defined]
            wrapped = any(inspect.unwrap(f) is function for f in functions)  # its jobs would call it, not the wrapper
            why = "a decorator above @stage wraps it: put @stage on top" if wrapped else "a later definition of that" \
                " name hides it, or it is not at the module's top level"  # fmt: skip
            raise StageError(f"stage {names}: {module}.{function.__qualname__} is no name of its module ({why})")
