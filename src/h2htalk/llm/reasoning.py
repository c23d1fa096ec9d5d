"""Reasoning models: only the final answer is scored; the reasoning is kept beside it.

A reasoning model (``reasoning:`` in its registry entry) thinks before it answers. vLLM with
``--reasoning-parser`` and DeepSeek's API return the thinking apart (``reasoning_content``); llama.cpp, other
APIs and vLLM without a parser return ``<think>…</think>answer`` in the content (R1-distilled chat templates
open the ``<think>`` themselves, so the content may start inside it and hold only its closing tag). An answer
cut off inside its thinking has no final answer: it is scored as empty and flagged ``truncated_in_reasoning``;
one that stopped without ever closing its thinking is scored as empty too and flagged ``no_final_answer``.
"""

from __future__ import annotations

from typing import Any

OPEN, CLOSE = "<think>", "</think>"


def split_reasoning(text: str, reasoning: str | None = None) -> tuple[str, str | None, bool]:
    """(final answer, reasoning, whether the thinking never ended) of one answer."""
    if reasoning is not None:  # returned apart; a parser that saw no end of thinking leaves no content
        return text.strip(), reasoning, not text.strip()
    if CLOSE in text:  # the answer follows the last </think>; everything before it is thinking, kept as written
        head, _, answer = text.rpartition(CLOSE)
        thought = head.split(OPEN, 1)[-1] if OPEN in head else head
        return answer.strip(), thought.strip(), False
    if OPEN in text:  # opened and never closed: all of it is thinking
        before, _, thought = text.partition(OPEN)
        return before.strip(), thought.strip(), True
    return text.strip(), None, False


def final_answer(record: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """A cached record as callers see it: for a reasoning model, the final answer in ``response``, the thinking
    in ``reasoning``, and ``truncated_in_reasoning`` when the answer ran out of tokens while thinking."""
    if not spec.get("reasoning") or record.get("failure"):
        return record
    answer, thought, unfinished = split_reasoning(record["response"], record.get("reasoning"))
    truncated = unfinished and record.get("finish_reason") == "length"
    return {
        **record,
        "response": "" if unfinished else answer,
        "reasoning": thought,
        "truncated_in_reasoning": truncated,
        "no_final_answer": unfinished and not truncated,
    }
