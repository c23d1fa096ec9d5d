"""The one-line form of a score signature, for tables (importable without the metric libraries)."""

from __future__ import annotations

from typing import Any


def signature_string(sig: dict[str, Any]) -> str:
    """A one-line form of the signature for tables: tok|bleu|smooth|rouge|empty|embedder (empty: whether empty
    answers score 0 or are skipped)."""
    emb = sig["embedder"]
    return (
        f"tok:{sig['tokenizer']}|bleu:{sig['bleu'].split()[0]}|smooth:{sig['smoothing']}"
        f"|rouge:{'-'.join(sig['rouge'].split())}|empty:{sig['empty_answers']}"
        f"|emb:{emb['name']}@{emb['revision']}"
    )
