"""The routes of the two stand-in engines: ``VllmService`` answers like ``vllm serve`` (one model, its LoRA
adapters, a reasoning parser, an API key); ``ApiService`` like several remote APIs (OpenAI, DeepSeek,
Anthropic-compatible gateways) under path prefixes, with the faults of a ``FaultPlan``."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .answers import AnswerSettings, canned_answer, compose_answers
from .batches import BatchPlan, BatchService
from .faults import FAULT_COUNTERS, FaultPlan
from .limits import RateLimits
from .messages import prompt_tokens, request_hash
from .protocol import Reply, bearer_token, chat_completion, openai_error, parse_json_body, stream_chunks, vllm_error
from .server import Stats
from .sources import find_api_entry, is_reasoning

# remote models that always reason (their API returns reasoning_content) even without a registry "reasoning" key
API_REASONERS: frozenset[str] = frozenset({"deepseek-reasoner"})


def completion_reply(request: Mapping[str, Any], completion: dict[str, Any], stats: Stats, group: str) -> Reply:
    """The completion, streamed where the request asks; counted as ok and by finish reason under ``group``."""
    stats.add("ok", group)
    for choice in completion["choices"]:
        stats.add(f"finish_{choice['finish_reason']}", group)
    if request.get("stream"):
        return Reply(200, chunks=stream_chunks(completion))
    return Reply(200, completion)


@dataclass
class VllmService:
    model: str  # the model argument (path or Hugging Face id)
    served_names: list[str]
    loras: dict[str, str]  # adapter name -> path
    reasoning: bool
    reasoning_parser: str | None
    settings: AnswerSettings
    api_keys: list[str] = field(default_factory=list)
    max_model_len: int | None = None
    version: str = "0.8.5"
    latency_s: float = 0.0  # before each answer
    stats: Stats = field(default_factory=Stats)

    def models(self) -> dict[str, Any]:
        created = int(self.stats.started)
        data = [
            {"id": name, "object": "model", "created": created, "owned_by": "vllm", "root": self.model,
             "parent": None, "max_model_len": self.max_model_len}
            for name in self.served_names
        ]  # fmt: skip
        data += [
            {"id": name, "object": "model", "created": created, "owned_by": "vllm", "root": path,
             "parent": self.served_names[0], "max_model_len": None}
            for name, path in self.loras.items()
        ]  # fmt: skip
        return {"object": "list", "data": data}

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        self.stats.add(f"{method} {path}")
        if path in ("/health", "/ping") and method == "GET":
            return Reply(200)
        if path == "/version" and method == "GET":
            return Reply(200, {"version": self.version})
        if path == "/stats" and method == "GET":
            return Reply(200, self.stats.snapshot())
        if path.startswith("/v1/") and self.api_keys and bearer_token(headers) not in self.api_keys:
            self.stats.add("http_401")
            return Reply(401, {"error": "Unauthorized"})
        if path == "/v1/models" and method == "GET":
            return Reply(200, self.models())
        if path == "/v1/chat/completions" and method == "POST":
            with self.stats.flight():
                return self.chat(body)
        if path in ("/v1/models", "/v1/chat/completions"):
            return Reply(405, {"detail": "Method Not Allowed"})
        return Reply(404, {"detail": "Not Found"})

    def chat(self, body: bytes) -> Reply:
        request, problem = parse_json_body(body)
        if request is None:
            self.stats.add("http_400")
            return vllm_error(400, problem or "bad request", "BadRequestError")
        model = request["model"]
        if model not in self.served_names and model not in self.loras:
            self.stats.add("http_404")
            return vllm_error(404, f"The model `{model}` does not exist.", "NotFoundError")
        max_tokens = request.get("max_completion_tokens") or request.get("max_tokens")
        used = prompt_tokens(request["messages"])
        if self.max_model_len and used + int(max_tokens or 0) > self.max_model_len:
            self.stats.add("http_400")
            return vllm_error(
                400,
                f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                f"{used + int(max_tokens or 0)} tokens ({used} in the messages, {max_tokens} in the completion). "
                "Please reduce the length of the messages or completion.",
                "BadRequestError",
            )
        if self.latency_s:
            time.sleep(self.latency_s)
        answers = compose_answers(model, request, self.reasoning, self.settings)
        completion = chat_completion(model, request["messages"], answers, self.reasoning_parser)
        return completion_reply(request, completion, self.stats, model)


@dataclass
class ApiService:
    """Providers under path prefixes: ``/{provider}/v1/chat/completions`` and ``/{provider}/v1/models`` (or no
    prefix: the provider "default"), the Batch API's ``/files`` and ``/batches`` (``batches.py``), ``GET /stats``
    and ``/health``. Requests need a bearer key (any). ``limits``: the providers' rate limits (429 beyond them)."""

    settings: AnswerSettings = field(default_factory=AnswerSettings)
    registry: dict[str, dict[str, Any]] = field(default_factory=dict)  # empty: any model is served
    faults: FaultPlan = field(default_factory=FaultPlan)
    latency_s: float = 0.0  # before each answer
    # the content of every answer, from the last user message, instead of a composed one
    responder: Callable[[str], str] | None = None
    system_fingerprint: str | None = None  # the backend configuration every completion names, when set
    stats: Stats = field(default_factory=Stats)
    limits: RateLimits = field(default_factory=RateLimits)
    batch_plan: BatchPlan = field(default_factory=BatchPlan)

    _ROUTE = re.compile(r"^(?:/(?P<provider>[^/]+))?/v1/(?P<route>chat/completions|models)/?$")
    _BATCH_ROUTE = re.compile(r"^(?:/(?P<provider>[^/]+))?/v1/(?P<route>files|batches)(?P<rest>/.*)?$")

    def __post_init__(self) -> None:
        # a batch's lines are answered as chat requests, outside the per-minute limits (batches have their own)
        self.batches = BatchService(lambda provider, body: self.chat(provider, body, limited=False), self.stats,
                                    self.batch_plan)  # fmt: skip

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        if path == "/stats" and method == "GET":
            return Reply(200, self.stats.snapshot())
        if path == "/health" and method == "GET":
            return Reply(200, {"status": "ok"})
        batch_route = self._BATCH_ROUTE.match(path)
        if batch_route:
            if not bearer_token(headers):
                return openai_error(401, "You didn't provide an API key.", "invalid_request_error", "invalid_api_key")
            provider = batch_route["provider"] or "default"
            return self.batches.handle(method, provider, batch_route["route"], batch_route["rest"] or "", headers, body)
        match = self._ROUTE.match(path)
        if not match:
            return openai_error(404, f"Unknown request URL: {method} {path}.", "invalid_request_error", "unknown_url")
        provider = match["provider"] or "default"
        self.stats.add("requests", provider)
        if not bearer_token(headers):
            self.stats.add("http_401", provider)
            return openai_error(
                401, "You didn't provide an API key (Authorization: Bearer <key>).", "invalid_request_error",
                "invalid_api_key",
            )  # fmt: skip
        if match["route"] == "models":
            return Reply(200, self.models(provider))
        if method != "POST":
            return openai_error(405, "Method not allowed", "invalid_request_error")
        with self.stats.flight():
            return self.chat(provider, body)

    def models(self, provider: str) -> dict[str, Any]:
        entries = [e for e in self.registry.values() if isinstance(e.get("api"), dict)]
        mine = [e for e in entries if provider in str(e["api"].get("base_url", ""))] or entries
        names = sorted({e["api"]["model"] for e in mine})
        data = [{"id": n, "object": "model", "created": 0, "owned_by": provider} for n in names]
        return {"object": "list", "data": data}

    def chat(self, provider: str, body: bytes, limited: bool = True) -> Reply:
        request, problem = parse_json_body(body)
        if request is None:
            self.stats.add("http_400", provider)
            return openai_error(400, problem or "bad request", "invalid_request_error")
        model, messages = request["model"], request["messages"]
        entry = find_api_entry(self.registry, model)
        if self.registry and entry is None:
            self.stats.add("http_404", provider)
            return openai_error(
                404, f"The model `{model}` does not exist or you do not have access to it.",
                "invalid_request_error", "model_not_found",
            )  # fmt: skip
        tokens = prompt_tokens(messages) + int(request.get("max_tokens") or 0)
        wait = self.limits.admit(provider, tokens) if limited else None
        if wait is not None:  # over the provider's rate limit: refused, as a provider does, with when to come back
            self.stats.add("http_429_rate_limit", provider)
            return openai_error(
                429, "Rate limit reached for requests.", "requests", "rate_limit_exceeded",
                {"Retry-After": str(max(1, round(wait))), "retry-after-ms": str(max(1, round(1000 * wait)))},
            )  # fmt: skip
        digest = request_hash(f"{provider}/{model}", messages, request.get("seed"), request.get("max_tokens"))
        fault, attempt = self.faults.draw(provider, messages, digest)
        if fault:
            self.stats.add(FAULT_COUNTERS[fault], provider)
            reply = self.faults.reply(fault)
            if reply:
                return reply
            if fault == "stall":
                time.sleep(self.faults.stall_s)
        if attempt:
            self.stats.add("retried_ok", provider)
        if self.latency_s:
            time.sleep(self.latency_s)
        reasoning = is_reasoning(entry) or model in API_REASONERS
        if self.responder:
            answers = [canned_answer(self.responder, messages)]
        else:
            answers = compose_answers(model, request, reasoning, self.settings)
        # remote reasoning APIs (DeepSeek) always return the thinking apart, in reasoning_content
        completion = chat_completion(model, messages, answers, "deepseek_r1" if reasoning else None, strip=True)
        for choice in completion["choices"]:  # APIs answer "" rather than null when there is no content
            if choice["message"]["content"] is None:
                choice["message"]["content"] = ""
            choice["message"].pop("tool_calls", None)
            choice.pop("stop_reason", None)
        if fault == "no_choices":
            completion["choices"] = []
        if self.system_fingerprint:
            completion["system_fingerprint"] = self.system_fingerprint
        self.stats.add("ok", f"{provider}/{model}")
        return completion_reply(request, completion, self.stats, provider)
