"""Fetch the 11 upstream reference files from a pinned commit (or a local folder) and record a manifest."""

from __future__ import annotations

import http.client
import logging
import os
import random
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from h2htalk.data.release import check_line_count, parse_release
from h2htalk.errors import DataError
from h2htalk.io import sha256_bytes, write_bytes_atomic, write_json_atomic
from h2htalk.settings import UpstreamSource
from h2htalk.stages.declare import stage
from h2htalk.stages.spec import Done, One, Paths
from h2htalk.subtasks import SUBTASK_KEYS, SUBTASKS, Subtask, get_subtask

log = logging.getLogger(__name__)

MANIFEST_VERSION = 1


class _Transient(Exception):
    """A fault worth retrying (server error, dropped connection, truncated body)."""


def _download_once(url: str, timeout_s: float) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "h2htalk-fetch"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            expected = response.headers.get("Content-Length")
            body = response.read()
    except urllib.error.HTTPError as exc:
        if exc.code >= 500 or exc.code in (408, 429):
            raise _Transient(f"HTTP {exc.code} {exc.reason}") from None
        raise DataError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except http.client.IncompleteRead as exc:
        raise _Transient(
            f"truncated download: received {len(exc.partial)} bytes, "
            f"{exc.expected if exc.expected is not None else 'more'} still expected"
        ) from None
    except (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException) as exc:
        raise _Transient(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}") from None
    if expected is not None and expected.isdigit() and int(expected) != len(body):
        raise _Transient(f"truncated download: received {len(body)} of {expected} bytes")
    return body


def download(url: str, *, timeout_s: float, retries: int, backoff_s: float) -> bytes:
    """GET ``url`` with bounded retries and exponential backoff (with jitter) on transient faults."""
    attempt = 0
    while True:
        try:
            return _download_once(url, timeout_s)
        except _Transient as exc:
            if attempt >= retries:
                raise DataError(f"{url}: {exc} (gave up after {attempt + 1} attempts)") from None
            delay = backoff_s * (2**attempt) * (0.5 + random.random())
            log.warning("%s: %s; retrying in %.1f s", url, exc, delay)
            time.sleep(delay)
            attempt += 1


def _read_source(subtask: Subtask, source: UpstreamSource, upstream_dir: Path | None) -> tuple[bytes, str]:
    if upstream_dir is not None:
        path = upstream_dir / subtask.upstream_file
        try:
            return path.read_bytes(), str(path)
        except FileNotFoundError:
            raise DataError(f"{subtask.upstream_file}: not found in upstream_dir {upstream_dir}") from None
    url = source.url_for(subtask.upstream_file)
    return download(url, timeout_s=source.timeout_s, retries=source.retries, backoff_s=source.backoff_s), url


def fetch_release(
    out_dir: str | os.PathLike[str],
    manifest_path: str | os.PathLike[str],
    source: UpstreamSource,
    upstream_dir: str | os.PathLike[str] | None = None,
    subtasks: tuple[Subtask, ...] = SUBTASKS,
) -> dict[str, Any]:
    """Fetch, check and store every upstream file, then write the manifest.

    All files are fetched and checked before any is written; the manifest is written last and only
    when every file passed, so it marks a complete fetch. Every failing file is reported at once.
    """
    out = Path(out_dir)
    manifest_file = Path(manifest_path)
    manifest_file.unlink(missing_ok=True)  # a stale manifest must not vouch for this run's files
    local = Path(upstream_dir) if upstream_dir else None
    if local is not None and not local.is_dir():
        raise DataError(f"upstream_dir {local} is not a folder")

    fetched: list[tuple[Subtask, bytes, str, int]] = []
    problems: list[str] = []
    for subtask in subtasks:
        try:
            data, origin = _read_source(subtask, source, local)
            lines = parse_release(data, subtask.upstream_file)
            check_line_count(lines, subtask.upstream_file, subtask.released)
        except DataError as exc:
            problems.append(str(exc))
            continue
        fetched.append((subtask, data, origin, len(lines)))
    if problems:
        raise DataError("upstream release check failed:\n" + "\n".join(f"  - {p}" for p in problems))

    files = []
    for subtask, data, origin, n_lines in fetched:
        write_bytes_atomic(out / subtask.upstream_file, data)
        files.append(
            {
                "subtask": subtask.key,
                "file": subtask.upstream_file,
                "source": origin,
                "size": len(data),
                "sha256": sha256_bytes(data),
                "lines": n_lines,
            }
        )
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "repo": source.repo,
        "commit": source.commit,
        "origin": "upstream_dir" if local is not None else "download",
        "url_template": source.url_template,
        "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": files,
    }
    write_json_atomic(manifest_file, manifest)
    log.info("fetched %d files (%d lines) into %s", len(files), sum(f["lines"] for f in files), out)
    return manifest


def _upstream_files(scope, labels):
    """The 11 files of the pinned upstream release, `results/data/upstream/{file}`."""
    return [scope.results.path("upstream", file=get_subtask(key).upstream_file) for key in SUBTASK_KEYS]


@stage(
    "fetch", "download (or copy) and check the 11 upstream reference files",
    reads=("data", "upstream_dir"), minutes=15, options=("upstream",),
    outputs={"manifest": One("manifest"), "files": Paths(_upstream_files)},
)  # fmt: skip
def fetch(manifest: str, files: list[str], source: UpstreamSource, config: dict[str, Any]) -> Done:
    """The release into the folder of ``files``, from the configured source or ``upstream_dir``."""
    fetched = fetch_release(Path(files[0]).parent, manifest, source, config["upstream_dir"])
    lines = sum(f["lines"] for f in fetched["files"])
    return Done(f"{len(fetched['files'])} files, {lines} lines", out=manifest)
