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

from h2htalk.llm.parse import cut_off, objects_with, strip_fences
from h2htalk.subtasks import get_subtask


def _resource(name: str) -> str:
    return resources.files("h2htalk.resources").joinpath("judge").joinpath(name).read_text(encoding="utf-8")


@cache
def system_text() -> str:
    """The rubric itself: the same for every item and level, so an engine's prefix cache keeps it."""
    return _resource("itinerary_system.md").strip()


@cache
def _template() -> jinja2.Template:
    return jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False).from_string(
        _resource("itinerary_rubric.j2")
    )


def judge_messages(subtask: str, system: str, task: str, response: str, reference: str) -> list[dict[str, str]]:
    """The judge's messages for one answer: the rubric (system), then the model's system prompt, the level's
    rules (from the subtask's definition), the model's task, its answer and the reference. The system prompt
    comes first because it is the longest part that many requests share (every item of a variant): an engine
    that keeps the previous prompt's prefix evaluates it once per variant, not once per level."""
    level = get_subtask(subtask).judge
    if level is None:
        raise ValueError(f"subtask {subtask!r} is not judged (measure S)")
    user = _template().render(system=system, task=task, response=response, reference=reference, **level).strip()
    return [{"role": "system", "content": system_text()}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class Verdict:
    score: float | None  # None: the answer could not be parsed (missing, never 0)
    evidence: str
    parse: str  # "json", "total" (an explicit total in prose) or "unparseable"


# Only an explicit final score or total counts: per-criterion sub-scores ("人设一致性：4/5", "时间连贯得分1") in a
# cut-off answer must never be read as the verdict.
_TOTAL = re.compile(
    r"(?:总分|总评分|最终得分|最终评分|最终分数|综合得分|final score|overall score|total score)"
    r"\s*(?:为|是)?\s*[:：=]?\s*(\d+(?:\.\d+)?)\s*分?\s*(?:/\s*5)?\s*[。.!！]?\s*$",
    re.IGNORECASE,
)


def parse_verdict(text: str, finish_reason: str | None = None) -> Verdict:
    """The judge's score: a complete JSON object's ``score``, or an explicit total on the answer's last line;
    anything else (a cut-off answer included) is unparseable: missing, never 0."""
    cleaned = strip_fences(text).strip()
    if cut_off(cleaned, finish_reason):
        return Verdict(None, cleaned[:2000], "unparseable")
    for obj in objects_with(cleaned, "score"):
        try:
            score = float(obj["score"])
        except (TypeError, ValueError):
            continue
        if 0.0 <= score <= 5.0:
            return Verdict(score, str(obj.get("evidence", "")).strip(), "json")
    last_line = cleaned.splitlines()[-1] if cleaned else ""
    match = _TOTAL.search(last_line)
    if match and 0.0 <= float(match.group(1)) <= 5.0:
        return Verdict(float(match.group(1)), cleaned[:2000], "total")
    return Verdict(None, cleaned[:2000], "unparseable")
