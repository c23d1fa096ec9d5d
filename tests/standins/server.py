"""HTTP for the stand-ins, on the standard library: a handler that turns a ``handle(method, path, headers, body)``
function's ``Reply`` into a response, the threading server, counters served at ``/stats``, and two ways to run:
until SIGTERM (the executables) or in a thread on a free loopback port for a ``with`` block (tests, rehearsal)."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from .protocol import Reply


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
            if reply.drop:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
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
            self.send_header("Content-Type", reply.content_type or ctype)
            self.send_header("Content-Length", str(len(data)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":  # HEAD: the headers a GET would send, Content-Length included
                self.wfile.write(data)

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        def do_HEAD(self) -> None:
            self._dispatch("HEAD")

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


class ServedOnLoopback:
    """Mixed into a class with a ``handle`` method (a ``Handle``): ``with service:`` serves it from a thread on a
    free loopback port, at ``service.base_url``."""

    url_path = ""  # appended to the address: where clients are pointed

    def __enter__(self) -> Any:
        self._server = make_server("127.0.0.1", 0, self.handle)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}{self.url_path}"
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


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
