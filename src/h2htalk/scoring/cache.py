"""On-disk embedding cache: one SQLite file per embedder key, rows keyed by the SHA-256 of the text.

Reference texts are embedded once per embedder and reused by every model scored after.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from h2htalk.scoring.embedders import Embedder
from h2htalk.store import SqliteStore


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_file(folder: str | os.PathLike[str], embedder_key: str) -> Path:
    """The SQLite file that holds the vectors of one embedder in ``folder``."""
    return Path(folder) / f"{embedder_key}.sqlite"


class EmbeddingCache:
    """Vectors of one embedder (name, revision and settings: ``embedder_key``), keyed by text hash."""

    def __init__(self, folder: str | os.PathLike[str], embedder_key: str) -> None:
        self._store = SqliteStore(
            cache_file(folder, embedder_key),
            holds=f"the vectors of embedder {embedder_key}",
            redo="embeds again every text a scoring job needs",
        )
        self.path = self._store.path

    def get_many(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        return {key: np.frombuffer(blob, dtype=np.float32) for key, blob in self._store.get_many(keys).items()}

    def put_many(self, items: Iterable[tuple[str, np.ndarray]]) -> None:
        self._store.put_many((key, np.asarray(vector, dtype=np.float32).tobytes()) for key, vector in items)

    def __len__(self) -> int:
        return len(self._store)

    def close(self) -> None:
        self._store.close()


def embed_with_cache(
    texts: list[str],
    embedder: Embedder,
    cache: EmbeddingCache | None,
    commit_every: int = 256,
) -> tuple[dict[str, np.ndarray], int]:
    """Vectors for the distinct ``texts`` (keyed by text), embedding only those not cached.

    Returns the vectors and how many texts were embedded now. New vectors are stored batch by batch,
    so an interruption loses at most one batch.
    """
    unique = list(dict.fromkeys(texts))
    keys = {text: text_key(text) for text in unique}
    cached = cache.get_many(keys.values()) if cache is not None else {}
    vectors = {text: cached[keys[text]] for text in unique if keys[text] in cached}
    # by length, so that each batch holds texts of similar length and padded encoders waste little
    missing = sorted((text for text in unique if text not in vectors), key=len)
    for start in range(0, len(missing), commit_every):
        batch = missing[start : start + commit_every]
        embedded = embedder.embed(batch)
        if cache is not None:
            cache.put_many((keys[text], vector) for text, vector in zip(batch, embedded, strict=True))
        vectors.update(zip(batch, embedded, strict=True))
    return vectors, len(missing)
