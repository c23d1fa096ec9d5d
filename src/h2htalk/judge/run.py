"""Judge itinerary plans: k rubric samples per item, through the same engines and cache as generation."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h2htalk.errors import DataError
from h2htalk.generation.client import ChatRequest
from h2htalk.generation.engines import Endpoint, LazyEndpoint
from h2htalk.generation.generate import (
    GenerationCache,
    GenerationSettings,
    conversation_text,
    fetch_responses,
    model_identity,
    request_key,
    run_summary,
)
from h2htalk.io import iter_jsonl, write_jsonl_atomic
from h2htalk.judge.rubric import judge_messages, parse_verdict


@dataclass(frozen=True)
class JudgeSettings:
    samples: int = 3
    temperature: float = 0.7
    max_tokens: int = 512

    @classmethod
    def from_config(cls, judge: dict[str, Any]) -> JudgeSettings:
        return cls(judge.get("samples", 3), judge.get("temperature", 0.7), judge.get("max_tokens", 512))


@dataclass
class JudgeJob:
    variant: str
    subtask: str
    items: list[dict[str, Any]]  # id, task, response, reference
    out: Path


def _by_id(path: Path, what: str) -> dict[str, dict[str, Any]]:
    records = {}
    for number, record in iter_jsonl(path):
        if "id" not in record:
            raise DataError(f"{path}: line {number}: {what} record without an id")
        records[record["id"]] = record
    return records


def load_judge_job(
    variant: str, subtask: str, instances: Path, prompts: Path, generations: Path, out: Path
) -> JudgeJob:
    instance_by_id = _by_id(instances, "instance")
    prompt_by_id = _by_id(prompts, "prompt")
    items = []
    for number, generation in iter_jsonl(generations):
        item_id = generation.get("id")
        if item_id not in instance_by_id or item_id not in prompt_by_id:
            raise DataError(f"{generations}: line {number}: id {item_id!r} has no instance or prompt")
        task = next(m["content"] for m in prompt_by_id[item_id]["messages"] if m["role"] == "user")
        items.append(
            {
                "id": item_id,
                "task": task,
                "response": generation["response"],
                "reference": instance_by_id[item_id]["reference"],
            }
        )
    return JudgeJob(variant, subtask, items, out)


def sample_flags(parsed: int, samples: int, *, missing: bool) -> list[str]:
    """``unparseable_sample`` when some judge answers could not be read; ``judge_missing`` when the item has
    no usable verdict (it is then missing, never 0)."""
    return (["unparseable_sample"] if parsed < samples else []) + (["judge_missing"] if missing else [])


def sample_requests(
    spec: dict[str, Any], item_id: str, messages: list[dict[str, str]], seed: int, judge: JudgeSettings
) -> list[ChatRequest]:
    """``judge.samples`` requests for one item, seeds seed, seed+1, ... (distinct cache keys)."""
    identity = model_identity(spec)
    requests = []
    for index in range(judge.samples):
        params = {"temperature": judge.temperature, "top_p": 1.0, "max_tokens": judge.max_tokens, "seed": seed + index}
        key = request_key(identity, params, messages[0]["content"], conversation_text(messages))
        requests.append(ChatRequest(key, f"{item_id}#{index}", messages, params))
    return requests


def sample_answers(
    spec: dict[str, Any],
    requests: list[ChatRequest],
    settings: GenerationSettings,
    cache_dir: str | os.PathLike[str],
    *,
    endpoint: Endpoint | None = None,
    model_file: str | None = None,
    server_log: Path | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Every judge answer (cached, engine started once if anything is missing) and a run summary."""
    cache = GenerationCache(cache_dir, spec["name"])
    try:
        with LazyEndpoint(spec, model_file, server_log, settings.seed) as lazy:
            answers, sent, seconds = fetch_responses(spec, requests, cache, settings, endpoint or lazy)
    finally:
        cache.close()
    return answers, run_summary(spec, len({r.key for r in requests}), sent, seconds, settings)


def judge_jobs(
    judge_spec: dict[str, Any],
    jobs: list[JudgeJob],
    settings: GenerationSettings,
    judge: JudgeSettings,
    cache_dir: str | os.PathLike[str],
    *,
    endpoint: Endpoint | None = None,
    model_file: str | None = None,
    server_log: Path | None = None,
) -> dict[str, Any]:
    """Judge every item of every job (engine started once), then write one verdict file per job."""
    requests = {
        id(job): [
            sample_requests(
                judge_spec,
                f"{job.variant}/{item['id']}",
                judge_messages(job.subtask, item["task"], item["response"], item["reference"]),
                settings.seed,
                judge,
            )
            for item in job.items
        ]
        for job in jobs
    }
    flat = [r for job in jobs for samples in requests[id(job)] for r in samples]
    cached, summary = sample_answers(
        judge_spec, flat, settings, cache_dir, endpoint=endpoint, model_file=model_file, server_log=server_log
    )
    identity = model_identity(judge_spec)
    for job in jobs:
        records = []
        for item, samples in zip(job.items, requests[id(job)], strict=True):
            verdicts = []
            for request in samples:
                verdict = parse_verdict(cached[request.key]["response"])
                verdicts.append(
                    {
                        "score": verdict.score,
                        "parse": verdict.parse,
                        "evidence": verdict.evidence,
                        "request_key": request.key,
                        "seed": request.params["seed"],
                    }
                )
            scores = [v["score"] for v in verdicts if v["score"] is not None]
            flags = sample_flags(len(scores), len(verdicts), missing=not scores)
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
                    "flags": flags,
                    "reference_position": "after the response, labelled as a calibration aid",
                }
            )
        write_jsonl_atomic(job.out, records)
    return summary
