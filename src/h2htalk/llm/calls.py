"""One seam for every model call: content-addressed requests, the response cache, the engine started lazily.

Generation, the rubric judge, reconstruction and the studies' judges build requests with ``chat_request`` and
get their answers from a ``ModelCalls`` session:

    with EngineOptions(client, seed, model_files).session(spec, cache_dir, batch=False) as calls:
        answers = calls.answers(requests)      # request key -> cached record

Every request is content-addressed: key = SHA-256 of (the model's identity as its engine states it: model id
and revision, engine, an API's endpoint; sampling parameters, system prompt, the rest of the conversation).
Answers, and content refusals (they would be refused again), are committed to the model's cache as they land,
so a killed job, rerun, sends only what is missing; the engine starts only if something is missing, once per
session (once per job, for sessions that share it: ``EngineOptions.sharing``). Other failures are never cached: a
rerun sends them again. A provider's rate limits are kept to before sending (``llm.ratelimit``); a session opened
with ``batch`` sends what is missing through the model's Batch API (``llm.batch``), where its registry entry has
one, into the same cache under the same keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import platform
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from h2htalk.errors import ConfigError
from h2htalk.llm.batch import BatchLimits, BatchRunner, BatchState
from h2htalk.llm.client import ChatClient, ChatRequest, ChatResult, EndpointError, GenerationError, RetryPolicy
from h2htalk.llm.engines import Endpoint, LazyEndpoint, ServeOptions, engine_of, require_environment
from h2htalk.llm.ratelimit import RateLimiter, limiter_for
from h2htalk.llm.reasoning import final_answer
from h2htalk.progress import Progress
from h2htalk.progress import log as progress_log
from h2htalk.settings import ClientSettings
from h2htalk.store import SqliteStore
from h2htalk.versions import package_version

log = logging.getLogger(__name__)


def model_identity(spec: dict[str, Any]) -> dict[str, Any]:
    """What identifies the answers of a registry entry, as its engine says (part of every request key)."""
    return engine_of(spec).identity(spec)


def conversation_text(messages: list[dict[str, str]]) -> str:
    """What follows the system prompt, as keyed: the user text, or the whole exchange when multi-turn."""
    rest = [m for m in messages if m["role"] != "system"]
    if len(rest) == 1:
        return rest[0]["content"]
    return json.dumps(rest, ensure_ascii=False, sort_keys=True)


def request_key(identity: dict[str, Any], params: dict[str, Any], system: str, user: str) -> str:
    payload = {"model": identity, "params": params, "system": system, "user": user}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def chat_request(
    spec: dict[str, Any], item_id: str, messages: list[dict[str, str]], params: dict[str, Any]
) -> ChatRequest:
    """A request to the model of ``spec``, with its content address."""
    system = next(m["content"] for m in messages if m["role"] == "system")
    key = request_key(model_identity(spec), params, system, conversation_text(messages))
    return ChatRequest(key, item_id, messages, params)


def cache_file(folder: str | os.PathLike[str], model: str) -> Path:
    return Path(folder) / f"{model}.sqlite"


class ResponseCache:
    """Finished answers of one model, keyed by request key (one SQLite file per model)."""

    def __init__(self, folder: str | os.PathLike[str], model: str, *, read_only: bool = False) -> None:
        self._store = SqliteStore(
            cache_file(folder, model),
            holds=f"the answers of model {model} (and its content refusals)",
            redo=f"sends again every request to {model} that a job needs (other models have their own files)",
            read_only=read_only,
        )

    def get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        return {key: json.loads(value) for key, value in self._store.get_many(keys).items()}

    def put(self, key: str, record: dict[str, Any]) -> None:
        self._store.put_many([(key, json.dumps(record, ensure_ascii=False).encode("utf-8"))])

    def close(self) -> None:
        self._store.close()


def _result_record(result: ChatResult, listed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the cache keeps of one result; ``listed``: what the endpoint says it serves (its ``/models``)."""
    return {
        "response": result.response,
        "reasoning": result.reasoning,
        "finish_reason": result.finish_reason,
        "failure": None if result.failure is None else asdict(result.failure),
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "latency_s": round(result.latency_s, 4),
        "attempts": result.attempts,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "served_by": None if result.failure else served_by(result, listed),
    }


def reusable(record: dict[str, Any], client: ClientSettings) -> bool:
    """A cached record that stands for its request: an answer, or a content refusal unless those are retried.
    (Caches of earlier versions hold other failures too: those are sent again.)"""
    failure = record.get("failure")
    return failure is None or (failure["kind"] == "content_refusal" and not client.retry_failed)


