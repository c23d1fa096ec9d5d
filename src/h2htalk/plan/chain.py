"""Every stage of a run that calls a model, planned: the registry's planned stages run in its order, on what the
one before wrote, in a scratch results tree, each job calling its own stage function with the plan's stand-in for
its engines (``plan.calls``), which reads the real caches and sends nothing.

The chain reads the run's curated references, model files and prefetch records from the real results tree and
writes everything else (instances, prompts, answers, verdicts) into the scratch tree. Where a cache lacks an answer
the chain goes on with a placeholder shaped like it:

- a reconstruction: a demo instance of the subtask (its inputs' lengths), marked with the reference's id so that
  every planned instance makes its own prompts; every vote: keep (an upper bound on the instances);
- an answer of a model under test: the item's reference, cut at the answer limit (the answers as long as the
  released references of their subtask; an instruction-following turn, which has none, as the safety study's
  median reference), and a reasoning model's whole thinking budget on top; marked with its request's key, since
  the variants' answers, alike here, would make one judge request where the run's differ;
- a judge's verdict: an unread one, planned at the judge's max_new_tokens (an upper bound).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.config import load_registry, pinned_entry, registry_files
from h2htalk.errors import H2HTalkError
from h2htalk.io import iter_jsonl
from h2htalk.layout import Layout
from h2htalk.llm.client import ChatRequest
from h2htalk.llm.tokens import text_tokens
from h2htalk.plan.calls import Placeholder, PlanEngines, PlannedCalls, job_name
from h2htalk.settings import VARIANTS, ClientSettings, ReconstructSettings
from h2htalk.stages.steps import Step, declared_steps
from h2htalk.subtasks import get_subtask

VERDICT = "{}"  # a judge answer that holds no verdict and is not cut off: read as missing, never asked again
READ_FROM_THE_RUN = frozenset({"manifest", "upstream", "curated", "curation", "model_file", "prefetched_model"})


@dataclass
class PlannedRun:
    sessions: list[PlannedCalls]
    # (references the generator's cache holds a try of, references sampled); None: the instances are not reconstructed
    reconstructed: tuple[int, int] | None
    steps: dict[str, Step]  # the steps its stages declare, in the plan report's order (stages.steps.declared_steps)


class PlanModels:
    """How a planned job reaches models: registry entries at the commit their prefetch pinned (part of their
    request keys), where one has been made and their engine downloads weights (``config.pinned_entry``, as a job's
    are), and the plan's engines."""

    def __init__(self, config: dict[str, Any], results: Layout, engines: PlanEngines) -> None:
        self.registry, self.results, self.planned = load_registry(registry_files(config)), results, engines

    def entry(self, name: str, pinned: bool = True) -> dict[str, Any]:
        if name not in self.registry:
            raise H2HTalkError(f"model {name!r} is not in the registry")
        prefetched = pinned and Path(self.results.path("prefetched_model", model=name)).exists()
        return pinned_entry(self.registry[name], self.results if prefetched else None)

    def engines(self, names: list[str]) -> PlanEngines:
        return self.planned


def plan_calls(
    stages: Sequence[Any], config: dict[str, Any], results: Layout, scratch: Path, only: Collection[str] | None = None
) -> PlannedRun:
    """Plan every model call of the configured run, reading ``results`` (curated references, prefetch records) and
    the caches, writing only under ``scratch``: the ``planned`` ones of ``stages`` (the registry's, in its order) run
    as the workflow runs them. ``only``: the names of the stages to plan, on what an earlier plan of the run wrote in
    ``scratch`` (the judges again, in another mode)."""
    work = Layout(str(scratch)).reading(results, READ_FROM_THE_RUN)
    reconstructing = config["instances"]["source"] == "reconstructed" and only is None
    if reconstructing:
        _check_curated(config, results)
    steps = declared_steps(stages)
    engines = PlanEngines(
        ClientSettings.from_config(config), config["generation"]["decoding"]["seed"], Placeholders(config, work), steps
    )
    models = PlanModels(config, results, engines)
    for stage in stages:
        if not stage.planned or (not reconstructing and any(step.makes == "instances" for step in stage.steps)):
            continue
        if only is not None and stage.name not in only:
            continue
        for labels in stage.jobs(RunCells(config)):
            engines.job = job_name(stage.name, labels)
            stage.job(config, work, labels, models, stages=stages).call()
    return PlannedRun(engines.sessions, _reconstructed(config, work, engines) if reconstructing else None, steps)


def _check_curated(config: dict[str, Any], results: Layout) -> None:
    missing = [s for s in config["subtasks"] if not Path(results.path("curated", subtask=s)).exists()]
    if missing:
        raise H2HTalkError(
            f"the plan of a reconstructed benchmark counts the curated references, and "
            f"{results.path('curated', subtask=missing[0])} is missing: curate first (snakemake curation_report,"
            f" or h2htalk fetch and h2htalk curate)"
        )


