"""A turn of a conversation never sent: an earlier turn got no answer, so the model was never asked.

The generation job records it (``ENDED_ANSWER``) in place of an answer; every reader of generation files that
asks a judge about them (the rubric judge's cascade, the studies' judge) skips it (``unanswered``): there is
nothing to judge.
"""

from __future__ import annotations

from typing import Any

ENDED = "conversation_ended"  # the failure kind such a turn records

ENDED_ANSWER = {
    "response": "",
    "finish_reason": None,
    "failure": {"kind": ENDED, "permanent": True, "message": "an earlier turn got no answer"},
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "latency_s": 0.0,
    "generated_at": None,
    "attempts": 0,
}


def unanswered(generation: dict[str, Any]) -> bool:
    """A turn never sent because an earlier turn of its conversation got no answer: there is nothing to judge."""
    return (generation.get("failure") or {}).get("kind") == ENDED
