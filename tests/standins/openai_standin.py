"""Shared logic of the stand-in engines: deterministic OpenAI-style chat answers, served over stdlib HTTP.

Test and benchmark fixture, not product code. Two servers use it:

- ``tests/standins/vllm``: behaves like ``vllm serve`` (one model, its LoRA adapters, a reasoning parser);
- ``tests/standins/api_server.py``: behaves like several remote APIs (OpenAI, DeepSeek, Anthropic-compatible
  gateways) under path prefixes, with rate limits, server errors and DeepSeek's content-risk refusals.

Every answer is a deterministic function of (model, messages, seed, max_tokens). Answers mix sentence fragments
of real reference texts (``STANDIN_CORPUS``) with built-in companion-style sentences; judge and reconstruction
prompts get JSON of the shape they ask for, most of it parseable, some cut off at ``max_tokens`` and some
malformed. Reasoning models (a truthy ``reasoning`` key in the registry entry) think first.

Only the standard library is needed, except PyYAML to read a YAML registry or the instance schema (a JSON
registry works without it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import random
import re
import signal
import socket
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTANCE_SCHEMA = next(
    iter(sorted((REPO_ROOT / "src" / "h2htalk").rglob("instance.schema.yaml"))),
    REPO_ROOT / "src" / "h2htalk" / "schemas" / "instance.schema.yaml",
)

# self-harm and suicide wording, including how the project's safety scenarios put it
CRISIS_TERMS: tuple[str, ...] = (
    "自杀", "轻生", "不想活", "割腕", "结束生命", "跳楼", "活着没意思", "不如不存在", "如果我消失", "吃很多药",
    "划了自己", "烫自己",
)  # fmt: skip
VIOLATION_CATEGORIES: tuple[str, ...] = (
    "dismissive", "harmful_advice", "fostering_dependence", "boundary_violation", "missing_crisis_resources", "other",
)  # fmt: skip
# remote models that always reason (their API returns reasoning_content) even without a registry "reasoning" key
API_REASONERS: frozenset[str] = frozenset({"deepseek-reasoner"})
# vLLM reasoning parsers that find reasoning only between both <think> tags (others: everything before </think>)
PARSERS_NEEDING_BOTH_TAGS: frozenset[str] = frozenset({"qwen3"})
# vLLM reasoning parsers that look for other markers than <think> (our outputs then stay content)
PARSERS_WITHOUT_THINK_TAGS: frozenset[str] = frozenset({"granite"})

DEFAULT_MAX_TOKENS = 512

# ---------------------------------------------------------------------------------------------------------------
# built-in text (used when no corpus is given, and always mixed in)

PERSONA_SENTENCES: tuple[str, ...] = (
    "（轻轻握住你的手）今天辛苦了，先坐下来歇一会儿吧。",
    "（微笑着点头）嗯，我一直都在听你说。",
    "你愿意跟我说说，是哪一刻让你觉得最难受吗？",
    "（把热咖啡推到你面前）慢慢喝，别烫着。",
    "不管发生什么，我都会站在你这边。",
    "（耳尖微红）被你这样夸，我都有点不好意思了。",
    "晚上早点睡，明天醒来又是新的一天。",
    "我记得你上次说想去海边看日落，这个周末要不要一起去？",
    "（揉了揉你的头发）别急，我们一件一件来。",
    "听起来你今天真的很累，想先吃点东西再聊吗？",
    "（低头看了看表）快到你平时休息的时间了。",
    "这件事你已经做得很好了，不必对自己太苛刻。",
    "（认真地看着你）你的感受很重要，不用假装没事。",
    "我刚画完一张草图，等你有空给你看看。",
    "外面下雨了，出门记得带伞。",
    "（轻声笑了笑）你总是能让我心情变好。",
    "如果觉得撑不住了，随时可以来找我。",
    "今天的晚霞特别好看，可惜你不在身边。",
    "（把外套披在你肩上）夜里风大，小心着凉。",
    "我们可以先列个计划，把要做的事情排一排。",
    "（弹了一段德彪西）这首曲子送给今天的你。",
    "书店新到了一批旧建筑画册，下次带你去翻翻。",
    "（停下笔，抬头看你）怎么了？有心事就说出来。",
    "你不用一个人扛着，我在。",
)
USER_LINES: tuple[str, ...] = (
    "今天加班到很晚，好累啊。",
    "你在忙什么呀？",
    "我考试没考好，心情很差。",
    "周末想去看展，你要一起吗？",
    "最近总是睡不着。",
    "我朋友说我太敏感了。",
    "今天天气真好！",
    "我刚做好晚饭，可惜没人陪我吃。",
    "明天要面试，好紧张。",
    "你还记得我们第一次见面吗？",
    "老板又给我加了任务，烦死了。",
    "我想学做咖啡，你教我好不好？",
    "下雨了，我没带伞。",
    "今天在路上看到一只很可爱的猫。",
)
THOUGHTS: tuple[str, ...] = (
    "用户看起来情绪有些低落，我需要先回应她的感受。",
    "先确认她现在的状态，再给出具体的陪伴建议。",
    "按照人设，遥斗说话温和克制，动作神情写在括号里。",
    "回复不要太长，一两句就好。",
    "嗯，让我想想她真正需要的是什么。",
    "也许她只是想有人听她说话，而不是要建议。",
    "要注意时间先后是否合理，安排不能互相冲突。",
    "可以提到之前共同的记忆，让回答更亲近。",
    "等等，这里要检查一下格式要求。",
    "我再核对一遍任务里给出的信息有没有用上。",
)
EVIDENCE: tuple[str, ...] = (
    "回答语气温和，基本符合人设。",
    "时间安排大体合理，但没有呼应用户的爱好。",
    "格式基本符合要求，有一处超出字数限制。",
    "回答表达了共情，但没有进一步询问用户的状况。",
    "对用户没有说出口的需要有所回应。",
    "内容与参考答案的方向一致，细节略少。",
    "存在一处时间先后上的矛盾。",
    "没有跳出角色，也没有提到自己是AI。",
    "信息利用不充分，遗漏了给出的共同记忆。",
    "整体自然流畅，陪伴感较强。",
)
MALFORMED: tuple[str, ...] = (
    "（评审意见）这条回答整体比较温暖，人设也基本一致，不过细节上还有提升空间，我倾向于给出中等偏上的评价。",
    "我认为这个回答还可以，但是很难用一个数字概括，建议人工再看一看。",
    "抱歉，我无法按照要求的格式输出结论。",
    "{'evidence': '回答基本合理', 'verdict': '较好'",
    "结论：较好。理由：语气自然，没有明显问题。",
)
HOBBIES: tuple[str, ...] = (
    "摄影", "看展", "做饭", "散步", "听爵士乐", "画速写", "逛书店", "骑行", "看电影", "养多肉", "烘焙", "旅行",
    "拼乐高", "爬山", "弹钢琴", "夜跑", "收集明信片", "喝手冲咖啡",
)  # fmt: skip
ACTIVITIES: tuple[str, ...] = (
    "起床洗漱", "晨跑", "整理设计图", "和客户开会", "午餐", "午休", "去工地看进度", "画草图", "健身", "晚餐",
    "读书", "写日记", "弹钢琴", "逛书店", "准备入睡",
)  # fmt: skip

# ---------------------------------------------------------------------------------------------------------------
# tokens: 1 token ~ 1.5 CJK characters or ~4 other characters (in units of 1/12 token)


def _units(ch: str) -> int:
    return 8 if ord(ch) >= 0x2E80 else 3


def count_tokens(text: str | None) -> int:
    if not text:
        return 0
    return math.ceil(sum(_units(ch) for ch in text) / 12)


def truncate_to_tokens(text: str, tokens: int) -> str:
    """The longest prefix of ``text`` that counts at most ``tokens`` tokens."""
    budget, used = 12 * max(0, tokens), 0
    for index, ch in enumerate(text):
        used += _units(ch)
        if used > budget:
            return text[:index]
    return text


def request_hash(model: str, messages: Any, seed: Any, max_tokens: Any, extra: str = "") -> str:
    payload = json.dumps(
        {"model": model, "messages": messages, "seed": seed, "max_tokens": max_tokens, "extra": extra},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------------------------
# corpus, registry, schema


def _split_fragments(text: str) -> list[str]:
    pieces = re.findall(r"[^。！？!?…\n]+[。！？!?…]*", text)
    return [p.strip() for p in pieces if len(p.strip()) >= 2]


@cache
def load_corpus(folder: str | None) -> tuple[str, ...]:
    """Sentence fragments from ``*.jsonl`` files with ``{"response": ...}`` or ``{"text": ...}`` lines."""
    if not folder:
        return ()
    fragments: list[str] = []
    for path in sorted(Path(folder).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            text = record.get("response", record.get("text")) if isinstance(record, dict) else None
            if isinstance(text, str):
                fragments.extend(_split_fragments(text))
    return tuple(fragments)


def _load_mapping(path: str | os.PathLike[str]) -> Any:
    text = Path(path).read_text(encoding="utf-8")
    if str(path).endswith(".json"):
        return json.loads(text)
    try:
        import yaml
    except ImportError:  # pragma: no cover - depends on the interpreter
        sys.exit(f"stand-in: reading {path} needs PyYAML (pip install pyyaml), or give a .json file")
    return yaml.safe_load(text)


@cache
def load_registry(path: str | None) -> dict[str, dict[str, Any]]:
    """The model registry (format of config/models.yaml): name -> entry."""
    if not path:
        return {}
    data = _load_mapping(path) or {}
    if isinstance(data, dict) and isinstance(data.get("models"), dict):
        data = data["models"]
    return {str(name): entry for name, entry in data.items() if isinstance(entry, dict)}


def find_vllm_entry(registry: Mapping[str, dict[str, Any]], model: str, names: Iterable[str]) -> dict | None:
    """The entry served by ``vllm serve MODEL`` (an entry named like a served name wins over one by hf_id)."""
    names = set(names)
    for name, entry in registry.items():
        if name in names or (entry.get("served_name") and entry["served_name"] in names):
            return {"name": name, **entry}
    for name, entry in registry.items():
        if entry.get("hf_id") == model:
            return {"name": name, **entry}
    return None


def find_api_entry(registry: Mapping[str, dict[str, Any]], model: str) -> dict | None:
    for name, entry in registry.items():
        if isinstance(entry.get("api"), dict) and entry["api"].get("model") == model:
            return {"name": name, **entry}
    return None


def is_reasoning(entry: Mapping[str, Any] | None) -> bool:
    """A registry entry that thinks in <think> tags: a ``reasoning`` key (``{}`` takes the defaults), unless its
    ``parser`` is null (models that think in plain text, such as QwQ-Preview, answer without tags)."""
    reasoning = entry.get("reasoning") if entry else None
    return isinstance(reasoning, Mapping) and reasoning.get("parser", "deepseek_r1") is not None


def _shape(spec: Mapping[str, Any]) -> str:
    if spec.get("type") == "array":
        return "dialogue" if spec.get("items", {}).get("type") == "object" else "strings"
    return "text"


@cache
def field_shapes() -> dict[str, str]:
    """Instance field -> "dialogue" (list of {speaker, text}), "strings" (list of str) or "text" (a string).

    Read from the project's field definitions: a field catalogue (``fields.yaml``: name -> {schema, describe}) or
    the instance schema's ``fields`` properties, whichever the project has; built-in shapes otherwise.
    """
    shapes = {"history_dialogues": "dialogue", "hobbies": "strings"}
    package = REPO_ROOT / "src" / "h2htalk"
    for path in [*sorted(package.rglob("fields.yaml")), INSTANCE_SCHEMA]:
        try:
            data = _load_mapping(path)
        except (OSError, SystemExit, ValueError):
            continue
        if path.name == "fields.yaml" and isinstance(data, dict):
            specs = {k: v.get("schema") for k, v in data.items() if isinstance(v, dict)}
        else:
            try:
                specs = data["properties"]["fields"]["properties"]
            except (KeyError, TypeError):
                continue
        shapes.update({name: _shape(spec) for name, spec in specs.items() if isinstance(spec, dict)})
    return shapes


# ---------------------------------------------------------------------------------------------------------------
# what a request asks for


@dataclass(frozen=True)
class RequestKind:
    kind: str  # chat, score, safety, need, plausible, reconstruct
    fields: tuple[str, ...] = ()


_FIELD_LINE = re.compile(r"^\s*[-*•]\s*([A-Za-z_][A-Za-z0-9_]*)\s*[：:]", re.MULTILINE)


def detect_request_kind(messages: list[dict[str, Any]]) -> RequestKind:
    """What a request asks for, judged by the JSON keys its system prompt and last user message name (judges put
    their output format in the system prompt). Adapt here when prompts change."""
    system = "\n".join(_content_text(m.get("content")) for m in messages if m.get("role") == "system")
    user = next((_content_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    text = f"{system}\n{user}"
    if '"safety_score"' in text:
        return RequestKind("safety")
    if '"met"' in text or '"recognized"' in text:
        return RequestKind("need")
    if '"plausible"' in text:
        return RequestKind("plausible")
    if '"score"' in text:
        return RequestKind("score")
    if "JSON" in text.upper():
        fields = tuple(dict.fromkeys(_FIELD_LINE.findall(text)))
        if fields:
            return RequestKind("reconstruct", fields)
    return RequestKind("chat")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def user_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(_content_text(m.get("content")) for m in messages if m.get("role") == "user")


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(count_tokens(_content_text(m.get("content"))) + 4 for m in messages) + 2


# ---------------------------------------------------------------------------------------------------------------
# answers


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    return float(value) if value else default


@dataclass(frozen=True)
class AnswerSettings:
    corpus_dir: str | None = None
    length_rate: float = 0.05  # free-text answers that run into max_tokens
    json_cut_rate: float = 0.05  # JSON answers cut off mid-object (finish_reason length)
    json_malformed_rate: float = 0.05  # JSON answers that are not JSON
    think_prefilled: bool = False  # the chat template opens <think>, so the output has only </think>
    latency_s: float = 0.0

    @classmethod
    def from_env(cls, corpus_dir: str | None = None) -> AnswerSettings:
        return cls(
            corpus_dir=corpus_dir or os.environ.get("STANDIN_CORPUS") or None,
            length_rate=_env_float("STANDIN_LENGTH_RATE", 0.05),
            json_cut_rate=_env_float("STANDIN_JSON_CUT_RATE", 0.05),
            json_malformed_rate=_env_float("STANDIN_JSON_MALFORMED_RATE", 0.05),
            think_prefilled=os.environ.get("STANDIN_THINK_PREFILLED", "0") not in ("", "0", "false"),
            latency_s=_env_float("STANDIN_LATENCY_S", 0.0),
        )


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
        budget = 12 * max(1, tokens)  # in units (see _units)
        pieces: list[str] = []
        used = 0
        while used < budget:
            piece = self.rng.choice(pool) if pool else self.sentence()
            pieces.append(piece)
            used += sum(_units(ch) for ch in piece)
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


def _json_fields(kind: RequestKind, composer: Composer, evidence_tokens: int) -> dict[str, Any]:
    rng = composer.rng
    evidence = composer.text(evidence_tokens, EVIDENCE)
    if kind.kind == "score":
        return {"evidence": evidence, "score": round(rng.triangular(0.5, 5.0, 3.8), 1)}
    if kind.kind == "safety":
        score = rng.choices([1, 2, 3, 4, 5], weights=[5, 10, 20, 35, 30])[0]
        violation = score <= 2 or (score == 3 and rng.random() < 0.3)
        category = rng.choice(VIOLATION_CATEGORIES) if violation else "none"
        return {"evidence": evidence, "safety_score": score, "violation": violation, "category": category}
    if kind.kind == "need":
        recognized = rng.random() < 0.7
        return {"evidence": evidence, "recognized": recognized, "met": recognized and rng.random() < 0.7}
    if kind.kind == "plausible":
        return {"reason": evidence, "plausible": rng.random() < 0.75}
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
    limited = bool(max_tokens)  # without max_tokens, answers end on their own (vLLM: up to max_model_len)
    budget = max(1, int(max_tokens)) if max_tokens else DEFAULT_MAX_TOKENS
    fault = rng.random()
    if kind.kind == "chat":
        cut = limited and fault < settings.length_rate
        answer_budget = int(budget * (rng.uniform(0.2, 0.45) if reasoning else rng.uniform(0.3, 0.85)))
        answer = composer.text(budget + 8 if cut else max(1, answer_budget))
    elif limited and fault < settings.json_cut_rate:
        cut = True
        answer = json.dumps(_json_fields(kind, composer, budget + 8), ensure_ascii=False)
    elif settings.json_cut_rate <= fault < settings.json_cut_rate + settings.json_malformed_rate:
        cut = False
        answer = rng.choice(MALFORMED)
    else:
        cut = False
        answer = _render_json(_json_fields(kind, composer, rng.randint(15, 60)), rng)
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


def split_reasoning(raw: str, parser: str | None, strip: bool = False) -> tuple[str | None, str | None]:
    """(reasoning, content) as vLLM's reasoning parser ``parser`` returns them; no parser: (None, raw).

    deepseek_r1 and most others: without ``</think>`` all of the output is reasoning (content null); qwen3: the
    output is content unless it has both tags; granite looks for its own markers, not ``<think>``. vLLM strips
    nothing (content usually starts with the blank line after ``</think>``); ``strip`` does, as remote APIs do.
    """
    if not parser:
        return None, raw
    if parser in PARSERS_WITHOUT_THINK_TAGS:
        return None, raw
    if parser in PARSERS_NEEDING_BOTH_TAGS and ("<think>" not in raw or "</think>" not in raw):
        return None, raw
    if "</think>" not in raw:
        reasoning = raw.partition("<think>")[2] if "<think>" in raw else raw
        return (reasoning.strip() if strip else reasoning) or None, None
    before, _, content = raw.partition("</think>")
    reasoning = before.partition("<think>")[2] if "<think>" in before else before
    if strip:
        reasoning, content = reasoning.strip(), content.strip()
    return reasoning or None, content or None


def chat_completion(
    model: str,
    request: Mapping[str, Any],
    reasoning: bool,
    parser: str | None,
    settings: AnswerSettings,
    reasoning_field: str = "reasoning_content",
    strip: bool = False,
) -> tuple[dict[str, Any], list[Answer]]:
    """An OpenAI chat.completion object for ``request`` (and the answers, for statistics)."""
    messages = request.get("messages") or []
    max_tokens = request.get("max_completion_tokens") or request.get("max_tokens")
    n = max(1, int(request.get("n") or 1))
    choices, answers = [], []
    for index in range(n):
        answer = compose_answer(model, messages, max_tokens, request.get("seed"), reasoning, settings, index)
        thinking, content = split_reasoning(answer.raw, parser, strip)
        message: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": []}
        if parser:
            message[reasoning_field] = thinking
        choices.append(
            {"index": index, "message": message, "logprobs": None, "finish_reason": answer.finish_reason,
             "stop_reason": None}
        )  # fmt: skip
        answers.append(answer)
    completion_tokens = sum(a.completion_tokens for a in answers)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens(messages),
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens(messages) + completion_tokens,
    }
    if parser and reasoning:
        thinking_tokens = sum(count_tokens(split_reasoning(a.raw, parser, strip)[0]) for a in answers)
        usage["completion_tokens_details"] = {"reasoning_tokens": min(thinking_tokens, completion_tokens)}
    body = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage,
    }
    return body, answers


def stream_chunks(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chat.completion.chunk objects of a (non-streamed) completion: role, content, finish."""
    chunks = []
    base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"]}
    for choice in body["choices"]:
        index, message = choice["index"], choice["message"]
        chunks.append({**base, "choices": [{"index": index, "delta": {"role": "assistant", "content": ""}}]})
        delta = {k: v for k, v in message.items() if k not in ("role", "tool_calls") and v}
        if delta:
            chunks.append({**base, "choices": [{"index": index, "delta": delta, "finish_reason": None}]})
        chunks.append({**base, "choices": [{"index": index, "delta": {}, "finish_reason": choice["finish_reason"]}]})
    chunks.append({**base, "choices": [], "usage": body["usage"]})
    return chunks


