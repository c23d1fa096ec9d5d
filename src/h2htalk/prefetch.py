"""The records of the Hugging Face weights and embedders fetched before any compute job (on the submit host, by
``h2htalk.data.weights``), which pin the jobs to what was fetched.

Compute nodes of most clusters cannot reach the internet, and a download inside 33 concurrent GPU jobs is
33 downloads. The ``prefetch_*`` rules run on the submit host: each snapshot is fetched into the Hugging Face
cache (``HF_HOME``, which the nodes must share) at the registry's ``revision`` (the default branch when it
is null), and a record names the commit it resolved to. Jobs of a model or embedder with a record run with
``HF_HUB_OFFLINE=1`` and ask for exactly that commit, which also goes into their request keys and provenance.
The fetch and its stages are in ``h2htalk.data.weights``; this module reads the records, below every module that
starts an engine or reads the configuration.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from h2htalk.io import read_json

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def is_hub_id(name: str | None) -> bool:
    """``org/name`` and not a folder here: something to download."""
    return bool(name) and name.count("/") == 1 and not name.startswith((".", "/", "~")) and not Path(name).exists()


def embedder_downloads(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """What an embedder definition needs from the hub: BGE-M3's weights, unless ``model`` is a local folder."""
    if settings.get("kind") != "bge-m3" or not is_hub_id(settings.get("model")):
        return []
    return [{"role": "weights", "repo": settings["model"], "revision": settings.get("revision")}]


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
