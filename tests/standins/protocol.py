"""The OpenAI protocol as the stand-ins speak it: request bodies and keys read, completions, stream chunks and
error objects written (OpenAI's nested ``{"error": ...}`` and vLLM 0.8's flat one), and vLLM's reasoning parsers."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .answers import Answer
from .messages import count_tokens, prompt_tokens

# vLLM reasoning parsers that find reasoning only between both <think> tags (others: everything before </think>)
PARSERS_NEEDING_BOTH_TAGS: frozenset[str] = frozenset({"qwen3"})
# vLLM reasoning parsers that look for other markers than <think> (our outputs then stay content)
PARSERS_WITHOUT_THINK_TAGS: frozenset[str] = frozenset({"granite"})


@dataclass
class Reply:
    status: int
    body: Any = None  # dict/list -> JSON, bytes/str as is, None -> empty
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[dict[str, Any]] | None = None  # server-sent events instead of a body
    content_type: str | None = None  # instead of the one the body's type implies
    drop: bool = False  # close the connection without answering


def openai_error(status: int, message: str, kind: str, code: str | None = None, headers: dict | None = None) -> Reply:
    return Reply(status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, headers or {})


def vllm_error(status: int, message: str, kind: str) -> Reply:
    """vLLM's ErrorResponse (0.8.x: a flat object)."""
    return Reply(status, {"object": "error", "message": message, "type": kind, "param": None, "code": status})


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
    model: str, messages: list[dict[str, Any]], answers: list[Answer], parser: str | None, strip: bool = False
) -> dict[str, Any]:
    """The chat.completion object of ``answers`` (one choice each), split by the reasoning ``parser``."""
    choices = []
    for index, answer in enumerate(answers):
        thinking, content = split_reasoning(answer.raw, parser, strip)
        message: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": []}
        if parser:
            message["reasoning_content"] = thinking  # vLLM 0.8.x's field, and DeepSeek's
        choices.append(
            {"index": index, "message": message, "logprobs": None, "finish_reason": answer.finish_reason,
             "stop_reason": None}
        )  # fmt: skip
    completion_tokens = sum(a.completion_tokens for a in answers)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens(messages),
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens(messages) + completion_tokens,
    }
    if parser and any(a.reasoning for a in answers):
        thinking_tokens = sum(count_tokens(split_reasoning(a.raw, parser, strip)[0]) for a in answers)
        usage["completion_tokens_details"] = {"reasoning_tokens": min(thinking_tokens, completion_tokens)}
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage,
    }


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
