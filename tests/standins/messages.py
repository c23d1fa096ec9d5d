"""Reading a chat request: the text of its messages, its token counts, its digest and what it asks for."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

# tokens: 1 token ~ 1.5 CJK characters or ~4 other characters (in units of 1/12 token)


def _units(ch: str) -> int:
    return 8 if ord(ch) >= 0x2E80 else 3


def units(text: str) -> int:
    return sum(_units(ch) for ch in text)


def count_tokens(text: str | None) -> int:
    if not text:
        return 0
    return math.ceil(units(text) / 12)


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


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def user_text(messages: list[dict[str, Any]]) -> str:
    """Every user message, joined: a conversation's earlier turns included."""
    return "\n".join(content_text(m.get("content")) for m in messages if m.get("role") == "user")


def last_user_text(messages: list[dict[str, Any]]) -> str:
    return next((content_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(count_tokens(content_text(m.get("content"))) + 4 for m in messages) + 2


@dataclass(frozen=True)
class RequestKind:
    kind: str  # chat, score, safety, need, plausible, reconstruct
    fields: tuple[str, ...] = ()


_FIELD_LINE = re.compile(r"^\s*[-*•]\s*([A-Za-z_][A-Za-z0-9_]*)\s*[：:]", re.MULTILINE)


def detect_request_kind(messages: list[dict[str, Any]]) -> RequestKind:
    """What a request asks for, judged by the JSON keys its system prompt and last user message name (judges put
    their output format in the system prompt). Adapt here when prompts change."""
    system = "\n".join(content_text(m.get("content")) for m in messages if m.get("role") == "system")
    text = f"{system}\n{last_user_text(messages)}"
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
