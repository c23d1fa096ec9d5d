"""One async OpenAI-compatible chat client for every engine: bounded concurrency, timeouts, retries.

Retries: exponential backoff with full jitter, capped, honouring Retry-After, for faults worth retrying
(timeouts, dropped connections, 408, 429, 5xx, a body that is not valid JSON). An endpoint that refuses every
request (a wrong key, URL or model name: 401, 402, 403, 404, 405, an unknown model) stops the work at once
with its message (``EndpointError``). One bad item never stops the others: any other 4xx (a content refusal,
a prompt over the context length) is a ``Failure`` of that item at once, and an item that runs out of retries
is one too; the caller decides what failures it tolerates.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
from openai.types.chat import ChatCompletion

from h2htalk.errors import H2HTalkError
from h2htalk.llm.ratelimit import RateLimiter
from h2htalk.llm.tokens import prompt_tokens

log = logging.getLogger(__name__)


class GenerationError(H2HTalkError):
    """A request failed for good (a client error, or retries ran out)."""


class EndpointError(GenerationError):
    """The endpoint refuses every request: a key, account, URL or model name it does not accept."""


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int
    backoff_base_s: float
    backoff_max_s: float
    retry_after_max_s: float = 300.0  # a Retry-After beyond this is the server's mistake, not a plan

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry_after_max_s)
        cap = min(self.backoff_max_s, self.backoff_base_s * (2**attempt))
        return random.uniform(0, cap)  # full jitter: spreads out clients that failed together


@dataclass(frozen=True)
class ChatRequest:
    key: str  # content address of the request; also what errors name
    item_id: str
    messages: list[dict[str, str]]
    params: dict[str, Any] = field(default_factory=dict)  # temperature, top_p, max_tokens, seed, stop


@dataclass(frozen=True)
class Failure:
    """Why an item got no answer. A ``permanent`` failure (a content refusal) would fail again if the same request
    were sent again; any other may not (retries ran out; the context length or the endpoint changed, which the
    request key does not cover)."""

    kind: str  # content_refusal, context_too_long, client_error, retries_exhausted
    message: str
    permanent: bool


@dataclass(frozen=True)
class ChatResult:
    key: str
    item_id: str
    response: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    attempts: int
    reasoning: str | None = None  # what a reasoning model thought, when the endpoint returns it apart
    failure: Failure | None = None
    served_model: str | None = None  # the model the answer says it came from
    system_fingerprint: str | None = None  # the backend configuration it came from, where the endpoint says


_REFUSAL = ("content exists risk", "content_policy", "content policy", "content management policy", "safety system")
_TOO_LONG = ("maximum context length", "context length", "too many tokens", "context_length_exceeded")
_ENDPOINT_REFUSALS = (401, 402, 403, 404, 405)  # unauthorised, unpaid, forbidden, no such URL or model
_UNKNOWN_MODEL = ("model_not_found", "does not exist", "model not exist", "unknown model", "invalid model")


def failure_kind(description: str) -> str:
    """What a non-retryable error means, from the endpoint's message."""
    text = description.lower()
    if any(marker in text for marker in _REFUSAL):
        return "content_refusal"
    if any(marker in text for marker in _TOO_LONG):
        return "context_too_long"
    return "client_error"


def refuses_every_request(exc: openai.APIStatusError) -> bool:
    """A status no request to this endpoint, model and key would get past: a configuration error."""
    text = str(exc.message).lower()
    return exc.status_code in _ENDPOINT_REFUSALS or any(marker in text for marker in _UNKNOWN_MODEL)


def _retry_after_seconds(headers: httpx.Headers | None) -> float | None:
    if not headers:
        return None
    if "retry-after-ms" in headers:
        try:
            return float(headers["retry-after-ms"]) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def classify(exc: BaseException) -> tuple[bool, float | None, str]:
    """(retry?, Retry-After seconds, short description) for an exception from one request."""
    if isinstance(exc, openai.APITimeoutError):
        return True, None, "timed out"
    if isinstance(exc, openai.APIConnectionError):
        return True, None, f"connection error ({exc.__cause__ or exc})"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        description = f"HTTP {status}: {str(exc.message)[:200]}"
        if status in (408, 429) or status >= 500:
            return True, _retry_after_seconds(exc.response.headers), description
        return False, None, description
    if isinstance(exc, (openai.APIResponseValidationError, json.JSONDecodeError, ValueError)):
        return True, None, f"malformed response ({type(exc).__name__}: {str(exc)[:120]})"
    return False, None, f"{type(exc).__name__}: {exc}"


