"""Judge itinerary plans: k rubric samples per item, through the same model-call seam as generation."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h2htalk.errors import DataError
from h2htalk.generation.generate import answered
from h2htalk.io import iter_jsonl, read_json, write_json_atomic, write_jsonl_atomic
from h2htalk.layout import Cell
from h2htalk.settings import CascadeSettings, Config, JudgeMode, JudgeSettings
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import JUDGE_CALLS, REGISTRY, judge_models
from h2htalk.stages.spec import Done, Each, EachFile, Models, One, Over, Stage
from h2htalk.stages.steps import SAMPLE, Step

if TYPE_CHECKING:  # the model-call stack (openai, httpx), imported when a job runs, not when the registry loads
    from h2htalk.llm.calls import EngineOptions, ModelCalls
    from h2htalk.llm.client import ChatRequest


@dataclass(frozen=True)
class JudgeFiles:
    """The files of one (variant, subtask) to judge, and where its verdicts go."""

    variant: str
    subtask: str
    instances: Path
    prompts: Path
    generations: Path
    out: Path
    ids: frozenset[str] | None = None  # the items to judge (None: every item of the generations)


@dataclass
class JudgeJob:
    variant: str
    subtask: str
    items: list[dict[str, Any]]  # id, system, task, response, reference
    out: Path


def _by_id(path: Path, what: str) -> dict[str, dict[str, Any]]:
    records = {}
    for number, record in iter_jsonl(path):
        if "id" not in record:
            raise DataError(f"{path}: line {number}: {what} record without an id")
        records[record["id"]] = record
    return records


def load_judge_job(files: JudgeFiles) -> JudgeJob:
    instance_by_id = _by_id(files.instances, "instance")
    prompt_by_id = _by_id(files.prompts, "prompt")
    items = []
    for number, generation in iter_jsonl(files.generations):
        item_id = generation.get("id")
        if files.ids is not None and item_id not in files.ids:
            continue
        if item_id not in instance_by_id or item_id not in prompt_by_id:
            raise DataError(f"{files.generations}: line {number}: id {item_id!r} has no instance or prompt")
        messages = prompt_by_id[item_id]["messages"]
        items.append(
            {
                "id": item_id,
                "system": next(m["content"] for m in messages if m["role"] == "system"),
                "task": next(m["content"] for m in messages if m["role"] == "user"),
                "response": generation["response"],
                "reference": instance_by_id[item_id]["reference"],
            }
        )
    return JudgeJob(files.variant, files.subtask, items, files.out)


def sample_flags(parsed: int, samples: int, *, missing: bool) -> list[str]:
    """``unparseable_sample`` when some judge answers could not be read; ``judge_missing`` when the item has
    no usable verdict (it is then missing, never 0)."""
    return (["unparseable_sample"] if parsed < samples else []) + (["judge_missing"] if missing else [])


def read_flags(parses: list[str]) -> list[str]:
    """Why samples were not read, from how each was read: ``judge_cut_off`` (a sample stopped at its token limit
    or ended inside its JSON, after the retry too), ``ambiguous_verdict`` (a sample held two verdicts)."""
    return (["judge_cut_off"] if "cut_off" in parses else []) + (["ambiguous_verdict"] if "ambiguous" in parses else [])


def answers_with_retry(calls: ModelCalls, requests: list[ChatRequest]) -> dict[str, dict[str, Any]]:
    """Every judge answer; one cut off at its token limit (or leaving its JSON open) is asked again once with
    twice the budget, and that answer (marked ``retried``, with its own ``request_key``) replaces it."""
    from h2htalk.llm.calls import chat_request
    from h2htalk.llm.fences import fence_of
    from h2htalk.llm.parse import cut_off

    answers = calls.answers(requests)
    retries = {
        r.key: chat_request(
            calls.spec, f"{r.item_id}+retry", r.messages, {**r.params, "max_tokens": 2 * r.params["max_tokens"]}
        )
        for r in requests
        if cut_off(answers[r.key]["response"], answers[r.key]["finish_reason"], fence_of(r.messages))
    }
    if retries:
        again = calls.answers(list(retries.values()))
        answers.update(
            {key: {**again[retry.key], "retried": True, "request_key": retry.key} for key, retry in retries.items()}
        )
    return answers


def sample_requests(
    spec: dict[str, Any], item_id: str, messages: list[dict[str, str]], seed: int, judge: JudgeSettings
) -> list[ChatRequest]:
    """``judge.samples`` requests for one item, seeds seed, seed+1, ... (distinct cache keys)."""
    from h2htalk.llm.calls import chat_request

    return [
        chat_request(
            spec,
            f"{item_id}#{index}",
            messages,
            {"temperature": judge.temperature, "top_p": 1.0, "max_tokens": judge.max_new_tokens, "seed": seed + index},
        )
        for index in range(judge.samples)
    ]


def judge_files(
    judge_spec: dict[str, Any],
    model: str,
    files: Sequence[JudgeFiles],
    judge: JudgeSettings,
    engines: EngineOptions,
    *,
    summary_path: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Judge every item of ``model``'s files (engine started once), write one verdict file each; return a
    summary."""
    from h2htalk.judge.rubric import judge_messages, parse_verdict
    from h2htalk.llm.calls import model_identity
    from h2htalk.llm.fences import fence_of

    jobs = [load_judge_job(f) for f in files]
    requests = {
        id(job): [
            sample_requests(
                judge_spec,
                f"{job.variant}/{item['id']}",
                judge_messages(job.subtask, item["system"], item["task"], item["response"], item["reference"]),
                engines.seed,
                judge,
            )
            for item in job.items
        ]
        for job in jobs
    }
    with engines.session(judge_spec, judge.cache_dir, batch=judge.batch) as calls:
        answers = answers_with_retry(calls, [r for job in jobs for samples in requests[id(job)] for r in samples])
        summary = calls.summary()
    identity = model_identity(judge_spec)
    for job in jobs:
        records = []
        for item, samples in zip(job.items, requests[id(job)], strict=True):
            verdicts = []
            for request in samples:
                answer = answers[request.key]
                verdict = parse_verdict(answer["response"], answer["finish_reason"], fence_of(request.messages))
                verdicts.append(
                    {
                        "score": verdict.score,
                        "parse": verdict.parse,
                        "reason": verdict.reason,
                        "evidence": verdict.evidence,
                        "finish_reason": answer["finish_reason"],
                        "retried": answer.get("retried", False),
                        "request_key": answer.get("request_key", request.key),  # the answer read
                        "seed": request.params["seed"],
                    }
                )
            scores = [v["score"] for v in verdicts if v["score"] is not None]
            records.append(
                {
                    "id": item["id"],
                    "subtask": job.subtask,
                    "variant": job.variant,
                    "task": item["task"],
                    "response": item["response"],
                    "reference": item["reference"],
                    "judge": identity,
                    "samples": verdicts,
                    "judge_mean": sum(scores) / len(scores) if scores else None,
                    "judge_spread": (max(scores) - min(scores)) if scores else None,
                    "flags": sample_flags(len(scores), len(verdicts), missing=not scores)
                    + read_flags([v["parse"] for v in verdicts]),
                    "reference_position": "after the response, labelled as a calibration aid",
                }
            )
        write_jsonl_atomic(job.out, records)
    if summary_path:
        write_json_atomic(summary_path, summary)
    return summary


