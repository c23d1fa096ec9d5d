"""The plan of a run: what the configured run sends per model and stage, what the caches hold, and what the rest
costs; and the judges of a run from nothing in both modes (full, cascade). Its stage, ``plan``, runs every planned
stage's function with stand-in engines (``plan.chain``) and writes ``plan.csv`` and ``plan.md`` (``plan.report``)."""

from __future__ import annotations

import copy
import glob
import tempfile
from pathlib import Path
from typing import Any

from h2htalk.config import load_registry, registry_files
from h2htalk.io import read_json, write_text_atomic
from h2htalk.layout import Layout
from h2htalk.plan.costs import load_prices, load_throughput
from h2htalk.settings import CASCADE_MODE, FULL_MODE, JUDGE_SECTION_NAMES, JudgeMode
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import REGISTRY
from h2htalk.stages.spec import Done, Grows, Labels, One, Paths, Scope, Stage


def _plan_inputs(scope: Scope, labels: Labels) -> list[str]:
    """What the plan reads: the curated references (a reconstructed benchmark's) or the instance files, the
    answer caches as they are now, the price and throughput tables."""
    config, run = scope.config, scope.run
    instances = config["instances"]
    if instances["source"] == "reconstructed":
        sources = [scope.results.path("curated", subtask=s) for s in run.subtasks]
    else:
        sources = [instances["files"][s] for s in run.subtasks if instances["source"] == "file"]
    folders = {
        config["generation"]["cache_dir"], config["rubric_judge"]["cache_dir"], config["study_judge"]["cache_dir"],
        instances["reconstruct"]["cache_dir"],
    }  # fmt: skip
    caches = sorted(str(p) for folder in folders for p in Path(folder).glob("*.sqlite"))
    return [*sources, *caches, config["plan"]["prices"], config["plan"]["throughput"]]


@stage(
    "plan",
    "count what the configured run sends per model and stage, what the caches hold, and the tokens, GPU-hours"
    " and API cost of the rest (plan.md and plan.csv in the set's results folder)",
    reads=(
        *REGISTRY, "models", "baselines", "subtasks", "variants", "generation", "rubric_judge", "study_judge",
        "instances", "studies", "review.store", "plan",
    ),
    env="generation", memory_mb=4000, minutes=60, plans=True, grows=Grows("request_planned_s"),  # each request
    inputs={"sources": Paths(_plan_inputs)}, outputs={"table": One("plan"), "report": One("plan_md")},
)  # fmt: skip
def plan(
    sources: list[str], table: str, report: str, config: dict[str, Any], results: Layout, stages: tuple[Stage, ...]
) -> Done:
    """Plan the run of ``config`` on ``results``: its ``stages`` (the registry's) run with the plan's engines in a
    scratch tree, the judges again in the mode not configured; the rows go to ``table`` (CSV), the account to
    ``report`` (Markdown) and the terminal. ``sources``: what the plan reads, for the workflow to rerun it."""
    from h2htalk.plan.chain import plan_calls  # the model-call stack and numpy: only when a plan runs
    from h2htalk.plan.report import auto_sample_lines, csv_text, judge_modes, markdown, plan_rows

    prices, throughput = load_prices(config["plan"]["prices"]), load_throughput(config["plan"]["throughput"], stages)
    modes = [JudgeMode.from_config(config, section) for section in JUDGE_SECTION_NAMES]
    configured = {mode.mode for mode in modes}
    registry = load_registry(registry_files(config))
    unknown = sorted({mode.cheap_model for mode in modes} - set(registry))
    judging = [s.name for s in stages if any(step.makes == "verdicts" for step in s.steps)]  # what a mode changes
    with tempfile.TemporaryDirectory(prefix="h2htalk-plan-") as scratch:
        planned = plan_calls(stages, config, results, Path(scratch))
        rows = plan_rows(planned, prices, throughput)
        by_mode, sizes = {}, planned_sizes(Path(scratch))
        for mode in (FULL_MODE, *(() if unknown else (CASCADE_MODE,))):
            if configured == {mode}:
                by_mode[mode] = rows
            else:  # the judges again, on the answers planned above
                again = plan_calls(stages, in_mode(config, mode), results, Path(scratch), only=judging)
                by_mode[mode] = plan_rows(again, prices, throughput)
                sizes = sizes if mode != CASCADE_MODE else planned_sizes(Path(scratch))
    assumed = config["rubric_judge"]["assumed_correlation"], config["rubric_judge"]["assumed_sd"]
    modes = judge_modes(by_mode, planned.steps, prices, throughput) + auto_sample_lines(sizes, *assumed)
    if unknown:
        modes.append(f"Cascade mode is not priced: its cheap judge ({', '.join(unknown)}) is not in the registry.")
    text = markdown(rows, planned, prices, throughput) + "\n".join(modes) + "\n"
    write_text_atomic(Path(table), csv_text(rows))
    write_text_atomic(Path(report), text)
    print(text)
    requests, left = sum(row.tally.requests for row in rows), sum(row.tally.to_send for row in rows)
    return Done(f"{requests} requests, {left} to send", out=report)


def planned_sizes(scratch: Path) -> list[dict[str, Any]]:
    """The rubric judge's sample sizes a planned run's jobs chose (``sample_per_cell: auto``), each with its cell."""
    return [
        {"model": path.parent.name, "cell": cell, **size}
        for path in sorted(Path(p) for p in glob.glob(Layout(glob.escape(str(scratch))).path("judge_run", model="*")))
        for cell, size in read_json(path).get("sizes", {}).items()
    ]


def in_mode(config: dict[str, Any], mode: str) -> dict[str, Any]:
    """``config`` with both judges in ``mode``."""
    changed = copy.deepcopy(config)
    for section in JUDGE_SECTION_NAMES:
        changed[section]["mode"] = mode
    return changed