def completion_result(request: ChatRequest, completion: ChatCompletion, latency_s: float, attempts: int) -> ChatResult:
    """The result of one chat completion (ValueError when it has no choices, a malformed answer)."""
    if not completion.choices:
        raise ValueError("response has no choices")
    choice = completion.choices[0]
    usage = completion.usage
    message = choice.message
    # vLLM's reasoning parser and DeepSeek's API put the reasoning apart (newer vLLM: "reasoning")
    reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    return ChatResult(
        key=request.key,
        item_id=request.item_id,
        response=message.content or "",
        finish_reason=choice.finish_reason,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        latency_s=latency_s,
        attempts=attempts,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        served_model=completion.model,
        system_fingerprint=completion.system_fingerprint,
    )


class ChatClient:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str,
        concurrency: int,
        timeout_s: float,
        retry: RetryPolicy,
        extra_body: dict[str, Any] | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.base_url, self.model = base_url, model
        self.limiter = limiter  # the provider's rate limits, respected before each attempt
        self.concurrency = max(1, concurrency)
        self.retry = retry
        self.extra_body = extra_body or {}
        # the openai package's own retries are off: this client decides (and logs) every retry
        self._client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)

    async def close(self) -> None:
        await self._client.close()

    async def listed_models(self) -> dict[str, dict[str, Any]]:
        """What the endpoint says it serves (``/models``: id -> entry); empty when it does not say."""
        try:
            page = await self._client.models.list()
        except (openai.APIError, ValueError) as exc:
            log.info("%s/models: %s; what it serves is not recorded", self.base_url, classify(exc)[2])
            return {}
        return {entry.id: entry.model_dump() for entry in page.data}

    async def complete(self, request: ChatRequest) -> ChatResult:
        attempt = 0
        start = time.perf_counter()
        while True:
            try:
                if self.limiter:  # what the provider counts: the prompt and the most the answer may take
                    await self.limiter.acquire(prompt_tokens(request.messages) + request.params.get("max_tokens", 0))
                completion = await self._client.chat.completions.create(
                    model=self.model,
                    messages=request.messages,  # type: ignore[arg-type]
                    extra_body=self.extra_body or None,
                    **request.params,
                )
                return completion_result(request, completion, time.perf_counter() - start, attempt + 1)
            except Exception as exc:
                retry, retry_after, description = classify(exc)
                if not retry and not isinstance(exc, openai.APIStatusError):
                    raise GenerationError(f"item {request.item_id}: {description}") from exc
                if not retry and refuses_every_request(exc):
                    raise EndpointError(f"{self.base_url} answered {description}") from None
                if not retry:
                    kind = failure_kind(description)
                    failure = Failure(kind, f"{description} (not retried)", permanent=kind == "content_refusal")
                elif attempt >= self.retry.max_retries:
                    message = f"{description}; gave up after {attempt + 1} attempts"
                    failure = Failure("retries_exhausted", message, permanent=False)
                else:
                    delay = self.retry.delay(attempt, retry_after)
                    log.warning("item %s: %s; retry %d in %.1f s", request.item_id, description, attempt + 1, delay)
                    await asyncio.sleep(delay)
                    attempt += 1
                    continue
                log.warning("item %s failed: %s", request.item_id, failure.message)
                elapsed = time.perf_counter() - start
                return ChatResult(
                    request.key, request.item_id, "", None, None, None, elapsed, attempt + 1, failure=failure
                )

    async def run(
        self,
        requests: Sequence[ChatRequest],
        on_result: Callable[[ChatResult], Awaitable[None] | None],
    ) -> None:
        """Send every request with at most ``concurrency`` in flight; hand each result (an answer, or the item's
        ``Failure``) over as it lands. An unexpected error cancels the rest and is raised; results already
        handed over stay with the caller.
        """
        semaphore = asyncio.Semaphore(self.concurrency)

        async def one(request: ChatRequest) -> None:
            async with semaphore:
                result = await self.complete(request)
            outcome = on_result(result)
            if asyncio.iscoroutine(outcome):
                await outcome

        tasks = [asyncio.create_task(one(r)) for r in requests]
        try:
            for finished in asyncio.as_completed(tasks):
                await finished
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
