"""Every stage's sub-command, made from the stage table, and the one way a stage's job runs: its labels given as
options (``--model``, ``--embedder``, ...), its settings read from ``--config`` (only what the stage declares), its
files resolved from the table in ``--results`` (and ``--figures``), its function called, its provenance written."""

from __future__ import annotations

import argparse
import os
from functools import partial
from typing import Any

from h2htalk.cli.options import OPTIONS, add_command, add_results, full_config
from h2htalk.config import load_registry, registry_entry, registry_files
from h2htalk.figures import FIGURE_NAMES
from h2htalk.layout import LABEL_VALUES
from h2htalk.progress import summary
from h2htalk.stages.spec import META, PROVENANCE, Stage, StageError
from h2htalk.stages.table import STAGES


class RunModels:
    """How a job run for real reaches its models: registry entries at their prefetched commits, and engines started
    here (or the running server of ``--base-url``)."""

    def __init__(self, args: argparse.Namespace, config: dict[str, Any]) -> None:
        self.args, self.config = args, config

    def entry(self, name: str, pinned: bool = True) -> dict[str, Any]:
        return registry_entry(self.config, name, self.args.results if pinned else None)

    def engines(self, names: list[str]) -> Any:
        from h2htalk.llm.calls import EngineOptions

        registry, args = load_registry(registry_files(self.config)), self.args
        return EngineOptions.reaching(
            {name: registry[name] for name in names}, self.config, lambda m: args.results.path("model_file", model=m),
            getattr(args, "server_log", None), getattr(args, "base_url", None), getattr(args, "served_model", None),
        )  # fmt: skip


def _figure_name(value: str) -> str:
    """A figure by its name (fig4_wordcloud) or its number (4)."""
    return FIGURE_NAMES.get(int(value), value) if value.isdigit() else value


LABEL_CHOICES = {**LABEL_VALUES, "figure": tuple(FIGURE_NAMES.values())}


def register(sub: Any) -> None:
    for stage in STAGES:
        parser = add_command(sub, stage.command_name, partial(run_stage, stage), stage.help, stage.reads, config=True)
        add_results(parser)
        parser.set_defaults(job_name=stage.name)  # its progress lines' name: the plan's, the logs'
        try:
            for label in stage.labels:
                kind, choices = _figure_name if label == "figure" else str, LABEL_CHOICES.get(label)
                parser.add_argument(f"--{label}", required=True, type=kind, choices=choices, help=f"the job's {label}")
            for group in ("engine",) * (stage.where == "model") + stage.options:  # a model job's: how it reaches them
                OPTIONS[group](parser)
        except argparse.ArgumentError as exc:  # a label named as an option of its command (--results, --concurrency)
            raise StageError(f"stage {stage.name}: a label or option group: {exc}") from None


def missing_inputs(inputs: dict[str, list[str]]) -> list[tuple[str, str]]:
    return [(name, path) for name, paths in inputs.items() for path in paths if not os.path.exists(path)]


def missing_input(stage: Stage, first: tuple[str, str], missing: list[tuple[str, str]]) -> StageError:
    return StageError(f"stage {stage.name}: inputs.{first[0]}: {first[1]} is missing (declared inputs missing:"
                      f" {len(missing)})")  # fmt: skip


def run_stage(stage: Stage, args: argparse.Namespace) -> int:
    """Run one job of ``stage``: the one way every rule and every stage command runs a stage."""
    config = full_config(args)
    labels = {label: getattr(args, label) for label in stage.labels}
    job = stage.job(config, args.results, labels, RunModels(args, config), options=args, stages=STAGES)
    provenance = job.inputs.get(PROVENANCE, [])
    if provenance and not os.path.exists(provenance[0]):  # its table is not made untraced
        raise missing_input(stage, (PROVENANCE, provenance[0]), missing_inputs(job.inputs))
    for path in (path for paths in job.outputs.values() for path in paths):  # as Snakemake does before a job
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    try:
        done = job.call()
    except FileNotFoundError as exc:  # run by hand before what makes its inputs: said as Snakemake would say it
        missing = missing_inputs(job.inputs)  # looked for only here: a job that runs stats none of its inputs
        gone = [m for m in missing if exc.filename and os.path.normpath(m[1]) == os.path.normpath(exc.filename)]
        if not gone:  # another file (a program, a cache): its own error
            raise
        raise missing_input(stage, gone[0], missing) from exc
    unwritten = [p for name, ps in job.outputs.items() if name != META for p in ps if not os.path.exists(p)]
    if unwritten:  # said here, not as Snakemake's missing outputs after waiting for a slow file system
        raise StageError(f"stage {stage.name}: declared outputs it did not write: {', '.join(unwritten)}")
    if stage.product:  # a table's or figure's provenance records every input it read
        from h2htalk.provenance import write_table_meta

        inputs = [p for name, paths in job.inputs.items() if name != PROVENANCE for p in paths if os.path.exists(p)]
        store, about = job.config["review"]["store"] if stage.ratings else None, {}
        if store and os.path.exists(store):
            from h2htalk.desk_store.store import log_state

            inputs.append(store)
            about[str(store)] = log_state(store)  # the log the table's ratings came from, named by its head
        write_table_meta(job.outputs[META][0], job.inputs[PROVENANCE][0], inputs, about)
    # a product says where it went, as the run's closing lines do, unless its function says otherwise
    out = done.out if done.out is not None or stage.product is None else stage.product.where(job.outputs)
    summary(done.facts, subject=done.subject, out=out)
    return 0