def _reconstructed(config: dict[str, Any], work: Layout, engines: PlanEngines) -> tuple[int, int]:
    """(references the generator's cache holds a try of, references sampled)."""
    generator = config["instances"]["reconstruct"]["generator"]
    sessions = (s for s in engines.sessions if s.step.declared.makes == "instances")
    session = next(s for s in sessions if s.spec["name"] == generator)
    reports = [json.loads(Path(work.path("reconstruction_report", subtask=s)).read_text()) for s in config["subtasks"]]
    tried = {item for item in session.cached_items if not item.startswith("vote/")}
    return len(tried), sum(r["sampled"] for r in reports)


class Placeholders:
    """What a step's missing answers are planned as, by what it makes (answers need the instances the chain wrote,
    read when the first answer is planned)."""

    def __init__(self, config: dict[str, Any], work: Layout) -> None:
        self.config, self.work = config, work
        self._references: dict[str, str] | None = None

    def __call__(self, step: Step) -> Callable[[dict[str, Any], ChatRequest], Placeholder]:
        if step.makes == "instances":
            return reconstruction_like_a_demo(ReconstructSettings.from_config(self.config))
        if step.makes == "verdicts" and step.limit:
            return unread_verdict(step.limit.from_config(self.config).max_new_tokens)
        if step.makes == "verdicts":  # at each request's own limit (the ladders': either judge's)
            return lambda spec, request: Placeholder(VERDICT, request.params["max_tokens"])
        if self._references is None:
            self._references = _references(self.config["subtasks"], self.work)
        return answer_like_the_reference(self._references)


def _references(subtasks: list[str], work: Layout) -> dict[str, str]:
    """Item id -> its reference: every instance's, every safety turn's; ``""`` -> the safety study's median reference,
    for items without one."""
    references = {
        record["id"]: record["reference"]
        for subtask in subtasks
        for _, record in iter_jsonl(Path(work.path("instances", subtask=subtask)))
    }
    turns = iter_jsonl(Path(work.references(VARIANTS[0], "safety")))
    safety = {record["id"]: record["reference"] for _, record in turns}
    references.update(safety)
    ordered = sorted(safety.values(), key=len)
    references[""] = ordered[len(ordered) // 2] if ordered else ""
    return references


def answer_like_the_reference(references: dict[str, str]) -> Callable[[dict[str, Any], ChatRequest], Placeholder]:
    def planned(spec: dict[str, Any], request: ChatRequest) -> Placeholder:
        text = references.get(request.item_id.split("/", 1)[-1], references[""])
        thinking = spec["reasoning"]["max_new_tokens"] if spec.get("reasoning") else 0
        limit = request.params["max_tokens"] - thinking
        tokens = text_tokens(text)
        if tokens > limit:  # cut at the answer limit, as the model would be
            text, tokens = text[: len(text) * limit // tokens], limit
        # marked with its request: two planned answers (the variants', say) never make one judge request
        return Placeholder(f"{text}（{request.key[:6]}）", tokens + thinking)

    return planned


def unread_verdict(max_new_tokens: int) -> Callable[[dict[str, Any], ChatRequest], Placeholder]:
    return lambda spec, request: Placeholder(VERDICT, max_new_tokens)


def reconstruction_like_a_demo(options: ReconstructSettings) -> Callable[[dict[str, Any], ChatRequest], Placeholder]:
    def planned(spec: dict[str, Any], request: ChatRequest) -> Placeholder:
        if request.item_id.startswith("vote/"):
            return Placeholder('{"reason": "", "leaks": false, "plausible": true}', options.vote_max_new_tokens)
        reference_id = request.item_id
        demos = get_subtask(reference_id.rsplit("-", 1)[0]).demo
        fields = dict(demos[int(reference_id.rsplit("-", 1)[1]) % len(demos)]["fields"])
        last = list(fields)[-1]
        fields[last] = _marked(fields[last], f"（{reference_id}）")
        text = json.dumps(fields, ensure_ascii=False)
        return Placeholder(text, min(text_tokens(text), options.max_new_tokens))

    return planned


def _marked(value: Any, mark: str) -> Any:
    """``value`` with ``mark`` appended to its last text, keeping its shape."""
    if isinstance(value, str):
        return value + mark
    if isinstance(value, list) and value:
        return [*value[:-1], _marked(value[-1], mark)]
    if isinstance(value, dict) and value:
        last = list(value)[-1]
        return {**value, last: _marked(value[last], mark)}
    return value
