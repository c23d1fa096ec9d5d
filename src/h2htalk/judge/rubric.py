"""The itinerary rubric judge: prompts (evidence before score) and a robust parser of its answers.

The rubric covers task format, persona consistency, temporal coherence and feasibility, use of the given
hobbies / memories / arrangements, and warmth, on 0-5. The reference answer is always shown in the same
place, after the response, labelled as a calibration aid that the response need not match.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import jinja2

JUDGED_SUBTASKS: tuple[str, ...] = ("itinerary_basic", "itinerary_middle", "itinerary_advanced")

LEVELS = {
    "itinerary_basic": {
        "level_name": "Level I：根据共同爱好和记忆写一天的概述",
        "format_rule": "一段以“今天，”开头、不超过100个汉字的叙述",
        "use_rule": "是否用上了给出的共同爱好和共同记忆。",
    },
    "itinerary_middle": {
        "level_name": "Level II：根据日程概述列出时间表",
        "format_rule": "最多五行“HH:MM 活动”、每项不超过8个汉字，另起一行安排20:00以后入睡",
        "use_rule": "时间表是否忠实于给出的日程概述，没有遗漏或编造主要活动。",
    },
    "itinerary_advanced": {
        "level_name": "Level III：为当前时间段写细致的分时段计划",
        "format_rule": "三到四条以“序号. HH:MM时，”开头的细致描写",
        "use_rule": "是否紧扣今日行程和当前时间段的安排，细节具体可信。",
    },
}

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
    user = _template().render(task=task, response=response, reference=reference, **LEVELS[subtask]).strip()
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


def json_object_spans(text: str) -> list[tuple[int, str]]:
    """Every balanced {...} span with its start offset, in the order the spans close (inner before outer)."""
    spans, stack = [], []
    for index, ch in enumerate(text):
        if ch == "{":
            stack.append(index)
        elif ch == "}" and stack:
            start = stack.pop()
            spans.append((start, text[start : index + 1]))
    return spans


def json_objects(text: str) -> list[str]:
    """Every balanced {...} span, innermost last, so a trailing verdict object wins."""
    return [span for _, span in json_object_spans(text)]


def parse_verdict(text: str) -> Verdict:
    cleaned = re.sub(r"```(?:json)?", "", text or "")
    for candidate in reversed(json_objects(cleaned)):
        try:
            obj = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "score" in obj:
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
