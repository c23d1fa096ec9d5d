"""What a run would send, found by its stages' own request building against the caches, sending nothing.

``PlanEngines`` stands where a job's ``EngineOptions`` stands: reconstruction, generation and the judges build
their requests exactly as they do in a run and ask a session for the answers. A ``PlannedCalls`` session looks
each request up in its model's cache, read-only. A cached answer is returned as it is, so whatever follows from
it (a judge's second try at a cut-off answer, a conversation's next turn, a reconstruction's next try) is the
run's own; a missing one is counted as to send and answered by a placeholder the stage can go on with (a text
like the answer to come, and the completion tokens it is planned at). Content refusals count as cached, other
cached failures as to send, as in a run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.llm.calls import ResponseCache, cache_file, prefix_order, reusable
from h2htalk.llm.client import ChatRequest
from h2htalk.llm.reasoning import final_answer
from h2htalk.llm.tokens import MESSAGE_OVERHEAD, prompt_tokens, text_tokens
from h2htalk.settings import ClientSettings
from h2htalk.stages.steps import Step


@dataclass(frozen=True)
class Placeholder:
    """A planned answer: the text a stage goes on with, and the completion tokens the answer is planned at."""

    text: str
    completion_tokens: int


@dataclass(frozen=True)
class PlannedStep:
    """The work a session belongs to: ``name`` (a step its stage declares: the stage's name, or its name and part),
    whose answers it makes or judges, whether the stage's ``batch`` key is on, what a missing answer is planned as,
    and the step as declared (what its answers are)."""

    name: str
    for_model: str
    batch: bool
    placeholder: Callable[[dict[str, Any], ChatRequest], Placeholder]
    declared: Step


@dataclass
class Tally:
    """What one session would send and what its cache holds, in requests and tokens."""

    requests: int = 0
    cached: int = 0
    prompt_tokens: int = 0  # estimated, of every request: what a run from nothing sends
    completion_tokens: int = 0
    prompt_tokens_to_send: int = 0
    completion_tokens_to_send: int = 0
    prefill_tokens: int = 0  # the prompt tokens a server reads, its prefix cache reusing shared prefixes
    prefill_tokens_to_send: int = 0
    # the prompt tokens a one-slot server (llama.cpp) evaluates: after the prefix shared with the request sent before
    evaluated_tokens_to_send: int = 0
    recorded_prompt_tokens: int = 0  # what the endpoint reported for the cached answers
    recorded_completion_tokens: int = 0

    @property
    def to_send(self) -> int:
        return self.requests - self.cached


JobName = tuple[str, tuple[tuple[str, str], ...]]  # a stage's name and a job's labels, sorted


def job_name(stage: str, labels: Mapping[str, str]) -> JobName:
    return stage, tuple(sorted(labels.items()))


class PlannedCalls:
    """A session of a plan: answers from the cache where it has them, placeholders elsewhere, all counted."""

    def __init__(
        self, spec: dict[str, Any], cache_dir: str | os.PathLike[str], step: PlannedStep, client: ClientSettings
    ) -> None:
        self.spec, self.step, self.client = spec, step, client
        self.label = spec["name"]
        exists = cache_file(cache_dir, spec["name"]).exists()
        self._cache = ResponseCache(cache_dir, spec["name"], read_only=True) if exists else None
        self.tally = Tally()
        self.job: JobName | None = None  # the stage and labels of the job that opened the session
        self._seen: set[str] = set()
        # digests of the leading messages of every request, and of those to send: what a server's prefix cache holds
        self._prefixes: tuple[set[bytes], set[bytes]] = (set(), set())
        self._last_sent: list[dict[str, str]] = []  # what a one-slot server keeps of the requests before
        self.requests: set[str] = set()
        self.cached_items: set[str] = set()  # item ids of the requests whose answers are cached
        self.failed: dict[str, dict[str, Any]] = {}

    def __enter__(self) -> PlannedCalls:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._cache:
            self._cache.close()

    def answers(self, requests: Sequence[ChatRequest]) -> dict[str, dict[str, Any]]:
        asked = {r.key: r for r in requests}
        found = self._cache.get_many(list(asked)) if self._cache else {}
        unique = {key: r for key, r in asked.items() if key not in self._seen}
        records, cached = {}, set()
        # in the order the client sends them (a one-slot server's evaluations depend on it)
        for key, request in sorted(asked.items(), key=lambda item: prefix_order(item[1])):
            record = found.get(key)
            planned = self.step.placeholder(self.spec, request)
            if record is not None and reusable(record, self.client):
                records[key] = final_answer(record, self.spec)
                cached.add(key)
            else:
                records[key] = placeholder_record(planned.text)
            if key in unique:
                self._count(request, planned, record if key in cached else None)
        self._seen.update(unique)
        self.requests.update(unique)
        self.cached_items.update(r.item_id for r in requests if r.key in cached)
        return records

    def _count(self, request: ChatRequest, planned: Placeholder, record: dict[str, Any] | None) -> None:
        tally, prompt = self.tally, prompt_tokens(request.messages)
        tally.requests += 1
        tally.prompt_tokens += prompt
        tally.completion_tokens += planned.completion_tokens
        tally.prefill_tokens += prompt - self._reused(request.messages, self._prefixes[0])
        if record is not None:
            tally.cached += 1
            tally.recorded_prompt_tokens += record.get("prompt_tokens") or 0
            tally.recorded_completion_tokens += record.get("completion_tokens") or 0
            return
        tally.prompt_tokens_to_send += prompt
        tally.completion_tokens_to_send += planned.completion_tokens
        tally.prefill_tokens_to_send += prompt - self._reused(request.messages, self._prefixes[1])
        tally.evaluated_tokens_to_send += max(1, prompt - shared_with(self._last_sent, request.messages))
        self._last_sent = request.messages

    @staticmethod
    def _reused(messages: list[dict[str, str]], prefixes: set[bytes]) -> int:
        """Tokens of the longest run of leading messages an earlier request began with (what a server's prefix cache
        holds already), remembering this request's own in ``prefixes``."""
        digest, digests = b"", []
        for message in messages[:-1]:
            digest = hashlib.sha256(digest + message["role"].encode() + message["content"].encode()).digest()
            digests.append(digest)
        shared = next((n for n in range(len(digests), 0, -1) if digests[n - 1] in prefixes), 0)
        prefixes.update(digests)
        return sum(text_tokens(m["content"]) + MESSAGE_OVERHEAD for m in messages[:shared])

    def summary(self) -> dict[str, Any]:
        requests = self.tally.requests
        return {"model": self.spec["name"], "engine": self.spec["engine"], "requests": requests, "sent": 0, "failed": 0}

    def check_failures(self, max_rate: float) -> None:
        """A plan sends nothing, so nothing failed."""


def shared_with(before: list[dict[str, str]], messages: list[dict[str, str]]) -> int:
    """Tokens at the start of ``messages`` that a server holding only the request ``before`` has evaluated already:
    the leading messages both share, and the common beginning of the first that differs."""
    shared = 0
    for old, new in zip(before, messages, strict=False):
        if old["role"] != new["role"]:
            break
        if old["content"] != new["content"]:
            return shared + text_tokens(common_start(old["content"], new["content"]))
        shared += text_tokens(new["content"]) + MESSAGE_OVERHEAD
    return shared


def common_start(a: str, b: str) -> str:
    """The longest text both ``a`` and ``b`` begin with."""
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return a[:n]


def placeholder_record(text: str) -> dict[str, Any]:
    """A planned answer, as a stage reads a cached record."""
    return {
        "response": text, "reasoning": None, "finish_reason": "stop", "failure": None, "prompt_tokens": None,
        "completion_tokens": None, "latency_s": 0.0, "attempts": 0, "generated_at": None, "served_by": None,
    }  # fmt: skip


Placeholders = Callable[[Step], Callable[[dict[str, Any], ChatRequest], Placeholder]]


@dataclass
class PlanEngines:
    """Where a job's ``EngineOptions`` stands in a plan: its sessions plan instead of sending, under the step the
    job last named (``step``), with that step's placeholders; every session is kept in ``sessions``."""

    client: ClientSettings
    seed: int
    placeholders: Placeholders  # a step -> what its missing answers are planned as
    steps: Mapping[str, Step]  # the steps the planned stages declare, by name
    step_name: tuple[str, str] | None = None
    job: JobName | None = None  # the job planned now, which each session it opens records
    sessions: list[PlannedCalls] = field(default_factory=list)

    def step(self, name: str, for_model: str) -> None:
        self.step_name = (name, for_model)

    @contextlib.contextmanager
    def sharing(self, specs: Sequence[dict[str, Any]]) -> Iterator[PlanEngines]:
        yield self  # a plan starts no engine, so there is none to share

    def session(self, spec: dict[str, Any], cache_dir: str | os.PathLike[str], *, batch: bool) -> PlannedCalls:
        assert self.step_name is not None, "a job names its step before it opens a session"
        name, for_model = self.step_name
        if name not in self.steps:
            raise H2HTalkError(f"a planned job asks models under the step {name!r}, which no stage declares (steps=)")
        step = PlannedStep(name, for_model, batch, self.placeholders(self.steps[name]), self.steps[name])
        calls = PlannedCalls(spec, cache_dir, step, self.client)
        calls.job = self.job
        self.sessions.append(calls)
        return calls
