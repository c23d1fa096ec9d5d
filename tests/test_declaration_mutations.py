"""Every real declaration, with one mistake made in it, fails as it loads, naming the stage and the field: the
checks of ``h2htalk.stages.declare`` hold for the shapes the workflow's own stages have (products, stages sharing a
function, files of each cell, model and embedder jobs), not only for the toy stages of ``test_stage_declarations``.
The mistakes are those a newcomer copying a stage makes: a misspelt key, kind, option group, folder or label; a file
declared and not taken, or taken and not declared; files of each cell without cells; a file another stage writes.
Every real command (``@command``) meets the same: a misspelt key or option group, choices of no parameter, a
parameter's help line left out."""

from __future__ import annotations

import argparse
import functools
import inspect
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from h2htalk.cli.commands import add
from h2htalk.commands import Command, CommandError, command, declared_in
from h2htalk.sheets import REVIEW_SCORES
from h2htalk.stages.declare import StageError, check_one_writer, checked
from h2htalk.stages.spec import META, Cells, Each, Figure, One, Over, Stage, no_cells, no_models
from h2htalk.stages.table import CHECKED_RUN, STAGES

Mistake = tuple[str, Any, str]  # what was done, the declaration with it (a Stage, a Command), the field its error names


def mistakes(stage: Stage) -> Iterator[Mistake]:
    """The mistakes that apply to ``stage``, each made alone."""
    parameters = inspect.signature(stage.run).parameters
    yield "a misspelt key", replace(stage, reads=(*stage.reads, "scoring.tokeniser")), "reads 'scoring.tokeniser'"
    yield "a key no section has", replace(stage, reads=(*stage.reads, "cluster.gpu_parts")), "reads 'cluster.gpu_parts'"
    yield "an input not taken", replace(stage, inputs={**stage.inputs, "extra": One("provenance")}), "inputs.extra"
    if "outputs" not in parameters:  # else its function may write it through ``outputs`` (a job says if it does not)
        yield "an output not taken", replace(stage, outputs={**stage.outputs, "extra": One("plan")}), "outputs.extra"
    for field in ("inputs", "outputs"):
        taken = next((name for name in getattr(stage, field) if name in parameters), None)
        if taken:
            rest = {name: spec for name, spec in getattr(stage, field).items() if name != taken}
            yield f"{field}.{taken} not declared", replace(stage, **{field: rest}), taken
    for field in ("inputs", "outputs", "keeps"):
        files = getattr(stage, field)
        kind = next(((name, spec) for name, spec in files.items() if isinstance(spec, Each | One | Cells)), None)
        if kind:
            name, spec = kind
            misspelt = {**files, name: replace(spec, kind=spec.kind + "s")}
            yield f"a misspelt kind of {field}", replace(stage, **{field: misspelt}), f"{field}.{name}"
    if any(isinstance(spec, Each) for spec in (*stage.inputs.values(), *stage.outputs.values())):
        yield "files of each cell without cells", replace(stage, cells=no_cells), "declares no cells"
    yield "a misspelt place", replace(stage, where="gpu"), "where"
    if stage.where == "model":
        yield "a model job that starts none", replace(stage, starts=no_models), "starts"
    else:
        yield "models started by another job", replace(stage, starts=lambda scope, labels: ["m"]), "starts"
        if "embedder" not in stage.labels:
            yield "an embedder job of no embedder", replace(stage, where="embedder"), "where"
    yield "the engine's options", replace(stage, options=(*stage.options, "engine")), "options"
    yield "a misspelt option group", replace(stage, options=(*stage.options, "bootstrapp")), "options"
    if "options" in parameters:  # its function reads a flag of them (--no-cache)
        yield "its option groups dropped", replace(stage, options=()), "options"
    yield "a misspelt resources folder", replace(stage, uses=(*stage.uses, "prompt")), "uses 'prompt'"
    if stage.product:
        yield "a product of no output", replace(stage, product=replace(stage.product, main="tex2")), "product.main"
        yield "a misspelt product kind", replace(stage, product=replace(stage.product, kind="tabel")), "product"
        name, spec = next((name, spec) for name, spec in stage.outputs.items() if isinstance(spec, Figure))
        if not spec.directory:
            for what, suffix in (("without its dot", ""), ("with its dot at the end", ".")):
                mistaken = {**stage.outputs, name: replace(spec, suffix=spec.suffix.replace(".", "") + suffix)}
                yield f"a suffix {what}", replace(stage, outputs=mistaken), f"outputs.{name}"
        yield "a product showing none", replace(stage, product=replace(stage.product, shown=("png2",))), "product"
    if stage.steps:
        yield "model calls the plan leaves out", replace(stage, planned=False), "steps"
    if stage.labels:
        listed = Over(**{label: ["x"] for label in stage.labels})  # a list, not a function of the run
        yield "a label's values not a function", replace(stage, jobs=listed), "jobs"
    if not {"*", "review", "review.store"} & set(stage.reads):
        yield "ratings without the store", replace(stage, ratings=(REVIEW_SCORES,)), "ratings"