def served_by(result: ChatResult, listed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the endpoint says an answer came from: the model it names (and the weights behind that name, where
    its ``/models`` says: vLLM's ``root``), and the backend configuration (``system_fingerprint``)."""
    entry = listed.get(result.served_model or "", {})
    return {"model": result.served_model, "root": entry.get("root"), "system_fingerprint": result.system_fingerprint}


def _served_key(served: dict[str, Any]) -> str:
    return ", ".join(f"{name} {value}" for name, value in served.items() if value is not None) or "an unnamed model"


def prefix_order(request: ChatRequest) -> tuple[str, ...]:
    """Sort key that puts requests sharing the longest prefix next to each other (the system prompt, then the
    conversation turn by turn), so an engine that keeps the previous request's prefix evaluates it once."""
    return tuple(message["content"] for message in request.messages)


async def _send(
    endpoint: Endpoint,
    requests: list[ChatRequest],
    keep: Callable[[ChatResult, dict[str, dict[str, Any]]], None],
    client: ClientSettings,
    label: str,
    limiter: RateLimiter | None,
    concurrency: int,
    terminal: bool = True,
) -> None:
    chat = ChatClient(
        endpoint.base_url,
        endpoint.model,
        api_key=endpoint.api_key,
        concurrency=concurrency,
        timeout_s=client.timeout_s,
        retry=retry_policy(client),
        limiter=limiter,
    )
    progress = Progress(label, len(requests), terminal=terminal)

    try:
        listed = await chat.listed_models()

        def landed(result: ChatResult) -> None:
            keep(result, listed)
            progress.advance()

        await chat.run(requests, landed)
    finally:
        await chat.close()


@dataclass
class EngineOptions:
    """How a job reaches its models: client settings, the engine seed, the GGUF files of local models
    (registry name -> path), one server log for every engine the job starts, or an already running
    ``endpoint`` to use instead of starting one; the step the job named last (``step``)."""

    client: ClientSettings
    seed: int
    model_files: Mapping[str, str] = field(default_factory=dict)
    server_log: Path | None = None
    endpoint: Endpoint | None = None
    kept: Mapping[str, LazyEndpoint] = field(default_factory=dict)  # engines shared by this job's sessions
    step_name: tuple[str, str] | None = None

    @classmethod
    def reaching(
        cls, specs: Mapping[str, dict[str, Any]], config: Mapping[str, Any], model_file: Callable[[str], str],
        server_log: Path | None = None, base_url: str | None = None, served_model: str | None = None,
    ) -> EngineOptions:  # fmt: skip
        """How a job of the run of ``config`` (validated) reaches the models of ``specs`` (registry name -> entry):
        the model file of each whose engine needs one (``model_file`` of its name), the server log, or the running
        server at ``base_url``, with the model its requests carry. Fails, before anything starts, when the
        environment lacks what the models need (an API key)."""
        endpoint = None
        if base_url:
            if len(specs) != 1 and not served_model:
                raise ConfigError(f"--base-url serves every model of this job ({', '.join(specs)}): name the one "
                                  "model its requests carry with --served-model")  # fmt: skip
            endpoint = Endpoint(base_url, served_model or next(iter(specs)))
        else:
            require_environment(specs.values())
        return cls(
            client=ClientSettings.from_config(config),
            seed=config["generation"]["decoding"]["seed"],
            model_files={name: model_file(name) for name, spec in specs.items() if engine_of(spec).needs_model_file},
            server_log=server_log,
            endpoint=endpoint,
        )

    def session(self, spec: dict[str, Any], cache_dir: str | os.PathLike[str], *, batch: bool) -> ModelCalls:
        """Calls to the model of ``spec``, named in progress lines and logs by the step the job named (the plan's
        name for it) and the model, and whose answers it judges where that is another (default: the model);
        ``batch``: through the model's Batch API, where it has one."""
        label = ""
        if self.step_name is not None:
            name, for_model = self.step_name
            label = f"{name} {spec['name']}" + (f" on {for_model}" if for_model != spec["name"] else "")
        return ModelCalls(spec, self, cache_dir, label, batch=batch)

    def serve_options(self, spec: dict[str, Any]) -> ServeOptions:
        return ServeOptions(self.model_files.get(spec["name"]), self.server_log, self.seed)

    def step(self, name: str, for_model: str) -> None:
        """Which of a job's pieces of work (a step of ``h2htalk.stages.steps``) the next sessions belong to, and
        whose answers they make or judge."""
        self.step_name = (name, for_model)

    @contextlib.contextmanager
    def sharing(self, specs: Sequence[dict[str, Any]]) -> Iterator[EngineOptions]:
        """These options, with the engine of each model of ``specs`` shared by every session opened with them: a
        job whose model does two pieces of work (answers the studies, then judges them) starts it once, on first
        use, and stops it on leaving."""
        with contextlib.ExitStack() as stack:
            kept = {s["name"]: stack.enter_context(LazyEndpoint(s, self.serve_options(s))) for s in specs}
            yield replace(self, kept={**self.kept, **kept})


class ModelPool:
    """Sessions of several models for one job, each opened on first use and kept until the pool closes, so a
    model used for several pieces of work (reconstruction of every subtask, say) starts its engine once."""

    def __init__(self, engines: EngineOptions, cache_dir: str | os.PathLike[str], *, batch: bool) -> None:
        self._engines, self._cache_dir, self._batch = engines, cache_dir, batch
        self._sessions: dict[str, ModelCalls] = {}

    def __enter__(self) -> ModelPool:
        return self

    def __exit__(self, *exc: object) -> None:
        for session in self._sessions.values():
            session.__exit__(*exc)

    def session(self, spec: dict[str, Any]) -> ModelCalls:
        if spec["name"] not in self._sessions:
            self._sessions[spec["name"]] = self._engines.session(spec, self._cache_dir, batch=self._batch)
        return self._sessions[spec["name"]]


class ModelCalls:
    """The answers of one model for one job: cached, content-addressed, the engine started only when needed."""

    def __init__(
        self,
        spec: dict[str, Any],
        engines: EngineOptions,
        cache_dir: str | os.PathLike[str],
        label: str = "",
        *,
        batch: bool,
    ) -> None:
        self.spec = spec
        self.label = label or spec["name"]
        self.client = engines.client
        self._cache = ResponseCache(cache_dir, spec["name"])
        engine = engine_of(spec)
        self._slots = engine.slots
        self._limiter = limiter_for(engine.provider(spec), self.client.rate_limits)
        self._batch_limits = engine.batch_limits(spec) if batch else None
        if batch and self._batch_limits is None:
            log.info("model %s has no Batch API (registry: api.batch_api): answered directly", spec["name"])
        self._batch_state = BatchState(cache_dir, spec["name"]) if self._batch_limits else None
        self.batches: list[str] = []  # the batches this session submitted or polled
        kept = engines.kept.get(spec["name"])
        self._lazy = kept if kept is not None else LazyEndpoint(spec, engines.serve_options(spec))
        self._owns_engine = kept is None  # a kept engine outlives the session
        self._endpoint = engines.endpoint
        self._transient: dict[str, dict[str, Any]] = {}  # failures worth another try: never cached
        self.requests: set[str] = set()
        self.served: dict[str, dict[str, Any]] = {}  # what the endpoint said the answers came from, over this session
        self.failed: dict[str, dict[str, Any]] = {}  # item id -> failure, over this session
        self.sent = 0
        self.held = 0  # requests the provider's rate limits held back (each a 429 it did not meet)
        self.seconds = 0.0

    def __enter__(self) -> ModelCalls:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._owns_engine:
                self._lazy.__exit__(*exc)
        finally:
            self._cache.close()
            if self._batch_state:
                self._batch_state.close()

    def _keep(self, result: ChatResult, listed: dict[str, dict[str, Any]]) -> None:
        record = _result_record(result, listed)
        if result.failure is not None and not result.failure.permanent:
            self._transient[result.key] = record
        else:  # answers, and refusals that would only be refused again (resent with retry_failed)
            self._cache.put(result.key, record)

    def answers(self, requests: Sequence[ChatRequest]) -> dict[str, dict[str, Any]]:
        """A record for every request (key -> record), sending only what is not cached. A record of an item that
        got no answer has ``response`` "" and its ``failure``; a reasoning model's record holds its final answer
        in ``response`` and its reasoning apart (``reasoning``)."""
        unique = {r.key: r for r in requests}
        found = self._cache.get_many(list(unique))
        cached = {key: record for key, record in found.items() if reusable(record, self.client)}
        missing = sorted((r for k, r in unique.items() if k not in cached), key=prefix_order)
        # on the terminal only when more than one request is sent (a conversation on a one-slot server asks once a
        # turn, a request at a time); the log has every call
        terminal = len(missing) > 1
        progress_log.info(
            "%s: %d requests, %d cached, %d to send", self.label, len(unique), len(cached), len(missing),
            extra={"terminal": terminal},
        )  # fmt: skip
        started = time.perf_counter()
        held = self._limiter.held if self._limiter else 0
        if missing:
            endpoint = self._endpoint or self._lazy()
            try:
                if self._batch_state and self._batch_limits:
                    asyncio.run(self._send_batches(endpoint, missing))
                else:
                    in_flight = self._in_flight()
                    asyncio.run(
                        _send(
                            endpoint, missing, self._keep, self.client, self.label, self._limiter, in_flight, terminal
                        )
                    )
            except EndpointError as exc:
                raise EndpointError(
                    f"model {self.spec['name']}: {exc} (the endpoint refuses every request: check its URL, the model"
                    " name and the key); nothing of it was cached, and the next run sends these requests again"
                ) from None
        self.requests.update(unique)
        self.sent += len(missing)
        self.held += (self._limiter.held if self._limiter else 0) - held
        self.seconds += time.perf_counter() - started
        records = {
            **self._cache.get_many(list(unique)),
            **{k: self._transient[k] for k in unique if k in self._transient},
        }
        self._warn_if_the_server_changed(cached, records)
        for record in records.values():
            if record.get("served_by"):
                self.served[_served_key(record["served_by"])] = record["served_by"]
        records = {key: final_answer(record, self.spec) for key, record in records.items()}
        self.failed.update({unique[k].item_id: r["failure"] for k, r in records.items() if r.get("failure")})
        return records

    def _in_flight(self) -> int:
        """Requests in flight: ``generation.concurrency``, but no more than the slots of a server the job started
        itself. A request queued at llama_cpp.server gains nothing, and the server then answers on another of its
        threads, whose OpenMP team spins beside the one decoding: about a fifth slower on 2 cores
        (benchmarks/local_engine.py)."""
        if self._endpoint is None and self._slots is not None:
            return min(self.client.concurrency, self._slots)
        return self.client.concurrency

    async def _send_batches(self, endpoint: Endpoint, missing: list[ChatRequest]) -> None:
        assert self._batch_state and self._batch_limits
        runner = BatchRunner(
            endpoint,
            BatchLimits(**self._batch_limits),
            self._batch_state,
            retry_policy(self.client),
            timeout_s=self.client.timeout_s,
            poll_max_s=self.client.batch_poll_s,
            label=self.label,
        )
        progress = Progress(self.label, len(missing))

        def landed(result: ChatResult) -> None:
            self._keep(result, {})
            progress.advance()

        try:
            await runner.run(missing, landed)
        finally:
            self.batches += [batch for batch in runner.batches if batch not in self.batches]

    def _warn_if_the_server_changed(self, cached: dict[str, dict], records: dict[str, dict]) -> None:
        """Answers of earlier runs and answers sent now that came, the endpoint says, from different models or
        backends go into the same outputs: say so."""
        before = {_served_key(r["served_by"]) for r in cached.values() if r.get("served_by")}
        now = {_served_key(r["served_by"]) for k, r in records.items() if k not in cached and r.get("served_by")}
        if before and now - before:
            log.warning(
                "model %s: the endpoint says the answers sent now came from %s, the %d cached from earlier runs"
                " from %s; both go into this job's outputs (delete its cache to have every answer from the same"
                " server, or pin its revision if it is the same model)",
                self.spec["name"], "; ".join(sorted(now - before)), len(cached), "; ".join(sorted(before)),
            )  # fmt: skip

    def summary(self) -> dict[str, Any]:
        """What this session did, with the versions and settings it ran with (a job's run.json)."""
        summary = run_summary(self.spec, len(self.requests), self.sent, self.seconds, {"client": vars(self.client)})
        kinds = Counter(failure["kind"] for failure in self.failed.values())
        served = [self.served[key] for key in sorted(self.served)]
        extra = {"batches": self.batches} if self.batches else {}
        if self._limiter:
            extra["rate_limit_held"] = self.held
        return {**summary, "failed": len(self.failed), "failures": dict(kinds), "served_by": served, **extra}

    def check_failures(self, max_rate: float) -> None:
        """Fail the job when more than ``max_rate`` of its items got no answer, naming the model, the count and
        the first items; every answer that came is already cached. A content refusal does not count: it is the
        provider's answer to that text (DeepSeek refuses crisis text, which the safety study is made of), it
        would be refused again, and it is recorded and counted in its cell like every failure."""
        counted = {item: f for item, f in self.failed.items() if f["kind"] != "content_refusal"}
        if self.requests and len(counted) / len(self.requests) > max_rate:
            first = ", ".join(f"{item} ({f['kind']})" for item, f in list(counted.items())[:5])
            answered = len(self.requests) - len(self.failed)
            raise GenerationError(
                f"model {self.spec['name']}: {len(counted)} of {len(self.requests)} requests failed, more than"
                f" generation.max_failure_rate {max_rate:.0%} (first: {first}); the {answered} answers that came"
                " are cached, and a rerun sends the failed ones again"
            )


def retry_policy(client: ClientSettings) -> RetryPolicy:
    return RetryPolicy(client.retries, client.backoff_base_s, client.backoff_max_s)


def run_summary(spec: dict[str, Any], requests: int, sent: int, seconds: float, settings: dict[str, Any]) -> dict:
    return {
        "model": spec["name"],
        "requests": requests,
        "sent": sent,
        "seconds_sending": round(seconds, 3),
        "engine": spec["engine"],
        "versions": {
            "h2htalk": package_version("h2htalk"),
            "openai": package_version("openai"),
            **{name: package_version(name) for name in engine_of(spec).packages},
            "python": platform.python_version(),
        },
        "settings": settings,
    }
