"""Generate answers for one model over every (variant, subtask) prompt file, cached and resumable.

The engine starts once per job, and only when some request is not cached (see ``h2htalk.llm.calls``); a
subtask regenerated alone (its output deleted, or its prompts changed) costs only its own requests.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h2htalk.errors import DataError, H2HTalkError
from h2htalk.generation.ended import ENDED_ANSWER
from h2htalk.io import iter_jsonl, write_json_atomic, write_jsonl_atomic
from h2htalk.layout import Cell
from h2htalk.llm.engines import ENGINES, engine_of
from h2htalk.settings import Config, GenerationSettings
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import FIRST, REGISTRY
from h2htalk.stages.spec import Done, Each, EachFile, Models, One, Over, Stage
from h2htalk.stages.steps import Step

if TYPE_CHECKING:  # the model-call stack (openai, httpx), imported when a job runs, not when the registry loads
    from h2htalk.llm.calls import EngineOptions, ModelCalls
    from h2htalk.llm.client import ChatRequest


@dataclass(frozen=True)
class PromptFile:
    """One cell's prompt file and the generation file it becomes; ``name`` (the subtask, or the study) picks
    the completion limit."""

    variant: str
    name: str
    prompts: Path
    out: Path


TASK_KEYS = ("variant", "subtask", "study")  # what a generation record copies from its prompt


@dataclass
class FileJob:
    file: PromptFile
    prompts: list[dict[str, Any]]
    requests: list[ChatRequest]  # the first requests (single-turn prompts, first turns of conversations)
    params: dict[str, Any]


def request_params(spec: dict[str, Any], settings: GenerationSettings, name: str) -> dict[str, Any]:
    """Sampling parameters for one subtask (or study); a reasoning model gets its thinking budget on top."""
    params = settings.params(name)
    if spec.get("reasoning"):
        params["max_tokens"] += spec["reasoning"]["max_new_tokens"]
    return params


def load_jobs(spec: dict[str, Any], files: Sequence[PromptFile], settings: GenerationSettings) -> list[FileJob]:
    jobs = []
    for file in files:
        prompts = [record for _, record in iter_jsonl(file.prompts)]
        params = request_params(spec, settings, file.name) if prompts else {}
        jobs.append(FileJob(file, prompts, [], params))
    return jobs


def _output_record(
    spec: dict[str, Any], item_id: str, prompt: dict[str, Any], request: ChatRequest, answer: dict[str, Any]
) -> dict[str, Any]:
    from h2htalk.llm.calls import model_identity

    flags = [flag for flag in ("truncated_in_reasoning", "no_final_answer") if answer.get(flag)]
    record = {
        "id": item_id,
        **{key: prompt[key] for key in TASK_KEYS if key in prompt},
        "response": answer["response"],
        "finish_reason": answer["finish_reason"],
        "failure": answer.get("failure"),
        "reasoning": answer.get("reasoning"),
        "flags": flags,
        "prompt_tokens": answer["prompt_tokens"],
        "completion_tokens": answer["completion_tokens"],
        "latency_s": answer["latency_s"],
        "provenance": {
            **model_identity(spec),
            "display_name": spec["display_name"],
            "params": request.params,
            "request_key": request.key,
            "prompt_hashes": prompt["hashes"],
            "generated_at": answer["generated_at"],
            "attempts": answer["attempts"],
            "served_by": answer.get("served_by"),
        },
    }
    if "user_turns" in prompt:  # a conversation: what this turn answered, the model's own earlier answers included
        record["conversation"] = [m for m in request.messages if m["role"] != "system"]
    return record


def _conversation_records(
    spec: dict[str, Any], calls: ModelCalls, job: FileJob, answered: dict[str, dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """Every turn of every conversation of ``job``, each continuing from the model's own earlier answers: one
    round of requests per turn, over as many conversations at once as the engine's server works on (all of them
    where it batches; one at a time on a one-slot server, which then keeps each conversation's earlier turns
    instead of evaluating them again after every other conversation's). A turn whose answer failed ends its
    conversation; later turns record why."""
    conversations = [p for p in job.prompts if "user_turns" in p]
    records: dict[str, list[dict[str, Any]]] = {p["id"]: [] for p in conversations}
    histories = {p["id"]: list(p["messages"]) for p in conversations}
    width = engine_of(spec).slots or len(conversations) or 1
    for start in range(0, len(conversations), width):
        group = conversations[start : start + width]
        _converse(spec, calls, job, group, answered, records, histories)
    return records


def _converse(
    spec: dict[str, Any],
    calls: ModelCalls,
    job: FileJob,
    conversations: list[dict[str, Any]],
    answered: dict[str, dict[str, Any]],
    records: dict[str, list[dict[str, Any]]],
    histories: dict[str, list[dict[str, str]]],
) -> None:
    """The turns of ``conversations``, a round of requests per turn (their first turns are ``answered``)."""
    from h2htalk.llm.calls import chat_request

    for turn in range(max((len(p["user_turns"]) for p in conversations), default=0)):
        batch = []
        for prompt in conversations:
            if turn < len(prompt["user_turns"]):
                messages = [*histories[prompt["id"]], {"role": "user", "content": prompt["user_turns"][turn]}]
                item_id = prompt["turn_ids"][turn]
                request = chat_request(spec, f"{job.file.variant}/{item_id}", messages, job.params)
                ended = any(r["failure"] for r in records[prompt["id"]])
                batch.append((prompt, item_id, request, ended))
        live = [request for _, _, request, ended in batch if not ended]
        answers = answered if turn == 0 else calls.answers(live)
        for prompt, item_id, request, ended in batch:
            answer = ENDED_ANSWER if ended else answers[request.key]
            records[prompt["id"]].append(_output_record(spec, item_id, prompt, request, answer))
            histories[prompt["id"]] = [*request.messages, {"role": "assistant", "content": answer["response"]}]


def first_requests(spec: dict[str, Any], job: FileJob) -> list[ChatRequest]:
    """The requests a job can send at once: every single-turn prompt, and every conversation's first turn."""
    from h2htalk.llm.calls import chat_request

    requests = []
    for prompt in job.prompts:
        if "user_turns" in prompt:
            messages = [*prompt["messages"], {"role": "user", "content": prompt["user_turns"][0]}]
            item_id = prompt["turn_ids"][0]
        else:
            messages, item_id = prompt["messages"], prompt["id"]
        requests.append(chat_request(spec, f"{job.file.variant}/{item_id}", messages, job.params))
    return requests


