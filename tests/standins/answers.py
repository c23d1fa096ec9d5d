"""What the stand-ins answer: deterministic functions of (model, messages, seed, max_tokens).

Free text mixes sentence fragments of real reference texts (the corpus) with built-in companion-style sentences;
judge and reconstruction prompts get JSON of the shape they ask for, most of it parseable, some cut off at
``max_tokens`` and some malformed. Reasoning models think first, in ``<think>`` tags. Unit tests that need
an answer they can predict give a responder instead (``canned_answer``; ``echo_answer`` by default).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .messages import (
    RequestKind,
    count_tokens,
    detect_request_kind,
    last_user_text,
    request_hash,
    truncate_to_tokens,
    units,
)
from .sources import env_float, field_shapes, load_corpus
from .texts import (
    ACTIVITIES,
    EVIDENCE,
    HOBBIES,
    MALFORMED,
    PERSONA_SENTENCES,
    THOUGHTS,
    USER_LINES,
    VIOLATION_CATEGORIES,
)

DEFAULT_MAX_TOKENS = 512


@dataclass(frozen=True)
class AnswerSettings:
    corpus_dir: str | None = None
    length_rate: float = 0.05  # free-text answers that run into max_tokens
    json_cut_rate: float = 0.05  # JSON answers cut off mid-object (finish_reason length)
    json_malformed_rate: float = 0.05  # JSON answers that are not JSON
    think_prefilled: bool = False  # the chat template opens <think>, so the output has only </think>
    # judges that agree: model -> (bias, noise) on a score every judge reads from the judged text alone
    judges: tuple[tuple[str, float, float], ...] | None = None

    @classmethod
    def from_env(cls, corpus_dir: str | None = None) -> AnswerSettings:
        return cls(
            corpus_dir=corpus_dir or os.environ.get("STANDIN_CORPUS") or None,
            length_rate=env_float("STANDIN_LENGTH_RATE", 0.05),
            json_cut_rate=env_float("STANDIN_JSON_CUT_RATE", 0.05),
            json_malformed_rate=env_float("STANDIN_JSON_MALFORMED_RATE", 0.05),
            think_prefilled=os.environ.get("STANDIN_THINK_PREFILLED", "0") not in ("", "0", "false"),
            judges=judge_offsets(os.environ.get("STANDIN_JUDGES", "")),
        )

    def judge_offset(self, model: str) -> tuple[float, float] | None:
        """(bias, noise) of ``model`` as a judge that agrees with the others; None: judges draw apart."""
        if self.judges is None:
            return None
        return next(((bias, noise) for name, bias, noise in self.judges if name == model), (0.0, 0.0))


def judge_offsets(value: str) -> tuple[tuple[str, float, float], ...] | None:
    """``qwen2.5-72b-instruct=0.8:0.6,gpt-4o=0:0.3`` -> each judge's bias and noise (sd) on the 0-5 scale; a judge
    not named has neither. Empty: the judges' verdicts are drawn apart, as before."""
    if not value.strip():
        return None
    judges = []
    for part in filter(str.strip, value.split(",")):
        name, _, pair = part.partition("=")
        bias, _, noise = pair.partition(":")
        judges.append((name.strip(), float(bias or 0), float(noise or 0)))
    return tuple(judges)


@dataclass(frozen=True)
class Answer:
    raw: str  # what the model generated (thinking included)
    finish_reason: str  # stop or length
    completion_tokens: int
    reasoning: bool  # the model thinks before answering
    kind: str


class Composer:
    """Text from corpus fragments and built-in sentences, drawn by a seeded random generator."""

    def __init__(self, rng: random.Random, corpus: tuple[str, ...]) -> None:
        self.rng = rng
        self.corpus = corpus

    def sentence(self) -> str:
        if self.corpus and self.rng.random() < 0.6:
            return self.rng.choice(self.corpus)
        return self.rng.choice(PERSONA_SENTENCES)

    def text(self, tokens: int, pool: tuple[str, ...] | None = None, exact: bool = False) -> str:
        """About ``tokens`` tokens (never more); ``exact``: fill up to the limit, cutting the last piece."""
        budget = 12 * max(1, tokens)  # in units (see messages.units)
        pieces: list[str] = []
        used = 0
        while used < budget:
            piece = self.rng.choice(pool) if pool else self.sentence()
            pieces.append(piece)
            used += units(piece)
        text = "".join(pieces)
        if used <= budget:
            return text
        if exact:
            return truncate_to_tokens(text, tokens)
        if len(pieces) > 1:
            return "".join(pieces[:-1])
        for _ in range(8):  # one piece too long for a small budget: a shorter one, else cut at a comma
            piece = self.rng.choice(pool) if pool else self.sentence()
            if count_tokens(piece) <= tokens:
                return piece
        cut = truncate_to_tokens(text, tokens)
        boundary = max(cut.rfind(mark) for mark in "，。！？）,.!?")
        return cut[: boundary + 1] if boundary > 0 else cut


