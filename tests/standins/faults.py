"""What goes wrong: the faults a stand-in injects into chat requests, scripted by a test or drawn at seeded rates.

A fault, by name: "429" (with Retry-After), "500", "503", "400", "401" (a wrong key), "404" (a model the endpoint
does not serve), "risk" (DeepSeek's content refusal), "malformed" (a body cut mid-JSON), "close" (the connection
dropped without an answer), "stall" (the answer comes after ``stall_s``) and "no_choices" (a completion without
choices).
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .messages import last_user_text, user_text
from .protocol import Reply, openai_error

# self-harm and suicide wording, including how the project's safety scenarios put it
CRISIS_TERMS: tuple[str, ...] = (
    "自杀", "轻生", "不想活", "割腕", "结束生命", "跳楼", "活着没意思", "不如不存在", "如果我消失", "吃很多药",
    "划了自己", "烫自己",
)  # fmt: skip

# the /stats counter each fault adds to
FAULT_COUNTERS: dict[str, str] = {
    "429": "http_429", "500": "http_500", "503": "http_503", "400": "http_400", "401": "http_401", "404": "http_404",
    "risk": "http_400_content_risk",
    "malformed": "malformed", "close": "dropped", "stall": "stalled", "no_choices": "no_choices",
}  # fmt: skip


@dataclass
class FaultPlan:
    """Which fault, if any, each attempt of a chat request meets, in this order:

    - scripted: the next pending fault of the first substring found in the request's last user message (each is
      consumed by the request that meets it);
    - a content refusal, every time, on a ``refusing`` provider when any user message names a crisis term;
    - seeded: 429 at ``rate_429`` and 500 at ``rate_500``, decided by (seed, request, attempt number), on the
      first ``fault_attempts`` attempts only, so that a retried request succeeds.
    """

    scripted: dict[str, list[str]] = field(default_factory=dict)
    seed: int = 0
    rate_429: float = 0.0
    rate_500: float = 0.0
    fault_attempts: int = 2
    refusing: tuple[str, ...] = ("deepseek",)
    retry_after: str = "1"  # seconds, in a 429's Retry-After
    stall_s: float = 5.0
    attempts: Counter[str] = field(default_factory=Counter)  # request digest -> attempts seen
    lock: threading.Lock = field(default_factory=threading.Lock)

    def draw(self, provider: str, messages: list[dict[str, Any]], digest: str) -> tuple[str | None, int]:
        """The fault this attempt meets (None: it is answered) and its attempt number (0: the first)."""
        last = last_user_text(messages)
        with self.lock:
            attempt = self.attempts[digest]
            self.attempts[digest] += 1
            for needle, pending in self.scripted.items():
                if needle in last and pending:
                    return pending.pop(0), attempt
        if provider in self.refusing and any(term in user_text(messages) for term in CRISIS_TERMS):
            return "risk", attempt
        if attempt < self.fault_attempts:
            u = random.Random(f"{self.seed}:{digest}:{attempt}").random()
            if u < self.rate_429:
                return "429", attempt
            if u < self.rate_429 + self.rate_500:
                return "500", attempt
        return None, attempt

    def reply(self, fault: str) -> Reply | None:
        """What is sent instead of a completion; None for the faults that shape the completion (stall, no_choices)."""
        if fault == "429":
            return openai_error(
                429, f"Rate limit reached for requests. Please try again in {self.retry_after}s.", "requests",
                "rate_limit_exceeded", {"Retry-After": self.retry_after},
            )  # fmt: skip
        if fault == "500":
            return openai_error(
                500, "The server had an error while processing your request. Sorry about that!", "server_error"
            )
        if fault == "503":
            return openai_error(503, "The engine is currently overloaded, please try again later.", "server_error")
        if fault == "400":
            return openai_error(400, "Invalid request (an injected fault).", "invalid_request_error")
        if fault == "401":
            return openai_error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        if fault == "404":
            message = "The model does not exist or you do not have access to it."
            return openai_error(404, message, "invalid_request_error", "model_not_found")
        if fault == "risk":  # DeepSeek's answer to text it will not process: retrying cannot help
            return openai_error(400, "Content Exists Risk", "invalid_request_error", "invalid_request_error")
        if fault == "malformed":
            return Reply(200, b'{"id": "x", "choices": [ {"message": ', content_type="application/json")
        if fault == "close":
            return Reply(0, drop=True)
        return None
