"""Shared fixtures: a real HTTP server on loopback, synthetic upstream releases, the repository root."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from h2htalk.instances.sources import demo_instances
from h2htalk.io import write_jsonl_atomic
from h2htalk.subtasks import SUBTASKS

REPO_ROOT = Path(__file__).resolve().parents[1]


def demo_file(folder: Path, subtask: str) -> Path:
    """The subtask's demo instances written to ``folder/{subtask}.jsonl`` (as the instances stage writes them)."""
    path = folder / f"{subtask}.jsonl"
    write_jsonl_atomic(path, demo_instances(subtask))
    return path


def upstream_data_dir() -> Path | None:
    """The released upstream files, when available: $H2HTALK_UPSTREAM_DIR (CI sets it)."""
    value = os.environ.get("H2HTALK_UPSTREAM_DIR")
    return Path(value) if value else None


@pytest.fixture
def released_data() -> Path:
    path = upstream_data_dir()
    if path is None:
        pytest.skip("H2HTALK_UPSTREAM_DIR is not set (the CI script sets it to the released files)")
    assert path.is_dir(), f"H2HTALK_UPSTREAM_DIR={path} is not a folder"
    return path


def synthetic_release_bytes(n_lines: int, tag: str, distinct: int = 13) -> bytes:
    """A file in the upstream format: CRLF, one {"response": ...} a line, Chinese text.

    Lines cycle through ``distinct`` texts, so tests that embed them stay fast.
    """
    lines = [
        json.dumps({"response": f"（微笑）{tag}第{i % distinct}句话。"}, ensure_ascii=False)
        for i in range(1, n_lines + 1)
    ]
    return ("\r\n".join(lines) + "\r\n").encode("utf-8")


@pytest.fixture
def synthetic_release(tmp_path: Path) -> Path:
    """A folder holding all 11 upstream files with the released line counts and synthetic text."""
    folder = tmp_path / "upstream_release"
    folder.mkdir()
    for subtask in SUBTASKS:
        (folder / subtask.upstream_file).write_bytes(synthetic_release_bytes(subtask.released, subtask.key))
    return folder


@dataclass
class FixtureServer:
    """Serves files from ``root`` under /{commit}/data/{file}; faults can be injected per path."""

    root: Path
    base_url: str = ""
    requests: Counter[str] = field(default_factory=Counter)
    # path -> list of faults consumed one per request: "500", "truncate"
    faults: dict[str, list[str]] = field(default_factory=dict)

    def url_template(self) -> str:
        return self.base_url + "/{repo}/{commit}/data/{file}"


def _make_handler(server_state: FixtureServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            server_state.requests[self.path] += 1
            pending = server_state.faults.get(self.path)
            fault = pending.pop(0) if pending else None
            name = self.path.rsplit("/", 1)[-1]
            target = server_state.root / name
            if fault == "500":
                self.send_error(500, "Injected server error")
                return
            if not target.is_file():
                self.send_error(404, "Not Found")
                return
            body = target.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if fault == "truncate":  # promise the whole file, send half, close the connection
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

    return Handler


class QuietHTTPServer(ThreadingHTTPServer):
    """Clients that hang up early are part of the tests; their broken connections are not errors."""

    def handle_error(self, request: object, client_address: object) -> None:
        pass


@pytest.fixture
def fixture_server(synthetic_release: Path) -> Iterator[FixtureServer]:
    state = FixtureServer(root=synthetic_release)
    httpd = QuietHTTPServer(("127.0.0.1", 0), _make_handler(state))
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


# The module that holds the suite's longest test (the paper rehearsal through SLURM, about a third of one worker's
# time) runs first: with --dist worksteal each worker starts at its own half of the list and an idle one takes
# tests from the end of the other's, so the long test no longer starts last and leaves a worker idle meanwhile.
RUN_FIRST = ("test_slurm.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name not in RUN_FIRST)  # stable: every other test keeps its place