@stage(
    "rubric_judge",
    "rubric-judge one model's itinerary plans (the judge's engine started once; in cascade mode the cheap judge's"
    " on every item, then the role's own judge's on each cell's sample)",
    uses=("judge", "subtasks"), planned=True,
    steps=(Step(makes="verdicts", batchable=True, sampled=True, judges="generate",  # Table 2's answers
                limit=JudgeSettings, title="rubric judge (Levels I-III)"),),
    reads=(*REGISTRY, "generation", *JUDGE_CALLS, "subtasks", "variants"),
    jobs=Over(model=lambda run: run.judged_models if run.judged_subtasks else ()),
    cells=lambda run, w: run.judged(w["model"]), starts=lambda s, w: judge_models(s, "rubric_judge"),
    where="model", env="generation", options=("rubric_judge",),
    inputs={"instances": Each("references"), "prompts": Each("prompts"), "generations": Each("generations")},
    outputs={"verdicts": Each("judge_samples"), "sample": Each("judge_sample"), "summary": One("judge_run")},
)  # fmt: skip
def rubric_judge(
    model: str, judge: JudgeSettings, config: Config, cells: list[Cell], each: EachFile, models: Models, stage: Stage,
    summary: str,
) -> Done:  # fmt: skip
    """One model's judged cells: every item by the judge of every item (the cheap one in cascade mode), then, in
    cascade mode, each cell's sample by the role's own judge (its file is empty in full mode)."""
    from h2htalk.judge.cascade import answered_ids, cascade_sample

    mode, cascade = JudgeMode.from_config(config, "rubric_judge"), CascadeSettings.from_config(config, "rubric_judge")
    every = mode.every_item_judge(judge)
    kinds = ("instances", "prompts", "generations", "verdicts")
    files = [JudgeFiles(c.variant, c.task, *(Path(each(kind, c)) for kind in kinds)) for c in cells]
    engines = models.engines(list(mode.judges))
    engines.step(stage.step(), model)
    run = judge_files(models.entry(every.model), model, files, every, engines, summary_path=summary)
    facts = answered(run, "verdicts")
    if mode.cascade:
        ids = [answered_ids(f.generations) for f in files]
        sample = [
            replace(f, out=Path(each("sample", c)), ids=frozenset(cascade_sample(c, cell_ids, cascade)))
            for f, c, cell_ids in zip(files, cells, ids, strict=True)
        ]
        engines.step(stage.step(SAMPLE), model)
        strong = judge_files(models.entry(judge.model), model, sample, judge, engines)
        more: dict[str, Any] = {"sample": strong}
        if cascade.auto:  # the first draw was the pilot: the rest of each cell's sample, as its pilot sizes it
            more["pilot"] = strong
            more["sample"], more["sizes"] = _rest_of_sample(
                models.entry(judge.model), model, cells, files, sample, ids, cascade, judge, engines
            )  # fmt: skip
        add_to_summary(summary, more)
        pilot = f"the pilot: {answered(strong, 'verdicts')}, the rest of " if cascade.auto else ""
        facts += f"; {pilot}the sample: {answered(more['sample'], 'verdicts')} by {judge.model}"
    else:
        for cell in cells:
            write_jsonl_atomic(each("sample", cell), [])
    subject = f"{model} by {every.model}" + (f" and {judge.model} ({mode.mode})" if mode.cascade else "")
    return Done(facts, subject=subject, out=f"{len(files)} files")


