"""The weights a run needs from the Hugging Face hub, fetched before any compute job: each model's (and its LoRA
adapter's) and each embedder's snapshot into the Hugging Face cache, and a record of the commit it resolved to
(``h2htalk.prefetch`` reads the records and pins the jobs to them)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from h2htalk.config import embedder_settings
from h2htalk.errors import H2HTalkError
from h2htalk.io import write_json_atomic
from h2htalk.prefetch import embedder_downloads
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import REGISTRY, models_in_use
from h2htalk.stages.spec import Done, Models, One, Over


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


def prefetch(kind: str, name: str, downloads: list[dict[str, Any]], out: str | os.PathLike[str]) -> Done:
    """Fetch every download of one model or embedder and write its record."""
    record = {"kind": kind, "name": name, "downloads": [{**d, **snapshot(d["repo"], d["revision"])} for d in downloads]}
    write_json_atomic(out, record)
    fetched = ", ".join(f"{d['repo']}@{d['revision'][:12]} ({d['bytes']} bytes)" for d in record["downloads"])
    return Done(fetched or "nothing to fetch", subject=name, out=str(out))


@stage(
    "prefetch_model", "fetch a model's Hugging Face weights (and LoRA adapter) and record the commit",
    reads=REGISTRY, jobs=Over(model=models_in_use), entries=lambda s, w: [w["model"]],
    outputs={"record": One("prefetched_model")}, memory_mb=2000, minutes=720,  # a 72B model is about 150 GB
)  # fmt: skip
def prefetch_model(model: str, record: str, models: Models) -> Done:
    """The weights (and LoRA adapter) of registry entry ``model``, as its engine downloads them."""
    from h2htalk.llm.engines import engine_of

    spec = models.entry(model, pinned=False)
    return prefetch("models", model, engine_of(spec).downloads(spec), record)


@stage(
    "prefetch_embedder", "fetch an embedder's Hugging Face weights and record the commit",
    reads=("embedders",), jobs=Over(embedder=lambda run: run.embedders),
    outputs={"record": One("prefetched_embedder")}, memory_mb=2000, minutes=60,
)  # fmt: skip
def prefetch_embedder(embedder: str, record: str, config: dict[str, Any]) -> Done:
    """The weights of the embedder ``embedder`` defines under ``embedders`` (none where its model is a folder)."""
    return prefetch("embedders", embedder, embedder_downloads(embedder_settings(config, embedder)), record)
