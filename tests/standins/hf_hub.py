"""A Hugging Face hub on loopback: the two endpoints ``huggingface_hub.snapshot_download`` uses.

``GET /api/models/{repo}/revision/{revision}`` answers the repo's commit and file list; ``HEAD`` and ``GET``
``/{repo}/resolve/{revision}/{file}`` answer a file with the commit, ETag and size headers the client reads.
A revision is a branch name (``main``) or the commit itself. Point ``HF_ENDPOINT`` at ``base_url``.

It serves the repos it is given; with ``any_repo`` it also makes up a small one for any other name (a
``config.json`` naming it), so a rehearsal's prefetch of 30 models fetches kilobytes, not terabytes.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote


@dataclass
class Repo:
    files: dict[str, bytes]
    commit: str = ""

    def __post_init__(self) -> None:
        if not self.commit:
            digest = hashlib.sha1(json.dumps(sorted((k, v.hex()) for k, v in self.files.items())).encode())
            self.commit = digest.hexdigest()


@dataclass
class HubState:
    repos: dict[str, Repo]
    any_repo: bool = False
    base_url: str = ""
    requests: Counter[str] = field(default_factory=Counter)  # "METHOD path" -> count

    def resolve(self, repo: str, revision: str) -> Repo | None:
        if repo not in self.repos and self.any_repo:
            self.repos[repo] = Repo({"config.json": json.dumps({"_name_or_path": repo}).encode()})
        found = self.repos.get(repo)
        return found if found and revision in ("main", found.commit) else None


def _handler(state: HubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _reply(self, status: int, body: bytes, headers: dict[str, str], send_body: bool = True) -> None:
            self.send_response(status)
            for key, value in {"Content-Length": str(len(body)), **headers}.items():
                self.send_header(key, value)
            self.end_headers()
            if send_body:
                self.wfile.write(body)

        def _not_found(self, send_body: bool = True) -> None:
            self._reply(404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"}, send_body)

        def _route(self, send_body: bool) -> None:
            path = unquote(self.path.split("?", 1)[0])
            state.requests[f"{self.command} {path}"] += 1
            info = re.fullmatch(r"/api/models/(.+?)/revision/([^/]+)", path)
            if info:
                repo = state.resolve(info[1], info[2])
                if repo is None:
                    return self._not_found(send_body)
                body = json.dumps(
                    {"id": info[1], "sha": repo.commit, "siblings": [{"rfilename": name} for name in repo.files]}
                ).encode()
                return self._reply(200, body, {"Content-Type": "application/json"}, send_body)
            resolve = re.fullmatch(r"/(.+?)/resolve/([^/]+)/(.+)", path)
            if resolve:
                repo = state.resolve(resolve[1], resolve[2])
                if repo is None or resolve[3] not in repo.files:
                    return self._not_found(send_body)
                data = repo.files[resolve[3]]
                headers = {
                    "X-Repo-Commit": repo.commit,
                    "ETag": f'"{hashlib.sha1(data).hexdigest()}"',
                    "Content-Type": "application/octet-stream",
                }
                return self._reply(200, data, headers, send_body)
            return self._not_found(send_body)

        def do_GET(self) -> None:
            self._route(send_body=True)

        def do_HEAD(self) -> None:
            self._route(send_body=False)

    return Handler


class HubServer:
    def __init__(self, repos: dict[str, Repo] | None = None, any_repo: bool = False) -> None:
        self.state = HubState(dict(repos or {}), any_repo)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self.state.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> HubState:
        self._thread.start()
        return self.state

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