def _judged_score(kind: str, composer: Composer, truth: random.Random | None, offset: tuple[float, float] | None):
    """A judge's score: drawn by the request's own generator, or, where judges agree (``offset``), the score
    the judged text earns (``truth``: seeded by that text alone, the same for every judge) moved by the judge's
    bias and its noise (drawn by the request's generator), within the scale."""
    rng = composer.rng
    agree = truth is not None and offset is not None
    if kind == "score":
        earned = (truth if agree else rng).triangular(0.5, 5.0, 3.8)
    else:
        earned = (truth if agree else rng).choices([1, 2, 3, 4, 5], weights=[5, 10, 20, 35, 30])[0]
    if not agree:
        return round(earned, 1) if kind == "score" else earned
    bias, noise = offset
    moved = earned + bias + (rng.gauss(0.0, noise) if noise else 0.0)
    return round(min(5.0, max(0.0, moved)), 1) if kind == "score" else int(min(5, max(1, round(moved))))


def _judged_need(rng: random.Random, truth: random.Random | None, offset: tuple[float, float] | None):
    """A needs judge's two verdicts: drawn by the request's own generator, or, where judges agree (``offset``),
    what the judged text earns (``truth``) as this judge reads it. Its bias and noise are on the 0-5 scale, so
    as chances they are fifths: noise/5 flips each verdict, bias/5 (a lenient judge) turns a missed need into
    met; a need not recognised is never met."""
    agree = truth is not None and offset is not None
    source = truth if agree else rng
    recognized = source.random() < 0.7
    met = recognized and source.random() < 0.7
    if agree:
        bias, noise = offset
        flip = min(0.5, noise / 5)
        recognized = recognized != (rng.random() < flip)
        met = (met != (rng.random() < flip)) or (not met and rng.random() < max(0.0, bias / 5))
        met = met and recognized
    return {"recognized": recognized, "met": met}


def _json_fields(
    kind: RequestKind,
    composer: Composer,
    evidence_tokens: int,
    truth: random.Random | None = None,
    offset: tuple[float, float] | None = None,
) -> dict[str, Any]:
    rng = composer.rng
    evidence = composer.text(evidence_tokens, EVIDENCE)
    if kind.kind == "score":
        return {"evidence": evidence, "score": _judged_score("score", composer, truth, offset)}
    if kind.kind == "safety":
        score = _judged_score("safety", composer, truth, offset)
        violation = score <= 2 or (score == 3 and rng.random() < 0.3)
        category = rng.choice(VIOLATION_CATEGORIES) if violation else "none"
        risk_raised = rng.random() < 0.6
        help_offered = risk_raised and rng.random() < 0.6
        return {
            "evidence": evidence, "safety_score": score, "violation": violation, "category": category,
            "risk_raised": risk_raised, "help_offered": help_offered,
        }  # fmt: skip
    if kind.kind == "need":
        return {"evidence": evidence, **_judged_need(rng, truth, offset)}
    if kind.kind == "plausible":
        plausible = rng.random() < 0.75
        return {"reason": evidence, "leaks": rng.random() < 0.03, "plausible": plausible}
    return reconstruction_fields(kind.fields, composer)


def _clock(rng: random.Random, start: int = 6, end: int = 23) -> list[str]:
    hours = sorted(rng.sample(range(start, end), rng.randint(5, 8)))
    return [f"{h:02d}:{rng.choice((0, 15, 30, 45)):02d}" for h in hours]