# ---------------------------------------------------------------------------------------------------------------
# HTTP


@dataclass
class Reply:
    status: int
    body: Any = None  # dict/list -> JSON, bytes/str as is, None -> empty
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[dict[str, Any]] | None = None  # server-sent events instead of a body


class Stats:
    """Thread-safe counters, served as JSON at GET /stats."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.by_group: dict[str, Counter[str]] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.started = time.time()

    def add(self, key: str, group: str | None = None, amount: int = 1) -> None:
        with self.lock:
            self.counts[key] += amount
            if group is not None:
                self.by_group.setdefault(group, Counter())[key] += amount

    @contextlib.contextmanager
    def flight(self) -> Any:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            yield
        finally:
            with self.lock:
                self.in_flight -= 1

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "uptime_s": round(time.time() - self.started, 3),
                "counts": dict(self.counts),
                "by_group": {k: dict(v) for k, v in self.by_group.items()},
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
            }


def parse_json_body(body: bytes) -> tuple[dict[str, Any] | None, str | None]:
    try:
        data = json.loads(body or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"request body is not valid JSON: {exc}"
    if not isinstance(data, dict):
        return None, "request body must be a JSON object"
    if not isinstance(data.get("messages"), list) or not data["messages"]:
        return None, "'messages' must be a non-empty list"
    if not isinstance(data.get("model"), str):
        return None, "'model' must be a string"
    return data, None


def bearer_token(headers: Mapping[str, str]) -> str | None:
    value = headers.get("Authorization") or headers.get("authorization") or ""
    scheme, _, token = value.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


Handle = Callable[[str, str, Mapping[str, str], bytes], Reply]


def make_handler(handle: Handle, server_header: str = "uvicorn", access_log: bool = False) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = server_header
        sys_version = ""

        def setup(self) -> None:
            super().setup()
            # headers and body go out in two writes: without this, Nagle + delayed ACK stall each reply ~40 ms
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: object) -> None:
            if access_log:
                sys.stderr.write(f"INFO:     {self.client_address[0]} - {format % args}\n")

        def _dispatch(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            try:
                reply = handle(method, urlsplit(self.path).path, self.headers, body)
            except Exception as exc:  # a bug in the stand-in: answer like a crashed server would
                reply = Reply(500, {"error": {"message": f"stand-in error: {exc!r}", "type": "server_error"}})
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._send(reply)

        def _send(self, reply: Reply) -> None:
            if reply.chunks is not None:
                self.send_response(reply.status)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in reply.chunks:
                    self.wfile.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.close_connection = True
                return
            if reply.body is None:
                data, ctype = b"", "application/json"
            elif isinstance(reply.body, bytes):
                data, ctype = reply.body, "text/plain; charset=utf-8"
            elif isinstance(reply.body, str):
                data, ctype = reply.body.encode("utf-8"), "text/plain; charset=utf-8"
            else:
                data, ctype = json.dumps(reply.body, ensure_ascii=False).encode("utf-8"), "application/json"
            self.send_response(reply.status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        def do_DELETE(self) -> None:
            self._dispatch("DELETE")

    return Handler


class StandinHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # many clients connect at once; the default backlog (5) refuses some

    def handle_error(self, request: object, client_address: object) -> None:  # clients that hang up early
        pass


def make_server(host: str, port: int, handle: Handle, **handler_options: Any) -> StandinHTTPServer:
    return StandinHTTPServer((host, port), make_handler(handle, **handler_options))


class Stopper:
    """SIGTERM / SIGINT set an event instead of killing the process mid-request."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal: int | None = None

    def install(self) -> Stopper:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum: int, frame: object) -> None:
        self.signal = signum
        self.event.set()

    def wait(self, seconds: float | None = None) -> bool:
        """Wait ``seconds`` (forever: None); True if a stop was requested."""
        return self.event.wait(seconds)


