"""The API stand-in in a thread on a free loopback port: the OpenAI-compatible server of the unit tests.

    with LoopbackAPI() as api:                      # api.base_url: http://127.0.0.1:PORT/v1
        api.faults.scripted = {"问题0": ["429"]}      # the next request whose last user message holds 问题0
        ...                                         # gets a 429
        api.requests["问题0"]                        # requests received with that last user message

Each answer is ``echo_answer`` of the last user message unless ``responder`` says otherwise; no seeded faults.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .answers import echo_answer
from .messages import last_user_text
from .protocol import Reply, parse_json_body
from .server import ServedOnLoopback
from .services import ApiService


@dataclass
class LoopbackAPI(ServedOnLoopback, ApiService):
    responder: Callable[[str], str] | None = echo_answer
    requests: Counter[str] = field(default_factory=Counter)  # last user message -> chat requests received
    answered: Counter[str] = field(default_factory=Counter)  # last user message -> completions sent
    base_url: str = ""
    url_path = "/v1"

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        if not (method == "POST" and path.endswith("/chat/completions")):
            return super().handle(method, path, headers, body)
        request, _ = parse_json_body(body)
        user = last_user_text(request["messages"]) if request else ""
        with self.stats.lock:
            self.requests[user] += 1
        reply = super().handle(method, path, headers, body)
        if reply.status == 200 and isinstance(reply.body, dict):
            with self.stats.lock:
                self.answered[user] += 1
        return reply