def _rest_of_sample(
    spec: dict[str, Any],
    model: str,
    cells: list[Cell],
    files: list[JudgeFiles],
    pilots: list[JudgeFiles],
    ids: list[list[str]],
    cascade: CascadeSettings,
    judge: JudgeSettings,
    engines: EngineOptions,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Auto mode: each cell's sample sized from its pilot's verdicts (``pilots``, judged), the items beyond the
    pilot judged and added to its file; the rest's run summary and each cell's size record."""
    from h2htalk.judge.cascade import judge_reading, sized_sample

    sizes, rest = {}, []
    for f, pilot, cell, cell_ids in zip(files, pilots, cells, ids, strict=True):
        sample, sizes[f"{cell.variant}/{cell.task}"] = sized_sample(
            cell, cell_ids, cascade, judge_reading(f.out), judge_reading(pilot.out)
        )
        rest.append(replace(pilot, out=pilot.out.with_suffix(".rest.jsonl"), ids=frozenset(sample) - pilot.ids))
    judged = judge_files(spec, model, rest, judge, engines)
    for pilot, more in zip(pilots, rest, strict=True):
        write_jsonl_atomic(pilot.out, [r for path in (pilot.out, more.out) for _, r in iter_jsonl(path)])
        more.out.unlink()
    return judged, sizes


def add_to_summary(path: str | os.PathLike[str], more: dict[str, Any]) -> None:
    """Add ``more`` to the run summary at ``path`` (a cascade's sample, beside the verdicts of every item)."""
    write_json_atomic(path, {**read_json(path), **more})
