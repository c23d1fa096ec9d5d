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
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

from .protocol import Reply
from .server import ServedOnLoopback


@dataclass
class Repo:
    files: dict[str, bytes]
    commit: str = ""

    def __post_init__(self) -> None:
        if not self.commit:
            digest = hashlib.sha1(json.dumps(sorted((k, v.hex()) for k, v in self.files.items())).encode())
            self.commit = digest.hexdigest()


NOT_FOUND = Reply(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})


@dataclass
class HubServer(ServedOnLoopback):
    """``with HubServer(repos) as hub:`` serves them at ``hub.base_url``."""

    repos: dict[str, Repo] = field(default_factory=dict)
    any_repo: bool = False
    base_url: str = ""
    requests: Counter[str] = field(default_factory=Counter)  # "METHOD path" -> count

    def resolve(self, repo: str, revision: str) -> Repo | None:
        if repo not in self.repos and self.any_repo:
            self.repos[repo] = Repo({"config.json": json.dumps({"_name_or_path": repo}).encode()})
        found = self.repos.get(repo)
        return found if found and revision in ("main", found.commit) else None

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        path = unquote(path)
        self.requests[f"{method} {path}"] += 1
        info = re.fullmatch(r"/api/models/(.+?)/revision/([^/]+)", path)
        if info:
            repo = self.resolve(info[1], info[2])
            if repo is None:
                return NOT_FOUND
            return Reply(200, {"id": info[1], "sha": repo.commit, "siblings": [{"rfilename": n} for n in repo.files]})
        resolve = re.fullmatch(r"/(.+?)/resolve/([^/]+)/(.+)", path)
        if resolve:
            repo = self.resolve(resolve[1], resolve[2])
            if repo is None or resolve[3] not in repo.files:
                return NOT_FOUND
            data = repo.files[resolve[3]]
            headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{hashlib.sha1(data).hexdigest()}"'}
            return Reply(200, data, headers, content_type="application/octet-stream")
        return NOT_FOUND
