"""Every stage of a run that calls a model, planned in a scratch results tree: reconstruction, generation, the rubric
judge and the studies' judge, each with its own request building and the real caches (``plan.calls``).

The stages run in order, as the workflow runs them, each on what the one before wrote into the scratch tree:
instances from the reconstruction (or the configured source), prompts rendered from them, answers (cached, or a
placeholder), verdicts. Where a cache lacks an answer the chain goes on with a placeholder shaped like it:

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.config import load_registry, registry_files
from h2htalk.errors import H2HTalkError
from h2htalk.generation.generate import PromptFile, generate_model
from h2htalk.instances.reconstruct import ReconstructFiles, reconstruct_to_files
from h2htalk.instances.schema import read_instances
from h2htalk.instances.sources import source_file, write_instances
from h2htalk.io import iter_jsonl
from h2htalk.judge.run import JudgeFiles, judge_files
from h2htalk.layout import Layout
from h2htalk.llm.client import ChatRequest
from h2htalk.llm.tokens import text_tokens
from h2htalk.plan.calls import Placeholder, PlanEngines, PlannedCalls, Stage
from h2htalk.prefetch import pinned_model, read_records
from h2htalk.prompts.render import write_prompts
from h2htalk.settings import (
    STUDIES,
    VARIANTS,
    ClientSettings,
    GenerationSettings,
    JudgeSettings,
    ReconstructSettings,
    StudyJudgeSettings,
    StudySample,
)
from h2htalk.studies.data import scenario_file, write_study_inputs
from h2htalk.studies.run import judge_studies
from h2htalk.subtasks import get_subtask

VERDICT = "{}"  # a judge answer that holds no verdict and is not cut off: read as missing, never asked again


@dataclass
class PlannedRun:
    sessions: list[PlannedCalls]
    # (references the generator's cache holds a try of, references sampled); None: the instances are not reconstructed
    reconstructed: tuple[int, int] | None


def plan_calls(config: dict[str, Any], results: Layout, scratch: Path) -> PlannedRun:
    """Plan every model call of the configured run, reading ``results`` (curated references, prefetch records) and
    the caches, writing only under ``scratch``."""
    registry = load_registry(registry_files(config))
    engines = PlanEngines(ClientSettings.from_config(config), config["generation"]["decoding"]["seed"])
    run, work = RunCells(config), Layout(str(scratch))

    def entry(name: str) -> dict[str, Any]:
        """The entry at the commit its prefetch pinned (part of its request keys), where one has been made."""
        record = Path(results.path("prefetched_model", model=name))
        if not record.exists():
            return registry[name]
        return pinned_model(registry[name], read_records([str(record)])[("models", name)])

    reconstructed = _instances(config, run, results, work, engines, entry)
    _prompts(config, run, work)
    references = _references(run, work)
    jobs = [("generate", model, run.benchmark(model)) for model in run.run_models]
    jobs += [("generate studies", model, run.studies(model)) for model in run.study_models]
    for stage, model, cells in jobs:  # Table 2's answers, and the studies' (the first step of a study job) apart
        files = [
            PromptFile(c.variant, c.task, Path(work.prompts(c.variant, c.task)), Path(work.generations(c)))
            for c in cells
        ]
        instances = {c.task: Path(work.references(c.variant, c.task)) for c in cells if not c.is_study}
        settings = GenerationSettings.from_config(config, for_studies=stage == "generate studies")
        engines.stage = Stage(stage, model, False, answer_like_the_reference(references))
        generate_model(entry(model), files, settings, engines, instances=instances)
    judge = JudgeSettings.from_config(config)
    for model in run.judged_models if run.judged_subtasks else ():
        files = [
            JudgeFiles(
                cell.variant, cell.task, Path(work.references(cell.variant, cell.task)),
                Path(work.prompts(cell.variant, cell.task)), Path(work.generations(cell)),
                Path(work.judge_samples(cell)),
            )
            for cell in run.judged(model)
        ]  # fmt: skip
        engines.stage = Stage("rubric judge", model, judge.batch, unread_verdict(judge.max_new_tokens))
        judge_files(entry(judge.model), model, files, judge, engines)
    study_judge = StudyJudgeSettings.from_config(config)
    items = [Path(work.references(VARIANTS[0], study)) for study in STUDIES]
    for model in run.study_models:
        pairs = [(Path(work.generations(cell)), Path(work.verdicts(cell))) for cell in run.studies(model)]
        engines.stage = Stage("study judge", model, study_judge.batch, unread_verdict(study_judge.max_new_tokens))
        judge_studies(entry(study_judge.model), model, items, pairs, study_judge, engines)
    return PlannedRun(engines.sessions, reconstructed)


def _instances(
    config: dict[str, Any],
    run: RunCells,
    results: Layout,
    work: Layout,
    engines: PlanEngines,
    entry: Callable[[str], dict[str, Any]],
) -> tuple[int, int] | None:
    """The instance files of the run, into ``work``: reconstructed (planned), or from the configured source."""
    instances = config["instances"]
    counted = None
    if instances["source"] == "reconstructed":
        missing = [s for s in run.subtasks if not Path(results.path("curated", subtask=s)).exists()]
        if missing:
            raise H2HTalkError(
                f"the plan of a reconstructed benchmark counts the curated references, and "
                f"{results.path('curated', subtask=missing[0])} is missing: curate first (snakemake curation_report,"
                f" or h2htalk fetch and h2htalk curate)"
            )
        options = ReconstructSettings.from_config(config)
        engines.stage = Stage("reconstruct", "instances", options.batch, reconstruction_like_a_demo(options))
        files = [
            ReconstructFiles(
                s, Path(results.path("curated", subtask=s)), Path(work.path("reconstructed", subtask=s)),
                Path(work.path("reconstruction_report", subtask=s)), Path(work.path("instance_review", subtask=s)),
            )
            for s in run.subtasks
        ]  # fmt: skip
        names = dict.fromkeys([options.generator, *options.voters])
        start = len(engines.sessions)
        decisions, store = instances["review_imports"], config["review"]["store"]
        reconstruct_to_files(files, {n: entry(n) for n in names}, options, engines, decisions, store)
        generator = next(s for s in engines.sessions[start:] if s.spec["name"] == options.generator)
        references = sum(r["sampled"] for r in (json.loads(f.report.read_text()) for f in files))
        tried = {item for item in generator.cached_items if not item.startswith("vote/")}
        counted = (len(tried), references)
    for subtask in run.subtasks:
        origin = work if instances["source"] == "reconstructed" else results
        file = source_file(instances, subtask, origin)
        write_instances(subtask, work.path("instances", subtask=subtask), file=file, limit=instances["limit"])
    return counted


def _prompts(config: dict[str, Any], run: RunCells, work: Layout) -> None:
    for subtask in run.subtasks:
        instances = read_instances(work.path("instances", subtask=subtask))
        for variant in run.variants:
            write_prompts(instances, variant, work.prompts(variant, subtask))
    sample = StudySample.from_config(config)
    for study in STUDIES:
        for variant in VARIANTS:  # the study judge reads the first variant's items whatever the run's variants
            write_study_inputs(
                study, variant, Path(work.prompts(variant, study)), Path(work.references(variant, study)),
                scenario_file(config["studies"], study), sample.size(study), sample.seed,
            )  # fmt: skip


def _references(run: RunCells, work: Layout) -> dict[str, str]:
    """Item id -> its reference: every instance's, every safety turn's; ``""`` -> the safety study's median reference,
    for items without one."""
    references = {
        record["id"]: record["reference"]
        for subtask in run.subtasks
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