def generate_model(
    spec: dict[str, Any],
    files: Sequence[PromptFile],
    settings: GenerationSettings,
    engines: EngineOptions,
    *,
    instances: dict[str, Path] | None = None,
    summary_path: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Generate every missing answer, then write one generation file per prompt file; return a run summary.

    A baseline answers from the instance files (``instances``: subtask -> file) instead of a model. Items that got
    no answer are recorded with their failure (scored as empty); beyond ``generation.max_failure_rate`` of them
    the job fails, its answers kept in the cache.
    """
    if engine_of(spec).answers_without_model:
        summary = _baseline_outputs(spec, files, instances or {}, settings)
    else:
        jobs = load_jobs(spec, files, settings)
        with engines.session(spec, settings.cache_dir, batch=False) as calls:
            for job in jobs:
                job.requests = first_requests(spec, job)
            answers = calls.answers([r for job in jobs for r in job.requests])
            outputs = []
            for job in jobs:
                turns = _conversation_records(spec, calls, job, answers)
                records = []
                for prompt, request in zip(job.prompts, job.requests, strict=True):
                    if "user_turns" in prompt:
                        records.extend(turns[prompt["id"]])
                    else:
                        records.append(_output_record(spec, prompt["id"], prompt, request, answers[request.key]))
                outputs.append((job.file.out, records))
            calls.check_failures(settings.client.max_failure_rate)
            for out, records in outputs:
                write_jsonl_atomic(out, records)
            summary = {**calls.summary(), "settings": settings.as_dict()}
    if summary_path:
        write_json_atomic(summary_path, summary)
    return summary


def _baseline_outputs(
    spec: dict[str, Any], files: Sequence[PromptFile], instances: dict[str, Path], settings: GenerationSettings
) -> dict[str, Any]:
    """Answers of a baseline (no language model): same records, same path through scoring and tables. An item the
    baseline has no answer for carries ``no_answer`` (why), and scoring leaves it missing."""
    from h2htalk.generation.baselines import NO_ANSWER, baseline_responses
    from h2htalk.llm.calls import model_identity, run_summary

    kind, seed = spec["baseline"]["kind"], spec["baseline"]["seed"]
    count = 0
    for file in files:
        if file.name not in instances:
            raise DataError(f"baseline {spec['name']}: no instance file for {file.name}")
        records_in = [r for _, r in iter_jsonl(instances[file.name])]
        responses = baseline_responses(kind, records_in, seed, file.name)
        records = [
            {
                "id": instance["id"],
                "variant": file.variant,
                "subtask": file.name,
                "response": response or "",
                **({"no_answer": NO_ANSWER[kind]} if response is None else {}),
                "finish_reason": "baseline",
                "prompt_tokens": None,
                "completion_tokens": None,
                "latency_s": 0.0,
                "provenance": {
                    **model_identity(spec),
                    "display_name": spec["display_name"],
                    "baseline": kind,
                    "seed": seed,
                },
            }
            for instance, response in zip(records_in, responses, strict=True)
        ]
        write_jsonl_atomic(file.out, records)
        count += len(records)
    return run_summary(spec, count, 0, 0.0, settings.as_dict())


@stage(
    "generate", "answer every Table 2 cell of one model (its engine started once)", priority=FIRST, planned=True,
    targets="generations", steps=(Step(makes="answers"),),
    reads=(*REGISTRY, "generation", "subtasks", "variants"), jobs=Over(model=lambda run: run.models),
    cells=lambda run, w: run.benchmark(w["model"]), starts=lambda s, w: [w["model"]], where="model",
    env="generation",
    inputs={"prompts": Each("prompts")},
    outputs={"responses": Each("generations"), "summary": One("generation_run")},
)  # fmt: skip
@stage(
    "baseline_answers", "answer every Table 2 cell of one baseline from the instances (no model)", priority=FIRST,
    planned=True, targets="generations", steps=(Step(),),
    reads=(*REGISTRY, "generation", "subtasks", "variants"), jobs=Over(model=lambda run: run.baselines),
    cells=lambda run, w: run.benchmark(w["model"]), entries=lambda s, w: [w["model"]], env="generation",
    memory_mb=1000, minutes=10,
    inputs={"prompts": Each("prompts"), "instances": Each("references")},
    outputs={"responses": Each("generations"), "summary": One("generation_run")},
)  # fmt: skip
def generate(
    model: str, config: Config, cells: list[Cell], each: EachFile, models: Models, stage: Stage, summary: str
) -> Done:  # fmt: skip
    """``model``'s (or a baseline's) answers to every Table 2 cell of the job."""
    spec = models.entry(model)
    baseline = engine_of(spec).answers_without_model
    if baseline != (stage.where != "model"):
        other = "baseline-answers" if baseline else "generate"
        raise H2HTalkError(f"{model} is {'a baseline' if baseline else 'a model'}: its answers are h2htalk {other}'s")
    engines = models.engines([] if baseline else [model])  # a baseline starts no engine
    engines.step(stage.step(), model)
    run = answer_cells(spec, cells, each, GenerationSettings.from_config(config), engines, summary, baseline=baseline)
    return Done(answered(run), subject=model, out=f"{len(cells)} files")


def answer_cells(
    spec: dict[str, Any], cells: list[Cell], each: EachFile, settings: GenerationSettings, engines: EngineOptions,
    summary: str, *, baseline: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Answer ``cells`` (Table 2's, or a model's studies') with the model of ``spec`` (its engine started once; a
    baseline from each cell's ``instances``): each cell's ``prompts`` into its ``responses``, the run summary into
    ``summary``."""
    files = [PromptFile(c.variant, c.task, Path(each("prompts", c)), Path(each("responses", c))) for c in cells]
    instances = {c.task: Path(each("instances", c)) for c in cells} if baseline else {}
    return generate_model(spec, files, settings, engines, instances=instances, summary_path=summary)


def answered(run: dict[str, Any], noun: str = "answers") -> str:
    """``66 answers (12 cached, 0 failed)``, from a run summary of the model-call seam."""
    if ENGINES[run["engine"]].answers_without_model:
        return f"{run['requests']} {noun} (a baseline: no model)"
    cached = run["requests"] - run["sent"]
    return f"{run['requests']} {noun} ({cached} cached, {run.get('failed', 0)} failed)"
