"""Generate answers for one model over every (variant, subtask), cached and resumable.

Every request is content-addressed: key = SHA-256 of (model id and revision, engine, sampling parameters,
system prompt, user prompt, seed). Finished responses go into the model's cache as they land, so a killed
job, rerun, sends requests only for what is missing; a subtask regenerated alone (its output deleted, or its
prompts changed) costs only its own requests. The engine is started once per job, and only when something
is missing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h2htalk.generation.baselines import baseline_responses
from h2htalk.generation.client import ChatClient, ChatRequest, ChatResult, RetryPolicy
from h2htalk.generation.engines import Endpoint, LazyEndpoint
from h2htalk.io import iter_jsonl, write_jsonl_atomic
from h2htalk.store import SqliteStore
from h2htalk.versions import package_version

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GenerationSettings:
    concurrency: int = 4
    timeout_s: float = 300.0
    retries: int = 5
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 1234
    max_new_tokens: dict[str, int] | None = None

    @classmethod
    def from_config(cls, generation: dict[str, Any]) -> GenerationSettings:
        decoding = generation.get("decoding", {})
        return cls(
            concurrency=generation.get("concurrency", 4),
            timeout_s=generation.get("timeout_s", 300.0),
            retries=generation.get("retries", 5),
            backoff_base_s=generation.get("backoff_base_s", 1.0),
            backoff_max_s=generation.get("backoff_max_s", 60.0),
            temperature=decoding.get("temperature", 0.0),
            top_p=decoding.get("top_p", 1.0),
            seed=decoding.get("seed", 1234),
            max_new_tokens=generation.get("max_new_tokens"),
        )

    def params(self, subtask: str) -> dict[str, Any]:
        limits = self.max_new_tokens or {}
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": int(limits.get(subtask, 256)),
            "seed": self.seed,
        }


def model_identity(spec: dict[str, Any]) -> dict[str, Any]:
    """What identifies the weights behind a registry entry (part of every request key)."""
    return {
        "name": spec["name"],
        "engine": spec["engine"],
        "model_id": spec.get("hf_id") or spec.get("api", {}).get("model") or spec.get("baseline", {}).get("kind"),
        "revision": spec.get("revision") or spec.get("gguf", {}).get("sha256"),
        "lora": (spec.get("lora") or {}).get("path"),
    }


def conversation_text(messages: list[dict[str, str]]) -> str:
    """What follows the system prompt, as keyed: the user text, or the whole exchange when multi-turn."""
    rest = [m for m in messages if m["role"] != "system"]
    if len(rest) == 1:
        return rest[0]["content"]
    return json.dumps(rest, ensure_ascii=False, sort_keys=True)


def request_key(identity: dict[str, Any], params: dict[str, Any], system: str, user: str) -> str:
    payload = {"model": identity, "params": params, "system": system, "user": user}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class GenerationCache:
    """Finished responses of one model, keyed by request key."""

    def __init__(self, folder: str | os.PathLike[str], model: str) -> None:
        self._store = SqliteStore(Path(folder) / f"{model}.sqlite")

    def get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        return {key: json.loads(value) for key, value in self._store.get_many(keys).items()}

    def put(self, key: str, record: dict[str, Any]) -> None:
        self._store.put_many([(key, json.dumps(record, ensure_ascii=False).encode("utf-8"))])

    def close(self) -> None:
        self._store.close()


@dataclass
class Job:
    variant: str
    subtask: str
    prompts: list[dict[str, Any]]
    requests: list[ChatRequest]
    out: Path


def load_jobs(
    spec: dict[str, Any],
    prompt_files: dict[tuple[str, str], Path],
    out_dir: Path,
    settings: GenerationSettings,
) -> list[Job]:
    identity = model_identity(spec)
    jobs = []
    for (variant, subtask), path in sorted(prompt_files.items()):
        prompts = [record for _, record in iter_jsonl(path)]
        params = settings.params(subtask)
        requests = []
        for prompt in prompts:
            system = next(m["content"] for m in prompt["messages"] if m["role"] == "system")
            key = request_key(identity, params, system, conversation_text(prompt["messages"]))
            requests.append(ChatRequest(key, f"{variant}/{prompt['id']}", prompt["messages"], params))
        jobs.append(Job(variant, subtask, prompts, requests, out_dir / variant / f"{subtask}.jsonl"))
    return jobs


def _output_record(
    spec: dict[str, Any], prompt: dict[str, Any], request: ChatRequest, cached: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": prompt["id"],
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


def _result_record(result: ChatResult) -> dict[str, Any]:
    return {
        "response": result.response,
        "finish_reason": result.finish_reason,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "latency_s": round(result.latency_s, 4),
        "attempts": result.attempts,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


async def _send(endpoint: Endpoint, requests: list[ChatRequest], cache: GenerationCache, settings: GenerationSettings):
    client = ChatClient(
        endpoint.base_url,
        endpoint.model,
        api_key=endpoint.api_key,
        concurrency=settings.concurrency,
        timeout_s=settings.timeout_s,
        retry=RetryPolicy(settings.retries, settings.backoff_base_s, settings.backoff_max_s),
    )
    done = 0

    def keep(result: ChatResult) -> None:
        nonlocal done
        cache.put(result.key, _result_record(result))
        done += 1
        if done % 20 == 0 or done == len(requests):
            log.info("%d/%d responses", done, len(requests))

    try:
        await client.run(requests, keep)
    finally:
        await client.close()


def fetch_responses(
    spec: dict[str, Any],
    requests: list[ChatRequest],
    cache: GenerationCache,
    settings: GenerationSettings,
    endpoint: Endpoint | Callable[[], Endpoint],
) -> tuple[dict[str, dict[str, Any]], int, float]:
    """Cached records for every request, sending only the missing ones.

    ``endpoint`` is a running endpoint, or a callable that provides one (a ``LazyEndpoint`` starts the
    engine only if something is missing). Returns (key -> record, how many were sent, seconds sending).
    """
    unique = {r.key: r for r in requests}
    cached = cache.get_many(list(unique))
    # order missing requests by system prompt so a server's prefix cache keeps the persona warm
    missing = [r for k, r in unique.items() if k not in cached]
    missing.sort(key=lambda r: r.messages[0]["content"])
    log.info("%s: %d requests, %d cached, %d to send", spec["name"], len(unique), len(cached), len(missing))
    started = time.perf_counter()
    if missing:
        asyncio.run(_send(endpoint if isinstance(endpoint, Endpoint) else endpoint(), missing, cache, settings))
    return cache.get_many(list(unique)), len(missing), time.perf_counter() - started


def run_summary(spec: dict[str, Any], requests: int, sent: int, seconds: float, settings: GenerationSettings):
    return {
        "model": spec["name"],
        "requests": requests,
        "sent": sent,
        "seconds_sending": round(seconds, 3),
        "engine": spec["engine"],
        "versions": {
            "h2htalk": package_version("h2htalk"),
            "openai": package_version("openai"),
            "llama_cpp_python": package_version("llama-cpp-python"),
            "vllm": package_version("vllm"),
            "python": platform.python_version(),
        },
        "settings": dict(settings.__dict__),
    }


def generate_model(
    spec: dict[str, Any],
    prompt_files: dict[tuple[str, str], Path],
    out_dir: str | os.PathLike[str],
    settings: GenerationSettings,
    cache_dir: str | os.PathLike[str],
    model_file: str | None = None,
    server_log: Path | None = None,
    endpoint: Endpoint | None = None,
    instances_dir: str | os.PathLike[str] = "results/instances",
) -> dict[str, Any]:
    """Generate every missing response, then write one output file per (variant, subtask).

    ``endpoint`` skips the engine (an already running server). Returns a run summary.
    """
    if spec["engine"] == "baseline":
        return _baseline_outputs(spec, prompt_files, Path(out_dir), instances_dir, settings)
    jobs = load_jobs(spec, prompt_files, Path(out_dir), settings)
    cache = GenerationCache(cache_dir, spec["name"])
    try:
        requests = [r for job in jobs for r in job.requests]
        with LazyEndpoint(spec, model_file, server_log, settings.seed) as lazy:
            cached, sent, seconds = fetch_responses(spec, requests, cache, settings, endpoint or lazy)
        for job in jobs:
            write_jsonl_atomic(
                job.out,
                (_output_record(spec, p, r, cached[r.key]) for p, r in zip(job.prompts, job.requests, strict=True)),
            )
    finally:
        cache.close()
    return run_summary(spec, len({r.key for r in requests}), sent, seconds, settings)


def _baseline_outputs(
    spec: dict[str, Any],
    prompt_files: dict[tuple[str, str], Path],
    out_dir: Path,
    instances_dir: str | os.PathLike[str],
    settings: GenerationSettings,
) -> dict[str, Any]:
    """Answers of a baseline (no language model): same records, same path through scoring and tables."""
    kind, seed = spec["baseline"]["kind"], spec["baseline"].get("seed", 13)
    count = 0
    for variant, subtask in sorted(prompt_files):
        instances = [r for _, r in iter_jsonl(Path(instances_dir) / f"{subtask}.jsonl")]
        responses = baseline_responses(kind, instances, seed, subtask)
        records = [
            {
                "id": instance["id"],
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
            for instance, response in zip(instances, responses, strict=True)
        ]
        write_jsonl_atomic(out_dir / variant / f"{subtask}.jsonl", records)
        count += len(records)
    return run_summary(spec, count, 0, 0.0, settings)
