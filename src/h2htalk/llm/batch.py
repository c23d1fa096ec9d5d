"""Requests that need no immediate answer, through an OpenAI-compatible Batch API, at the provider's batch price.

The requests a session lacks are written as JSONL (one chat request a line, ``custom_id`` = its request key),
split by the endpoint's limits on requests and bytes per batch (the registry's ``api.batch_api``), uploaded
(``/files``), and submitted (``/batches``, a 24-hour window). Each upload and each batch is recorded at once
in a small state file next to the model's cache (``{model}.batches.sqlite``), so a job killed while it
waits polls the batches it submitted when it runs again, instead of submitting them again. Polling backs off
from one second to ``generation.batch_poll_s``. A finished batch's output and error files are read line by
line: every answer goes into the same cache under the same key as a direct answer would; a line the provider
would answer on another try (429, 5xx, a batch that expired or was cancelled before reaching it) is submitted
again in a later batch, up to ``generation.retries`` times; any other error fails its item as the direct
client would (a content refusal is cached, other failures are sent again by the next run).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from h2htalk.llm.client import (
    ChatRequest,
    ChatResult,
    EndpointError,
    Failure,
    GenerationError,
    RetryPolicy,
    classify,
    completion_result,
    failure_kind,
    refuses_every_request,
)
from h2htalk.llm.engines import Endpoint
from h2htalk.progress import log as progress_log
from h2htalk.store import SqliteStore

log = logging.getLogger(__name__)

CHAT_URL = "/v1/chat/completions"
WINDOW = "24h"  # the only completion window the Batch API offers
FIRST_POLL_S = 1.0
FINISHED = ("completed", "expired", "cancelled", "failed")
AGAIN = ("batch_expired", "batch_cancelled", "token_limit_exceeded")  # error codes worth another batch


@dataclass(frozen=True)
class BatchLimits:
    max_requests: int
    max_bytes: int


@dataclass
class Submission:
    """Requests uploaded as one input file (``file``), and the batch made of it once created."""

    file: str
    keys: list[str]
    batch: str | None
    round: int  # 1: the first submission of these requests; 2: their first resubmission; ...


class BatchState:
    """The submissions not yet read back, of one model, in a file next to its cache: what a rerun polls."""

    def __init__(self, cache_dir: str | os.PathLike[str], model: str) -> None:
        self.path = Path(cache_dir) / f"{model}.batches.sqlite"
        self._store = SqliteStore(
            self.path,
            holds=f"the batches of {model} submitted and not yet read back",
            redo="submits their requests again (answers already read back are in the model's cache)",
        )

    def submissions(self) -> list[Submission]:
        return [Submission(**json.loads(value)) for _, value in self._store.items()]

    def record(self, submission: Submission) -> None:
        self._store.put_many([(submission.file, json.dumps(asdict(submission)).encode("utf-8"))])

    def forget(self, submission: Submission) -> None:
        self._store.delete_many([submission.file])

    def close(self) -> None:
        self._store.close()


def request_line(request: ChatRequest, model: str) -> bytes:
    body = {"model": model, "messages": request.messages, **request.params}
    line = {"custom_id": request.key, "method": "POST", "url": CHAT_URL, "body": body}
    return json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n"


def split(lines: Sequence[tuple[str, bytes]], limits: BatchLimits) -> Iterator[list[tuple[str, bytes]]]:
    """(key, line) chunks of at most ``max_requests`` lines and ``max_bytes`` bytes (a longer line goes alone)."""
    chunk: list[tuple[str, bytes]] = []
    size = 0
    for key, line in lines:
        if chunk and (len(chunk) == limits.max_requests or size + len(line) > limits.max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append((key, line))
        size += len(line)
    if chunk:
        yield chunk


def line_outcome(line: dict[str, Any]) -> tuple[int | None, dict[str, Any] | None, str, str | None]:
    """(status, completion body, error message, error code) of one line of an output or error file."""
    response = line.get("response") or {}
    status, body = response.get("status_code"), response.get("body")
    if status == 200 and isinstance(body, dict):
        return status, body, "", None
    error = line.get("error") or (body or {}).get("error") or {}
    message = str(error.get("message") or f"HTTP {status}")
    return status, None, message, error.get("code")


class BatchRunner:
    """Send requests through the Batch API of ``endpoint`` and hand each result to ``keep`` as it is read."""

    def __init__(
        self,
        endpoint: Endpoint,
        limits: BatchLimits,
        state: BatchState,
        retry: RetryPolicy,
        *,
        timeout_s: float,
        poll_max_s: float,
        label: str,
    ) -> None:
        self.endpoint, self.limits, self.state, self.retry = endpoint, limits, state, retry
        self.poll_max_s, self.label = poll_max_s, label
        self._api = openai.AsyncOpenAI(
            base_url=endpoint.base_url, api_key=endpoint.api_key, timeout=timeout_s, max_retries=0
        )
        self.batches: list[str] = []  # every batch this runner submitted or polled

    async def run(self, requests: Sequence[ChatRequest], keep: Callable[[ChatResult], None]) -> None:
        try:
            await self._run({r.key: r for r in requests}, keep)
        finally:
            await self._api.close()

    async def _run(self, wanted: dict[str, ChatRequest], keep: Callable[[ChatResult], None]) -> None:
        live = [s for s in self.state.submissions() if not wanted.keys().isdisjoint(s.keys)]
        covered = {key for s in live for key in s.keys}
        if live:
            progress_log.info(
                "%s: %d requests already in %d submitted batches, polled again", self.label, len(covered), len(live)
            )
        for submission in live:
            if submission.batch is None:  # uploaded, but killed before its batch was recorded
                submission.batch = await self._batch_of(submission.file)
                self.state.record(submission)
        fresh = [request for key, request in wanted.items() if key not in covered]
        live += await self._submit(fresh, 1)
        delay = min(FIRST_POLL_S, self.poll_max_s)
        while live:
            for submission in list(live):
                batch = await self._call(self._api.batches.retrieve, submission.batch)
                if batch.status not in FINISHED:
                    continue
                again = await self._read_back(submission, batch, wanted, keep)
                live.remove(submission)
                self.state.forget(submission)  # before resubmitting: a kill now resubmits, never twice
                live += await self._resubmit(again, submission.round, wanted, keep)
            if live:
                await asyncio.sleep(delay)
                delay = min(2 * delay, self.poll_max_s)

    async def _batch_of(self, file_id: str) -> str:
        """The batch made of an uploaded file (found among the endpoint's batches), or a new one."""
        async for batch in self._api.batches.list(limit=100):
            if batch.input_file_id == file_id:
                return str(batch.id)
        return await self._create(file_id)

    async def _create(self, file_id: str) -> str:
        batch = await self._call(
            self._api.batches.create, input_file_id=file_id, endpoint=CHAT_URL, completion_window=WINDOW
        )
        self.batches.append(str(batch.id))
        return str(batch.id)

    async def _submit(self, requests: Sequence[ChatRequest], round_: int) -> list[Submission]:
        lines = [(r.key, request_line(r, self.endpoint.model)) for r in requests]
        submissions = []
        for chunk in split(lines, self.limits):
            content = b"".join(line for _, line in chunk)
            upload = await self._call(self._api.files.create, file=("requests.jsonl", content), purpose="batch")
            submission = Submission(str(upload.id), [key for key, _ in chunk], None, round_)
            self.state.record(submission)  # recorded before the batch exists: a rerun finds or makes it
            submission.batch = await self._create(submission.file)
            self.state.record(submission)
            submissions.append(submission)
            progress_log.info("%s: batch %s submitted (%d requests)", self.label, submission.batch, len(chunk))
        return submissions

    async def _resubmit(
        self, keys: list[str], round_: int, wanted: dict[str, ChatRequest], keep: Callable[[ChatResult], None]
    ) -> list[Submission]:
        requests = [wanted[key] for key in keys if key in wanted]
        if round_ > self.retry.max_retries:
            for request in requests:
                message = f"no answer after {round_} batches"
                keep(_failed(request, Failure("retries_exhausted", message, permanent=False), round_))
            return []
        return await self._submit(requests, round_ + 1)

    async def _read_back(
        self, submission: Submission, batch: Any, wanted: dict[str, ChatRequest], keep: Callable[[ChatResult], None]
    ) -> list[str]:
        """Keep every result of a finished batch; the keys to submit again."""
        if str(batch.id) not in self.batches:
            self.batches.append(str(batch.id))
        if batch.status == "failed":  # the provider refused the file itself
            errors = list((batch.errors.data if batch.errors else None) or [])
            codes = {e.code for e in errors}
            message = "; ".join(str(e.message) for e in errors) or "the batch failed"
            if codes & set(AGAIN):
                return list(submission.keys)
            log.warning("%s: batch %s failed: %s", self.label, batch.id, message)
            for key in submission.keys:
                request = wanted.get(key)
                if request:
                    keep(_failed(request, Failure("client_error", f"batch failed: {message}", False), submission.round))
            return []
        lines: dict[str, dict[str, Any]] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                content = await self._call(self._api.files.content, file_id)
                for text in content.text.splitlines():
                    if text.strip():
                        line = json.loads(text)
                        lines.setdefault(line["custom_id"], line)
        latency = float((batch.completed_at or batch.expired_at or time.time()) - batch.created_at)
        again = []
        for key in submission.keys:
            request = wanted.get(key) or ChatRequest(key, key, [], {})  # another job's request: its answer is kept
            line = lines.get(key)
            if line is None:
                again.append(key)  # the batch ended before reaching it
                continue
            status, body, message, code = line_outcome(line)
            if body is not None:
                try:
                    completion = ChatCompletion.model_validate(body)
                    keep(completion_result(request, completion, latency, submission.round))
                except ValueError:
                    again.append(key)  # a malformed answer: as the direct client, try again
            elif code in AGAIN or status is None or status in (408, 429) or status >= 500:
                again.append(key)
            elif status in (401, 403):
                raise EndpointError(f"{self.endpoint.base_url} answered HTTP {status} in batch {batch.id}: {message}")
            else:
                kind = failure_kind(message)
                failure = Failure(kind, f"HTTP {status}: {message[:200]} (batch {batch.id})", kind == "content_refusal")
                keep(_failed(request, failure, submission.round))
        return again

    async def _call(self, method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        """One call of the files or batches API, retried as the chat client retries a request."""
        attempt = 0
        while True:
            try:
                return await method(*args, **kwargs)
            except Exception as exc:
                retry, retry_after, description = classify(exc)
                if retry and attempt < self.retry.max_retries:
                    delay = self.retry.delay(attempt, retry_after)
                    log.warning("%s: %s; retry %d in %.1f s", self.label, description, attempt + 1, delay)
                    await asyncio.sleep(delay)
                    attempt += 1
                    continue
                if isinstance(exc, openai.APIStatusError) and refuses_every_request(exc):
                    raise EndpointError(f"{self.endpoint.base_url} answered {description}") from None
                raise GenerationError(f"{self.label}: the batch API answered {description}") from exc


def _failed(request: ChatRequest, failure: Failure, attempts: int) -> ChatResult:
    log.warning("item %s failed: %s", request.item_id, failure.message)
    return ChatResult(request.key, request.item_id, "", None, None, None, 0.0, attempts, failure=failure)
