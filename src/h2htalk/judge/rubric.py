"""The itinerary rubric judge: prompts (evidence before score) and a robust parser of its answers.

The rubric covers task format, persona consistency, temporal coherence and feasibility, use of the given
hobbies / memories / arrangements, and warmth, on 0-5. The reference answer is always shown in the same
place, after the response, labelled as a calibration aid that the response need not match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import jinja2

from h2htalk.llm.parse import objects_with, strip_fences
from h2htalk.subtasks import get_subtask

SYSTEM = "你是一名严格、公正、前后一致的评审，只按给定的评分细则打分。"


@cache
def _template() -> jinja2.Template:
    text = (
        resources.files("h2htalk.resources")
        .joinpath("judge")
        .joinpath("itinerary_rubric.j2")
        .read_text(encoding="utf-8")
    )
    return jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False).from_string(text)


def judge_messages(subtask: str, task: str, response: str, reference: str) -> list[dict[str, str]]:
    """The judge's messages for one answer; the level texts come from the subtask's definition."""
    level = get_subtask(subtask).judge
    if level is None:
        raise ValueError(f"subtask {subtask!r} is not judged (measure S)")
    user = _template().render(task=task, response=response, reference=reference, **level).strip()
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class Verdict:
    score: float | None  # None: the answer could not be parsed (missing, never 0)
    evidence: str
    parse: str  # "json", "pattern" or "unparseable"


_SCORE_PATTERNS = (
    re.compile(r'"?score"?\s*[:：=]\s*"?(\d+(?:\.\d+)?)', re.IGNORECASE),
    re.compile(r"(?:评分|得分|分数|总分)\s*[:：为是]?\s*(\d+(?:\.\d+)?)\s*分?"),
    re.compile(r"(\d+(?:\.\d+)?)\s*/\s*5\b"),
)


def parse_verdict(text: str) -> Verdict:
    cleaned = strip_fences(text)
    for obj in objects_with(cleaned, "score"):
        try:
            score = float(obj["score"])
        except (TypeError, ValueError):
            continue
        if 0.0 <= score <= 5.0:
            return Verdict(score, str(obj.get("evidence", "")).strip(), "json")
    for pattern in _SCORE_PATTERNS:
        matches = pattern.findall(cleaned)
        if matches:
            score = float(matches[-1])
            if 0.0 <= score <= 5.0:
                return Verdict(score, cleaned.strip()[:2000], "pattern")
    return Verdict(None, cleaned.strip()[:2000], "unparseable")
