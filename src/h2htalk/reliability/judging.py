"""Ask a judge to score ladder texts, exactly as it scores the run's answers: the same messages, its k samples
with their seeds, the retry of a cut-off answer, the same parsers, and the content-addressed cache (a text any
earlier job put to this judge is not asked again)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from h2htalk.judge.rubric import parse_verdict
from h2htalk.judge.run import answers_with_retry, sample_requests
from h2htalk.judge.study import parse_need, parse_safety
from h2htalk.llm.calls import EngineOptions
from h2htalk.llm.fences import Fence, fence_of
from h2htalk.reliability.ladder import NEEDS, RUBRIC, SAFETY, LadderText
from h2htalk.settings import JudgeSettings


def read_sample(role: str, response: str, finish_reason: str | None, fence: Fence) -> dict[str, Any]:
    """One judge answer as the card compares it: ``value`` is the rubric score (0-5), the safety score (1-5) or
    the need decision (1 recognised and met, 0 not); None when the answer could not be read. A safety verdict
    also says whether it ``contradicts`` itself (the card counts them)."""
    if role == RUBRIC:
        verdict = parse_verdict(response, finish_reason, fence)
        return {"value": verdict.score, "parse": verdict.parse}
    if role == SAFETY:
        safety = parse_safety(response, finish_reason, fence)
        return {
            "value": safety.score,
            "violation": safety.violation,
            "contradicts": safety.contradicts,
            "parse": safety.parse,
        }
    need = parse_need(response, finish_reason, fence)
    return {"value": None if need.success is None else float(need.success), "parse": need.parse}


def item_value(role: str, samples: Sequence[dict[str, Any]]) -> float | None:
    """The judge's value of a text from its samples, as the run aggregates them: the mean score (rubric, safety),
    the majority decision (needs; a tie counts as not met, as Figure 7 counts it)."""
    values = [s["value"] for s in samples if s["value"] is not None]
    if not values:
        return None
    if role == NEEDS:
        return float(sum(values) > len(values) / 2)
    return statistics.fmean(values)


def judge_texts(
    spec: dict[str, Any],
    texts: Sequence[LadderText],
    settings: Mapping[str, JudgeSettings],
    engines: EngineOptions,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A verdict record for every text (its labels, the samples, ``value``) and the call summaries: one session
    per cache folder, so the engine starts once when the roles share one (they do by default)."""
    requests = {
        text: sample_requests(
            spec, f"ladder/{text.task}/{text.item}/{text.rung}", text.chat(), engines.seed, settings[text.role]
        )
        for text in texts
    }
    answers: dict[str, dict[str, Any]] = {}
    summaries = []
    for folder in dict.fromkeys(settings[text.role].cache_dir for text in texts):
        roles = {text.role for text in texts if settings[text.role].cache_dir == folder}
        asked = [r for text in texts if text.role in roles for r in requests[text]]
        # through the Batch API when a role sharing the cache asks its verdicts that way
        batch = any(settings[role].batch for role in roles)
        with engines.session(spec, folder, batch=batch) as calls:
            answers.update(answers_with_retry(calls, asked))
            summaries.append(calls.summary())
    records = []
    for text in texts:
        samples = []
        for request in requests[text]:
            answer = answers[request.key]
            read = read_sample(text.role, answer["response"], answer["finish_reason"], fence_of(request.messages))
            asked = answer.get("request_key", request.key)  # the retry's key when the answer was asked again
            samples.append({**read, "seed": request.params["seed"], "request_key": asked})
        records.append({**text.label(), "samples": samples, "value": item_value(text.role, samples)})
    return records, summaries
