"""A real OpenAI-compatible chat server on loopback that answers deterministically and injects faults.

It speaks the same HTTP protocol as llama.cpp, vLLM and remote APIs, so the client's retry and failure
logic is tested against real sockets: 429 with Retry-After, 5xx, stalls past the timeout, malformed JSON,
an early connection close, and client errors that must not be retried.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler


def stub_answer(user: str) -> str:
    return f"（微笑）回答{hashlib.sha256(user.encode()).hexdigest()[:8]}"


@dataclass
class StubState:
    base_url: str = ""
    # substring of the user message -> faults consumed one per matching request:
    # "429", "500", "503", "400", "risk" (a content refusal), "stall", "malformed", "close", "no_choices"
    faults: dict[str, list[str]] = field(default_factory=dict)
    delay_s: float = 0.0
    stall_s: float = 5.0
    # content of a successful answer, from the user message (default: a deterministic echo)
    responder: Callable[[str], str] = stub_answer
    retry_after: str = "1"
    requests: Counter[str] = field(default_factory=Counter)  # user message -> requests received
    answered: Counter[str] = field(default_factory=Counter)  # user message -> successful answers
    times: list[float] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fault_for(self, user: str) -> str | None:
        with self.lock:
            for needle, pending in self.faults.items():
                if needle in user and pending:
                    return pending.pop(0)
        return None


def make_handler(state: StubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send_json(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
            body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            # the client may have given up on this request (timeout or cancellation): nothing to answer then
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send_json(200, {"object": "list", "data": [{"id": "stub-model", "object": "model"}]})
            else:
                self._send_json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length) or b"{}")
            user = next((m["content"] for m in reversed(request.get("messages", [])) if m["role"] == "user"), "")
            with state.lock:
                state.requests[user] += 1
                state.times.append(time.monotonic())
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
            try:
                self._answer(request, user)
            finally:
                with state.lock:
                    state.in_flight -= 1

        def _answer(self, request: dict, user: str) -> None:
            fault = state.fault_for(user)
            if fault in ("429", "500", "503"):
                headers = {"Retry-After": state.retry_after} if fault == "429" else {}
                self._send_json(int(fault), {"error": {"message": f"injected {fault}"}}, headers)
                return
            if fault == "400":
                self._send_json(400, {"error": {"message": "injected bad request"}})
                return
            if fault == "risk":  # DeepSeek's answer to text it will not process
                self._send_json(400, {"error": {"message": "Content Exists Risk", "type": "invalid_request_error"}})
                return
            if fault == "stall":
                time.sleep(state.stall_s)
            if fault == "close":
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if fault == "malformed":
                body = b'{"id": "x", "choices": [ {"message": '
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            if state.delay_s:
                time.sleep(state.delay_s)
            choices = (
                []
                if fault == "no_choices"
                else [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": state.responder(user)},
                        "finish_reason": "stop",
                    }
                ]
            )
            with state.lock:
                state.answered[user] += 1
            self._send_json(
                200,
                {
                    "id": "chatcmpl-stub",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": request.get("model", "stub-model"),
                    "choices": choices,
                    "usage": {"prompt_tokens": len(user), "completion_tokens": 6, "total_tokens": len(user) + 6},
                },
            )

    return Handler


class StubServer:
    def __init__(self) -> None:
        from .conftest import QuietHTTPServer

        self.state = StubState()
        self._httpd = QuietHTTPServer(("127.0.0.1", 0), make_handler(self.state))
        self._httpd.daemon_threads = True
        self.state.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> StubState:
        self._thread.start()
        return self.state

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