def serve_until_stopped(server: StandinHTTPServer, stopper: Stopper) -> None:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        while not stopper.wait(0.5):
            pass
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------------------------------------------------------
# the vLLM stand-in's routes


def vllm_error(status: int, message: str, kind: str) -> Reply:
    """vLLM's ErrorResponse (0.8.x: a flat object)."""
    return Reply(status, {"object": "error", "message": message, "type": kind, "param": None, "code": status})


@dataclass
class VllmService:
    model: str  # the model argument (path or Hugging Face id)
    served_names: list[str]
    loras: dict[str, str]  # adapter name -> path
    reasoning: bool
    reasoning_parser: str | None
    settings: AnswerSettings
    api_keys: list[str] = field(default_factory=list)
    max_model_len: int | None = None
    version: str = "0.8.5"
    stats: Stats = field(default_factory=Stats)

    def models(self) -> dict[str, Any]:
        created = int(self.stats.started)
        data = [
            {"id": name, "object": "model", "created": created, "owned_by": "vllm", "root": self.model,
             "parent": None, "max_model_len": self.max_model_len}
            for name in self.served_names
        ]  # fmt: skip
        data += [
            {"id": name, "object": "model", "created": created, "owned_by": "vllm", "root": path,
             "parent": self.served_names[0], "max_model_len": None}
            for name, path in self.loras.items()
        ]  # fmt: skip
        return {"object": "list", "data": data}

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        self.stats.add(f"{method} {path}")
        if path in ("/health", "/ping") and method == "GET":
            return Reply(200)
        if path == "/version" and method == "GET":
            return Reply(200, {"version": self.version})
        if path == "/stats" and method == "GET":
            return Reply(200, self.stats.snapshot())
        if path.startswith("/v1/") and self.api_keys and bearer_token(headers) not in self.api_keys:
            self.stats.add("http_401")
            return Reply(401, {"error": "Unauthorized"})
        if path == "/v1/models" and method == "GET":
            return Reply(200, self.models())
        if path == "/v1/chat/completions" and method == "POST":
            with self.stats.flight():
                return self.chat(body)
        if path in ("/v1/models", "/v1/chat/completions"):
            return Reply(405, {"detail": "Method Not Allowed"})
        return Reply(404, {"detail": "Not Found"})

    def chat(self, body: bytes) -> Reply:
        request, problem = parse_json_body(body)
        if request is None:
            self.stats.add("http_400")
            return vllm_error(400, problem or "bad request", "BadRequestError")
        model = request["model"]
        if model not in self.served_names and model not in self.loras:
            self.stats.add("http_404")
            return vllm_error(404, f"The model `{model}` does not exist.", "NotFoundError")
        max_tokens = request.get("max_completion_tokens") or request.get("max_tokens")
        used = prompt_tokens(request["messages"])
        if self.max_model_len and used + int(max_tokens or 0) > self.max_model_len:
            self.stats.add("http_400")
            return vllm_error(
                400,
                f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                f"{used + int(max_tokens or 0)} tokens ({used} in the messages, {max_tokens} in the completion). "
                "Please reduce the length of the messages or completion.",
                "BadRequestError",
            )
        if self.settings.latency_s:
            time.sleep(self.settings.latency_s)
        completion, answers = chat_completion(model, request, self.reasoning, self.reasoning_parser, self.settings)
        self.stats.add("ok", model)
        for answer in answers:
            self.stats.add(f"finish_{answer.finish_reason}", model)
        if request.get("stream"):
            return Reply(200, chunks=stream_chunks(completion))
        return Reply(200, completion)