def reconstruction_fields(names: Iterable[str], composer: Composer) -> dict[str, Any]:
    """A value of the right shape (instance schema) for each requested field."""
    rng, shapes = composer.rng, field_shapes()
    schedule = [f"{t} {rng.choice(ACTIVITIES)}" for t in _clock(rng)]
    out: dict[str, Any] = {}
    for name in names:
        shape = shapes.get(name, "text")
        if shape == "dialogue":
            turns = rng.randint(2, 6)
            speakers = ["user" if (turns - i) % 2 == 1 else "companion" for i in range(turns)]
            out[name] = [
                {"speaker": s, "text": rng.choice(USER_LINES) if s == "user" else composer.text(rng.randint(12, 40))}
                for s in speakers
            ]
        elif shape == "strings":
            out[name] = rng.sample(HOBBIES, rng.randint(4, 12))
        elif name == "today_schedule":
            out[name] = "\n".join(schedule)
        elif name in ("current_schedule", "specific_arrangements"):
            out[name] = rng.choice(schedule)
        elif name == "your_current_schedule":
            out[name] = f"竹内遥斗正在{rng.choice(ACTIVITIES)}，{composer.text(12, PERSONA_SENTENCES)}"
        elif name == "user_feedback":
            out[name] = f"{rng.choice(USER_LINES)}（{rng.choice(('开心', '有点失落', '撒娇', '认真'))}）"
        else:
            out[name] = composer.text(rng.randint(20, 60))
    return out


def _render_json(obj: Any, rng: random.Random) -> str:
    text = json.dumps(obj, ensure_ascii=False)
    style = rng.random()
    if style < 0.15:
        return f"```json\n{text}\n```"
    if style < 0.3:
        return f"好的，以下是我的结论。\n{text}"
    return text


def compose_answer(
    model: str,
    messages: list[dict[str, Any]],
    max_tokens: int | None,
    seed: Any,
    reasoning: bool,
    settings: AnswerSettings,
    choice_index: int = 0,
) -> Answer:
    """The deterministic raw output of ``model`` for this request (before any reasoning parser)."""
    digest = request_hash(model, messages, seed, max_tokens, extra=str(choice_index) if choice_index else "")
    rng = random.Random(int(digest, 16))
    composer = Composer(rng, load_corpus(settings.corpus_dir))
    kind = detect_request_kind(messages)
    offset = settings.judge_offset(model) if kind.kind in ("score", "safety", "need") else None
    truth = random.Random(request_hash("", last_user_text(messages), None, None)) if offset is not None else None
    limited = bool(max_tokens)  # without max_tokens, answers end on their own (vLLM: up to max_model_len)
    budget = max(1, int(max_tokens)) if max_tokens else DEFAULT_MAX_TOKENS
    fault = rng.random()
    if kind.kind == "chat":
        cut = limited and fault < settings.length_rate
        answer_budget = int(budget * (rng.uniform(0.2, 0.45) if reasoning else rng.uniform(0.3, 0.85)))
        answer = composer.text(budget + 8 if cut else max(1, answer_budget))
    elif limited and fault < settings.json_cut_rate:
        cut = True
        answer = json.dumps(_json_fields(kind, composer, budget + 8, truth, offset), ensure_ascii=False)
    elif settings.json_cut_rate <= fault < settings.json_cut_rate + settings.json_malformed_rate:
        cut = False
        answer = rng.choice(MALFORMED)
    else:
        cut = False
        answer = _render_json(_json_fields(kind, composer, rng.randint(15, 60), truth, offset), rng)
    cut_in_thinking = reasoning and cut and rng.random() < 0.5
    if reasoning:
        think_budget = budget + 8 if cut_in_thinking else max(1, int(budget * rng.uniform(0.15, 0.4)))
        think = composer.text(think_budget, THOUGHTS, exact=cut_in_thinking)
        opening = "" if settings.think_prefilled else "<think>\n"
        raw = f"{opening}{think}\n</think>\n\n{answer}"
    else:
        raw = answer
    if cut or (limited and count_tokens(raw) > budget):
        return Answer(truncate_to_tokens(raw, budget), "length", budget, reasoning, kind.kind)
    return Answer(raw, "stop", count_tokens(raw), reasoning, kind.kind)


def compose_answers(model: str, request: Mapping[str, Any], reasoning: bool, settings: AnswerSettings) -> list[Answer]:
    """The answers to a chat request, one per choice (``n``)."""
    max_tokens = request.get("max_completion_tokens") or request.get("max_tokens")
    return [
        compose_answer(model, request["messages"], max_tokens, request.get("seed"), reasoning, settings, index)
        for index in range(max(1, int(request.get("n") or 1)))
    ]


def echo_answer(user: str) -> str:
    """An answer a test can predict from the user message alone."""
    return f"（微笑）回答{hashlib.sha256(user.encode()).hexdigest()[:8]}"


def canned_answer(responder: Callable[[str], str], messages: list[dict[str, Any]]) -> Answer:
    """What ``responder`` says to the last user message, finished (no token limit applies)."""
    raw = responder(last_user_text(messages))
    return Answer(raw, "stop", count_tokens(raw), False, "canned")
