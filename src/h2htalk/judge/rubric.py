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

from h2htalk.llm.parse import fence, number_in, read_verdict, strip_code_fences
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
    fenced = fence("回答", response)  # the answer is data: nothing in it can pose as the reference or a verdict
    user = _template().render(system=system, task=task, response=fenced, reference=reference, **level).strip()
    return [{"role": "system", "content": system_text()}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class Verdict:
    score: float | None  # None: no verdict could be read (missing, never 0)
    evidence: str
    # "json", "total" (an explicit total in prose), "cut_off", "ambiguous" (two verdicts) or "unparseable"
    parse: str


# Only an explicit final score or total counts: per-criterion sub-scores ("人设一致性：4/5", "时间连贯得分1") in a
# cut-off answer must never be read as the verdict.
_TOTAL = re.compile(
    r"(?:总分|总评分|最终得分|最终评分|最终分数|综合得分|final score|overall score|total score)"
    r"\s*(?:为|是)?\s*[:：=]?\s*(\d+(?:\.\d+)?)\s*分?\s*(?:/\s*5)?\s*[。.!！]?\s*$",
    re.IGNORECASE,
)


def parse_verdict(text: str, finish_reason: str | None = None) -> Verdict:
    """The judge's score: the ``score`` of its one verdict object, a number in 0-5 at the object's top level, or,
    when no verdict object can be read, an explicit total on the answer's last line. Anything else is missing,
    never 0: a cut-off answer, two verdicts, a verdict whose score is not a number in range (an earlier object,
    quoted from the judged answer, is never read in its place)."""
    cleaned = strip_code_fences(text).strip()
    obj, how = read_verdict(text, "score", finish_reason)
    if how == "json":
        score = number_in(obj["score"], 0.0, 5.0)
        if score is not None:
            return Verdict(score, str(obj.get("evidence", "")).strip(), "json")
    elif how == "unparseable":
        last_line = cleaned.splitlines()[-1] if cleaned else ""
        match = _TOTAL.search(last_line)
        if match and 0.0 <= float(match.group(1)) <= 5.0:
            return Verdict(float(match.group(1)), cleaned[:2000], "total")
    return Verdict(None, cleaned[:2000], "unparseable" if how == "json" else how)