CASES = [(stage.name, what, mistaken, field) for stage in STAGES for what, mistaken, field in mistakes(stage)]


@pytest.mark.parametrize(("name", "what", "mistaken", "field"), CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_a_real_declaration_with_one_mistake_fails_naming_the_stage_and_the_field(name, what, mistaken, field):
    with pytest.raises(StageError) as raised:
        checked(mistaken)
    assert str(raised.value).startswith(f"stage {name}: ") and field in str(raised.value)


def test_every_stage_meets_most_mistakes():
    """The grid is not thin: every stage meets at least the mistakes any declaration can make."""
    for stage in STAGES:
        assert sum(name == stage.name for name, *_ in CASES) >= 10, stage.name


def test_the_real_declarations_are_taken():
    """The grid's starting point: each declaration as it is passes the same checks."""
    for stage in STAGES:
        assert checked(stage) is stage


FIXED_OUTPUTS = [(owner.name, spec) for owner in STAGES if not owner.labels for name, spec in owner.outputs.items()
                 if isinstance(spec, One | Figure) and name != META]  # fmt: skip


@pytest.mark.parametrize("stage", STAGES, ids=lambda stage: stage.name)
def test_a_real_stage_writing_another_stages_file_or_misnaming_a_label_fails_as_the_registry_loads(stage):
    """One file of another stage added to its outputs fails naming both (the error is the later one's, in pipeline
    order); a label its files use renamed in its jobs fails naming it: checked for the run the registry loads with,
    before any rule."""

    def error(mistaken: Stage) -> str:
        with pytest.raises(StageError) as raised:
            check_one_writer(tuple(mistaken if other is stage else other for other in STAGES), CHECKED_RUN)
        return str(raised.value)

    owner, spec = next((owner, spec) for owner, spec in FIXED_OUTPUTS if owner != stage.name)
    both = error(replace(stage, outputs={**stage.outputs, "stolen": spec}))
    named = re.match(r"stage (\w+): outputs\.\w+: \S+ is written by (\w+) too", both)
    assert named and {named[1], named[2]} == {stage.name, owner}, both
    if stage.labels:
        renamed = Over(stage.jobs.combos, **{f"{label}s": values for label, values in stage.jobs.values.items()})
        assert re.match(
            rf"stage {stage.name}: (cells|(outputs|keeps|inputs)\.\w+): KeyError", error(replace(stage, jobs=renamed))
        )


def commands() -> list[Command]:
    from h2htalk.cli.commands import MODULES

    return [function.command for module in MODULES for function in declared_in(module, "command")]


def command_mistakes(declared: Command) -> Iterator[Mistake]:
    """The mistakes that apply to a real command, each made alone: what its declaration names, and each parameter's
    help line left out of its docstring."""
    yield "a misspelt key", replace(declared, reads=(*declared.reads, "review.stor")), "reads 'review.stor'"
    yield "a misspelt option group", replace(declared, options=("scorin",)), "options"
    yield "choices of no parameter", replace(declared, choices={"colour": ("red",)}), "colour"
    for name in declared.parameter_help:

        @functools.wraps(declared.run)
        def unhelped(*args: Any, **kwargs: Any) -> Any: ...

        unhelped.__doc__ = re.sub(rf"^\s*{name}: .*(\n\s{{5,}}.*)*$", "", declared.run.__doc__, flags=re.MULTILINE)
        yield f"no help for {name}", replace(declared, run=unhelped), f"{name}: no help"


COMMAND_CASES = [(c.name, what, mistaken, field) for c in commands() for what, mistaken, field in command_mistakes(c)]


@pytest.mark.parametrize(
    ("name", "what", "mistaken", "field"), COMMAND_CASES, ids=[f"{c[0]}: {c[1]}" for c in COMMAND_CASES]
)
def test_a_real_command_with_one_mistake_fails_naming_it_and_the_field(name, what, mistaken, field):
    """Named as it is declared (``command``) or as its parser is built (``add``): before any command runs."""

    @functools.wraps(mistaken.run)  # declared anew, leaving the real function's declaration as it is
    def declared_again(*args: Any, **kwargs: Any) -> Any: ...

    fields = ("reads", "options", "choices", "metavar", "each", "short")
    with pytest.raises(CommandError) as raised:
        command(mistaken.name, **{field: getattr(mistaken, field) for field in fields})(declared_again)
        add(argparse.ArgumentParser().add_subparsers(), declared_again.command)
    assert str(raised.value).startswith(f"command {name}: ") and field in str(raised.value)


def test_every_real_command_is_built_as_declared():
    for declared in commands():
        add(argparse.ArgumentParser().add_subparsers(), declared)
