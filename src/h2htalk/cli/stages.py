"""Every stage's sub-command, made from the stage table, and the one way a stage's job runs: its labels given as
options (``--model``, ``--embedder``, ...), its settings read from ``--config`` (only what the stage declares), its
files resolved from the table in ``--results`` (and ``--figures``), its function called, its provenance written."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from h2htalk.cli.options import (
    add_bootstrap,
    add_command,
    add_engine,
    add_results,
    engine_options,
    full_config,
    overrides,
    registry_entry,
)
from h2htalk.figures import FIGURE_NAMES
from h2htalk.progress import summary
from h2htalk.settings import STUDIES, VARIANTS
from h2htalk.stages.spec import Done, Job, Stage
from h2htalk.stages.table import STAGES
from h2htalk.subtasks import SUBTASK_KEYS


class RunModels:
    """How a job run for real reaches its models: registry entries at their prefetched commits, and engines started
    here (or the running server of ``--base-url``)."""

    def __init__(self, args: argparse.Namespace, config: dict[str, Any]) -> None:
        self.args, self.config = args, config

    def entry(self, name: str, pinned: bool = True) -> dict[str, Any]:
        return registry_entry(self.config, name, self.args.results if pinned else None)

    def engines(self, names: list[str]) -> Any:
        return engine_options(self.args, self.config, names)


def _judge(role: str) -> Callable[[argparse.ArgumentParser, Stage], None]:
    """``--judge``, the judge model of ``role`` (the config section the stage's option group names)."""

    def add(parser: argparse.ArgumentParser, stage: Stage) -> None:
        parser.add_argument("--judge", help=f"the judge model (overrides {role}.model)")
        overrides(parser, judge=f"{role}.model")

    return add


def _scoring(parser: argparse.ArgumentParser, stage: Stage) -> None:
    add_bootstrap(parser)
    parser.add_argument("--tokenizer", choices=["jieba", "char"], help="lexical tokens (overrides scoring.tokenizer)")
    parser.add_argument("--cache-dir", help="the embedding cache's folder (overrides scoring.cache_dir)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    overrides(parser, tokenizer="scoring.tokenizer", cache_dir="scoring.cache_dir")


def _font(parser: argparse.ArgumentParser, stage: Stage) -> None:
    parser.add_argument("--font", help="a font file with Chinese glyphs, or auto (overrides figures.cjk_font)")
    overrides(parser, font="figures.cjk_font")


def _root(parser: argparse.ArgumentParser, stage: Stage) -> None:
    parser.add_argument("--root", help="the checkout, for its git revision (default: the one this package runs from)")


def _upstream(parser: argparse.ArgumentParser, stage: Stage) -> None:
    parser.add_argument("--upstream-dir", help="copy from this folder instead of downloading (overrides upstream_dir)")
    overrides(parser, upstream_dir="upstream_dir")


def _figure_name(value: str) -> str:
    """A figure by its name (fig4_wordcloud) or its number (4)."""
    return FIGURE_NAMES.get(int(value), value) if value.isdigit() else value


LABEL_TYPES: dict[str, Callable[[str], str]] = {"figure": _figure_name}
LABEL_CHOICES = {"subtask": SUBTASK_KEYS, "variant": VARIANTS, "study": STUDIES, "figure": tuple(FIGURE_NAMES.values())}

OPTIONS: dict[str, Callable[[argparse.ArgumentParser, Stage], None]] = {
    "engine": lambda parser, stage: add_engine(parser),
    "rubric_judge": _judge("rubric_judge"),
    "study_judge": _judge("study_judge"),
    "bootstrap": lambda parser, stage: add_bootstrap(parser),
    "scoring": _scoring,
    "font": _font,
    "root": _root,
    "upstream": _upstream,
}


def register(sub: Any) -> None:
    for stage in STAGES:
        parser = add_command(sub, stage.command_name, lambda args, stage=stage: run_stage(stage, args), stage.help,
                             stage.reads, config=True)  # fmt: skip
        add_results(parser)
        for label in stage.labels:
            kind, choices = LABEL_TYPES.get(label, str), LABEL_CHOICES.get(label)
            parser.add_argument(f"--{label}", required=True, type=kind, choices=choices, help=f"the job's {label}")
        for group in stage.options:
            OPTIONS[group](parser, stage)


def run_stage(stage: Stage, args: argparse.Namespace) -> int:
    """Run one job of ``stage``: the one way every rule and every stage command runs a stage."""
    config = full_config(args)
    labels = {label: getattr(args, label) for label in stage.labels}
    done = run_job(stage.job(config, args.results, labels, RunModels(args, config), options=args, stages=STAGES))
    summary(done.facts, subject=done.subject, out=done.out)
    return 0


def run_job(job: Job) -> Done:
    """Call the stage's function on ``job``; a table's or figure's provenance records every input it read."""
    done = job.call()
    if job.stage.records_inputs:
        from h2htalk.provenance import write_table_meta

        inputs = [p for name, paths in job.inputs.items() if name != "provenance" for p in paths if os.path.exists(p)]
        store, about = job.config.get("review", {}).get("store"), {}
        if job.stage.ratings and store and os.path.exists(store):
            from h2htalk.desk_store.store import log_state

            inputs.append(store)
            about[str(store)] = log_state(store)  # the log the table's ratings came from, named by its head
        write_table_meta(job.output("meta"), job.input("provenance"), inputs, about)
    return done