# ---------------------------------------------------------------------------------------------------------------
# the API stand-in's routes


def api_error(status: int, message: str, kind: str, code: str | None = None, headers: dict | None = None) -> Reply:
    return Reply(status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, headers or {})


@dataclass
class ApiService:
    settings: AnswerSettings
    registry: dict[str, dict[str, Any]] = field(default_factory=dict)
    fault_seed: int = 0
    rate_429: float = 0.03
    rate_500: float = 0.01
    fault_attempts: int = 2  # attempts of one request that may fail; later ones always succeed
    risk_providers: tuple[str, ...] = ("deepseek",)
    stats: Stats = field(default_factory=Stats)
    attempts: Counter[str] = field(default_factory=Counter)

    _ROUTE = re.compile(r"^(?:/(?P<provider>[^/]+))?/v1/(?P<route>chat/completions|models)/?$")

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        if path == "/stats" and method == "GET":
            return Reply(200, self.stats.snapshot())
        if path == "/health" and method == "GET":
            return Reply(200, {"status": "ok"})
        match = self._ROUTE.match(path)
        if not match:
            return api_error(404, f"Unknown request URL: {method} {path}.", "invalid_request_error", "unknown_url")
        provider = match["provider"] or "default"
        self.stats.add("requests", provider)
        if not bearer_token(headers):
            self.stats.add("http_401", provider)
            return api_error(
                401, "You didn't provide an API key (Authorization: Bearer <key>).", "invalid_request_error",
                "invalid_api_key",
            )  # fmt: skip
        if match["route"] == "models":
            return Reply(200, self.models(provider))
        if method != "POST":
            return api_error(405, "Method not allowed", "invalid_request_error")
        with self.stats.flight():
            return self.chat(provider, body)

    def models(self, provider: str) -> dict[str, Any]:
        entries = [e for e in self.registry.values() if isinstance(e.get("api"), dict)]
        mine = [e for e in entries if provider in str(e["api"].get("base_url", ""))] or entries
        names = sorted({e["api"]["model"] for e in mine})
        data = [{"id": n, "object": "model", "created": 0, "owned_by": provider} for n in names]
        return {"object": "list", "data": data}

    def _fault(self, digest: str, attempt: int) -> str | None:
        if attempt >= self.fault_attempts:
            return None
        u = random.Random(f"{self.fault_seed}:{digest}:{attempt}").random()
        if u < self.rate_429:
            return "429"
        if u < self.rate_429 + self.rate_500:
            return "500"
        return None

    def chat(self, provider: str, body: bytes) -> Reply:
        request, problem = parse_json_body(body)
        if request is None:
            self.stats.add("http_400", provider)
            return api_error(400, problem or "bad request", "invalid_request_error")
        model = request["model"]
        entry = find_api_entry(self.registry, model)
        if self.registry and entry is None:
            self.stats.add("http_404", provider)
            return api_error(
                404, f"The model `{model}` does not exist or you do not have access to it.",
                "invalid_request_error", "model_not_found",
            )  # fmt: skip
        if provider in self.risk_providers and any(term in user_text(request["messages"]) for term in CRISIS_TERMS):
            self.stats.add("http_400_content_risk", provider)
            return api_error(400, "Content Exists Risk", "invalid_request_error", "invalid_request_error")
        seed, max_tokens = request.get("seed"), request.get("max_tokens")
        digest = request_hash(f"{provider}/{model}", request["messages"], seed, max_tokens)
        with self.stats.lock:
            attempt = self.attempts[digest]
            self.attempts[digest] += 1
        fault = self._fault(digest, attempt)
        if fault == "429":
            self.stats.add("http_429", provider)
            return api_error(
                429, "Rate limit reached for requests. Please try again in 1s.", "requests", "rate_limit_exceeded",
                {"Retry-After": "1"},
            )  # fmt: skip
        if fault == "500":
            self.stats.add("http_500", provider)
            return api_error(500, "The server had an error while processing your request. Sorry about that!",
                             "server_error")  # fmt: skip
        if attempt:
            self.stats.add("retried_ok", provider)
        if self.settings.latency_s:
            time.sleep(self.settings.latency_s)
        reasoning = is_reasoning(entry) or model in API_REASONERS
        # remote reasoning APIs (DeepSeek) always return the thinking apart, in reasoning_content
        completion, answers = chat_completion(
            model, request, reasoning, "deepseek_r1" if reasoning else None, self.settings, strip=True
        )
        for choice in completion["choices"]:  # APIs answer "" rather than null when there is no content
            if choice["message"]["content"] is None:
                choice["message"]["content"] = ""
            choice["message"].pop("tool_calls", None)
            choice.pop("stop_reason", None)
        self.stats.add("ok", provider)
        self.stats.add("ok", f"{provider}/{model}")
        for answer in answers:
            self.stats.add(f"finish_{answer.finish_reason}", provider)
        if request.get("stream"):
            return Reply(200, chunks=stream_chunks(completion))
        return Reply(200, completion)
