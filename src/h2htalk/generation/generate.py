"""Generate answers for one model over every (variant, subtask) prompt file, cached and resumable.

The engine starts once per job, and only when some request is not cached (see ``h2htalk.llm.calls``); a
subtask regenerated alone (its output deleted, or its prompts changed) costs only its own requests.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h2htalk.errors import DataError
from h2htalk.generation.baselines import baseline_responses
from h2htalk.io import iter_jsonl, write_json_atomic, write_jsonl_atomic
from h2htalk.llm.calls import EngineOptions, chat_request, model_identity, run_summary
from h2htalk.llm.client import ChatRequest
from h2htalk.settings import GenerationSettings


@dataclass(frozen=True)
class PromptFile:
    """One prompt file and the generation file it becomes. ``variant`` and ``name`` (the subtask, or the study)
    come from its records; ``name`` picks the completion limit."""

    variant: str | None
    name: str | None
    prompts: Path
    out: Path

    @classmethod
    def read(cls, prompts: Path, out: Path) -> PromptFile:
        first = next((record for _, record in iter_jsonl(prompts)), {})
        return cls(first.get("variant"), first.get("subtask") or first.get("study"), prompts, out)


TASK_KEYS = ("variant", "subtask", "study")  # what a generation record copies from its prompt


@dataclass
class Job:
    file: PromptFile
    prompts: list[dict[str, Any]]
    requests: list[ChatRequest]


def load_jobs(spec: dict[str, Any], files: Sequence[PromptFile], settings: GenerationSettings) -> list[Job]:
    jobs = []
    for file in files:
        prompts = [record for _, record in iter_jsonl(file.prompts)]
        params = settings.params(file.name) if prompts else {}
        requests = [chat_request(spec, f"{file.variant}/{p['id']}", p["messages"], params) for p in prompts]
        jobs.append(Job(file, prompts, requests))
    return jobs


def _output_record(
    spec: dict[str, Any], prompt: dict[str, Any], request: ChatRequest, cached: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": prompt["id"],
        **{key: prompt[key] for key in TASK_KEYS if key in prompt},
        "response": cached["response"],
        "finish_reason": cached["finish_reason"],
        "prompt_tokens": cached["prompt_tokens"],
        "completion_tokens": cached["completion_tokens"],
        "latency_s": cached["latency_s"],
        "provenance": {
            **model_identity(spec),
            "display_name": spec["display_name"],
            "params": request.params,
            "request_key": request.key,
            "prompt_hashes": prompt["hashes"],
            "generated_at": cached["generated_at"],
            "attempts": cached["attempts"],
        },
    }


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

    A baseline answers from the instance files (``instances``: subtask -> file) instead of a model.
    """
    if spec["engine"] == "baseline":
        summary = _baseline_outputs(spec, files, instances or {}, settings)
    else:
        jobs = load_jobs(spec, files, settings)
        with engines.session(spec, settings.cache_dir, f"generate {spec['name']}") as calls:
            answers = calls.answers([r for job in jobs for r in job.requests])
            for job in jobs:
                records = zip(job.prompts, job.requests, strict=True)
                write_jsonl_atomic(job.file.out, (_output_record(spec, p, r, answers[r.key]) for p, r in records))
            summary = {**calls.summary(), "settings": settings.as_dict()}
    if summary_path:
        write_json_atomic(summary_path, summary)
    return summary


def _baseline_outputs(
    spec: dict[str, Any], files: Sequence[PromptFile], instances: dict[str, Path], settings: GenerationSettings
) -> dict[str, Any]:
    """Answers of a baseline (no language model): same records, same path through scoring and tables."""
    kind, seed = spec["baseline"]["kind"], spec["baseline"]["seed"]
    count = 0
    for file in files:
        if file.name is None:  # no prompts, nothing to answer
            write_jsonl_atomic(file.out, [])
            continue
        if file.name not in instances:
            raise DataError(f"baseline {spec['name']}: no instance file for {file.name}")
        records_in = [r for _, r in iter_jsonl(instances[file.name])]
        responses = baseline_responses(kind, records_in, seed, file.name)
        records = [
            {
                "id": instance["id"],
                "variant": file.variant,
                "subtask": file.name,
                "response": response,
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
