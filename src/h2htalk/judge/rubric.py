"""The itinerary rubric judge: prompts (evidence before score) and a robust parser of its answers.

The rubric covers task format, persona consistency, temporal coherence and feasibility, use of the given
hobbies / memories / arrangements, and warmth, on 0-5. The reference answer is always shown in the same
place, after the response, labelled as a calibration aid that the response need not match.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import jinja2

from h2htalk.llm.fences import UNFENCED, Fence, escape, fence_parts
from h2htalk.llm.verdict import read_fields, score
from h2htalk.subtasks import get_subtask


def _resource(name: str) -> str:
    return resources.files("h2htalk.resources").joinpath("judge").joinpath(name).read_text(encoding="utf-8")


@cache
def system_text() -> str:
    """The rubric itself: the same for every item and level, so an engine's prefix cache keeps it."""
    return _resource("itinerary_system.md").strip()


def template_text() -> str:
    """The user message's frame, before the item's texts fill it in."""
    return _resource("itinerary_rubric.j2")


@cache
def _template() -> jinja2.Template:
    return jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False).from_string(template_text())


def judge_messages(subtask: str, system: str, task: str, response: str, reference: str) -> list[dict[str, str]]:
    """The judge's messages for one answer: the rubric (system), then the model's system prompt, the level's
    rules (from the subtask's definition), the model's task, its answer and the reference. The system prompt
    comes first because it is the longest part that many requests share (every item of a variant): an engine
    that keeps the previous prompt's prefix evaluates it once per variant, not once per level."""
    level = get_subtask(subtask).judge
    if level is None:
        raise ValueError(f"subtask {subtask!r} is not judged (measure S)")
    # the answer is data: nothing in it can pose as the reference or a verdict; nor can the other parts pose as
    # the answer's markers
    fenced = fence_parts({"回答": response})["回答"]
    shown = {"system": escape(system), "task": escape(task), "reference": escape(reference)}
    user = _template().render(response=fenced, **shown, **level).strip()
    return [{"role": "system", "content": system_text()}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class Verdict:
    score: float | None  # None: no verdict could be read (missing, never 0)
    evidence: str
    parse: str  # "json", "cut_off", "ambiguous" (two verdicts) or "unparseable"
    reason: str | None = None  # why an unparseable answer was not read, where more is known (llm.verdict.Reading)


FIELDS = {"score": score(0.0, 5.0)}


def parse_verdict(text: str, finish_reason: str | None = None, fence: Fence = UNFENCED) -> Verdict:
    """The judge's score: the ``score`` of its one verdict object, read by ``llm.verdict`` as every judge's is
    (a number in 0-5) in the reply to the request ``fence`` fenced (``fences.fence_of`` its messages). Anything
    else is missing, never 0: a cut-off answer, two verdicts, a verdict whose score is not a number in range, a
    score in prose only (an object quoted from the judged answer is never read in its place)."""
    reading = read_fields(text, finish_reason, "score", FIELDS, fence)
    return Verdict(reading.get("score"), reading.evidence, reading.parse, reading.reason)
