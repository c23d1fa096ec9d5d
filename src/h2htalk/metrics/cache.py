"""On-disk embedding cache: one SQLite file per embedder key, rows keyed by the SHA-256 of the text.

Reference texts are embedded once per embedder and reused by every model scored after. SQLite makes
concurrent writers (parallel scoring jobs) safe, and every insert is a committed transaction, so an
interrupted job keeps what it finished.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from h2htalk.metrics.embedders import Embedder


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    def __init__(self, folder: str | os.PathLike[str], embedder_key: str) -> None:
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        self.path = path / f"{embedder_key}.sqlite"
        self._db = sqlite3.connect(self.path, timeout=120)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (sha256 TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        self._db.commit()

    def get_many(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        keys = list(keys)
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):  # stay under SQLite's bound-parameter limit
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT sha256, vector FROM vectors WHERE sha256 IN ({marks})", chunk)
            for key, blob in rows:
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, items: Iterable[tuple[str, np.ndarray]]) -> None:
        rows = [(key, np.asarray(vector, dtype=np.float32).tobytes()) for key, vector in items]
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])

    def close(self) -> None:
        self._db.close()


def embed_with_cache(
    texts: list[str],
    embedder: Embedder,
    cache: EmbeddingCache | None,
    batch_size: int = 256,
) -> tuple[dict[str, np.ndarray], int]:
    """Vectors for the distinct ``texts`` (keyed by text), embedding only those not cached.

    Returns the vectors and how many texts were embedded now. New vectors are stored batch by batch,
    so an interruption loses at most one batch.
    """
    unique = list(dict.fromkeys(texts))
    keys = {text: text_key(text) for text in unique}
    cached = cache.get_many(keys.values()) if cache is not None else {}
    vectors = {text: cached[keys[text]] for text in unique if keys[text] in cached}
    missing = [text for text in unique if text not in vectors]
    for start in range(0, len(missing), batch_size):
        batch = missing[start : start + batch_size]
        embedded = embedder.embed(batch)
        if cache is not None:
            cache.put_many((keys[text], vector) for text, vector in zip(batch, embedded, strict=True))
        vectors.update(zip(batch, embedded, strict=True))
    return vectors, len(missing)
