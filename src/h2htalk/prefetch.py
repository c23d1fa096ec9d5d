"""Downloads before any compute job: Hugging Face weights and embedders, fetched on the submit host.

Compute nodes of most clusters cannot reach the internet, and a download inside 33 concurrent GPU jobs is
33 downloads. The ``prefetch_*`` rules run on the submit host: each snapshot is fetched into the Hugging Face
cache (``HF_HOME``, which the nodes must share) at the registry's ``revision`` (the default branch when it
is null), and a record names the commit it resolved to. Jobs of a model or embedder with a record run with
``HF_HUB_OFFLINE=1`` and ask for exactly that commit, which also goes into their request keys and provenance.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.io import read_json, write_json_atomic

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def is_hub_id(name: str | None) -> bool:
    """``org/name`` and not a folder here: something to download."""
    return bool(name) and name.count("/") == 1 and not name.startswith((".", "/", "~")) and not Path(name).exists()


def embedder_downloads(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """What an embedder definition needs from the hub: BGE-M3's weights, unless ``model`` is a local folder."""
    if settings.get("kind") != "bge-m3" or not is_hub_id(settings.get("model")):
        return []
    return [{"role": "weights", "repo": settings["model"], "revision": settings.get("revision")}]


def snapshot(repo: str, revision: str | None) -> dict[str, Any]:
    """Fetch one repository snapshot into the Hugging Face cache; what was fetched and the commit it is."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError
    except ImportError:
        raise H2HTalkError("prefetching needs the huggingface_hub package (pip install -e '.[bge]')") from None
    try:
        folder = Path(snapshot_download(repo, revision=revision))
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise H2HTalkError(f"cannot fetch {repo}@{revision or 'main'}: {first_line}") from None
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {
        "repo": repo,
        "requested_revision": revision,
        "revision": folder.name,  # the cache's snapshot folder is named by the commit
        "path": str(folder),
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
    }


def prefetch(kind: str, name: str, downloads: list[dict[str, Any]], out: str | os.PathLike[str]) -> dict[str, Any]:
    """Fetch every download of one model or embedder and write its record."""
    record = {"kind": kind, "name": name, "downloads": [{**d, **snapshot(d["repo"], d["revision"])} for d in downloads]}
    write_json_atomic(out, record)
    return record


def read_records(paths: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """Prefetch records by (kind, name); reading any switches this process (and the engines it starts) to
    offline mode."""
    records = {}
    for path in paths:
        record = read_json(path)
        records[(record["kind"], record["name"])] = record
    if records:
        os.environ.update(OFFLINE)
    return records


def _fetched(record: dict[str, Any], role: str) -> dict[str, Any] | None:
    return next((d for d in record["downloads"] if d["role"] == role), None)


def pinned_model(spec: dict[str, Any], record: dict[str, Any] | None) -> dict[str, Any]:
    """A registry entry at the commit its prefetch resolved (its LoRA adapter from the local snapshot)."""
    if record is None:
        return spec
    pinned = dict(spec)
    weights, lora = _fetched(record, "weights"), _fetched(record, "lora")
    if weights:
        pinned["revision"] = weights["revision"]
    if lora:
        pinned["lora"] = {**spec["lora"], "path": lora["path"]}
    return pinned


def pinned_embedder(settings: dict[str, Any], record: dict[str, Any] | None) -> dict[str, Any]:
    """An embedder definition at the commit its prefetch resolved."""
    weights = _fetched(record, "weights") if record else None
    return {**settings, "revision": weights["revision"]} if weights else settings
