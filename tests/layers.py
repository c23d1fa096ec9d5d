"""The layers of ``src/h2htalk``, top to bottom: a module imports only from its own layer or the layers below.

Each layer holds top-level modules and packages of ``h2htalk`` (a package holds its modules; a module or
sub-package listed on its own is in its own layer, the longest name wins; ``__init__`` is the package's own
``__init__.py``). Within a layer, modules of different entries may import one another one way, never both
(``test_layers``). ``docs/layers.md`` shows this list (``layer_table``; a test fails when the two differ).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layer:
    name: str
    holds: tuple[str, ...]
    what: str  # what its entries are, for the docs


LAYERS: tuple[Layer, ...] = (
    Layer(
        "commands", ("__main__", "cli", "run_summary", "workflow_log", "evaluation", "freshness"),
        "what a person or the workflow runs: the `h2htalk` command, `h2htalk eval`, the run's closing summary, the"
        " terminal's log, the check of stale results",
    ),
    Layer("stages", ("stages",), "the stage registry, the rules and commands made from it, and the stage reference"),
    Layer("plan", ("plan",), "the plan of a run: what its stages, given to it, will send and cost"),
    Layer(
        "products", ("export", "reliability", "review", "tables", "figures"),
        "what a run shows: the tables and figures, the judges' card, the review desk, results in other formats",
    ),
    Layer("judging", ("studies", "judge"), "the judges (rubric, safety, needs), their cascade, the studies' runs"),
    Layer("answers", ("generation", "instances"), "the instances the models are given and the answers they give"),
    Layer(
        "people and scores", ("people", "ratings", "desk_store", "scoring", "stats"),
        "people's ratings and their agreement, the scores and the statistics over them",
    ),
    Layer(
        "a run's data", ("data", "prompts", "provenance"),
        "the upstream release fetched and curated, the weights fetched before a run, the prompts, the run's"
        " provenance: the first stages, right above their declarations",
    ),
    Layer(
        "stage declarations", ("stages.spec", "stages.declare", "stages.declared"),
        "what `@stage` declares a stage with (its files, jobs, product), its load-time checks, and what several"
        " stages declare alike: below every module whose functions are stages",
    ),
    Layer(
        "a run's inputs",
        ("config", "cells", "layout", "instance_schema", "subtasks"),
        "the validated configuration, the cells and results tree of a run, the instances' schema, the subtasks",
    ),
    Layer(
        "model calls", ("llm", "prefetch"),
        "every model call, the engines, the records of the weights fetched before a run (the commit each is pinned to)",
    ),
    Layer(
        "foundations",
        ("__init__", "errors", "io", "store", "settings", "hardware", "progress", "resources", "schemas", "sheets",
         "text_match", "versions", "cluster", "tabular", "stages.steps", "commands"),
        "what everything may use: errors, atomic files, the answer cache, typed settings, the machine, progress"
        " lines, the package's resources and schemas, text folding, versions, cluster resources, the table writer,"
        " the names of the stages' steps, `@command` (a command declared at its function)",
    ),
)  # fmt: skip


def entry_of(module: str, layers: tuple[Layer, ...] = LAYERS, package: str = "h2htalk") -> str | None:
    """The entry of ``layers`` that holds ``module`` (a dotted name in ``package``): the longest that names it or
    a package above it; None when none does."""
    relative = "__init__" if module == package else module.removeprefix(package + ".")
    held = [entry for layer in layers for entry in layer.holds if relative == entry or relative.startswith(entry + ".")]
    return max(held, key=len, default=None)


def layer_of(entry: str, layers: tuple[Layer, ...] = LAYERS) -> int:
    """The position of the layer that lists ``entry``, counted from the top."""
    return next(index for index, layer in enumerate(layers) if entry in layer.holds)


def layer_table(layers: tuple[Layer, ...] = LAYERS) -> str:
    """The layers as the docs show them: a Markdown table, top to bottom."""
    rows = [
        f"| {index} | {layer.name} | {', '.join(f'`{entry}`' for entry in layer.holds)} | {layer.what} |"
        for index, layer in enumerate(layers, 1)
    ]
    return "\n".join(["| | layer | modules and packages | what they are |", "|---|---|---|---|", *rows])
