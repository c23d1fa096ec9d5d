"""Outputs of your own in the upstream layout, scored without the workflow (``h2htalk score-upstream``): what is
scored, with which embedder and signature, each subtask's S, and the closing line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from h2htalk.commands import command
from h2htalk.config import embedder_settings
from h2htalk.progress import summary
from h2htalk.scoring.signatures import signature_string
from h2htalk.settings import CurateOptions
from h2htalk.subtasks import SUBTASK_KEYS, SUBTASKS


@command(
    "score-upstream", reads=("scoring", "embedders", "data.curate"), options=("scoring",),
    choices={"subtasks": SUBTASK_KEYS}, metavar={"subtasks": "SUBTASK"},
)  # fmt: skip
def score_outputs(
    config: dict[str, Any],
    outputs_dir: Path,
    /,
    *,
    subtasks: Sequence[str] = (),
    references: Path,
    embedder: str | None = None,
    out: Path,
    items: Path | None = None,
    no_cache: bool = False,
) -> None:
    """Score outputs in the upstream layout, matched by line order, against the references curation keeps.

    The outputs in ``outputs_dir`` (only ``subtasks``, where named) are scored against the references in
    ``references``, saying on the terminal what is scored and how; one CSV row per subtask in ``out`` (and per-item
    scores in ``items``). The embedding cache is neither read nor written with ``no_cache`` (``--no-cache`` of the
    scoring options).

    outputs_dir: folder with one {"response": ...} JSONL per upstream file name; the subtasks whose file is there
        are scored
    subtasks: score only these subtasks (their files must be there)
    references: folder with the 11 upstream reference files
    embedder: an embedder defined under `embedders` (default: the first of scoring.embedders)
    out: CSV, one row per subtask
    items: also write per-item scores to this JSONL
    """
    from h2htalk.scoring.score_files import ScoringSetup, item_mean_s, score_upstream, upstream_outputs

    name = embedder or config["scoring"]["embedders"][0]
    setup = ScoringSetup.from_config(config, name, embedder_settings(config, name), cache=not no_cache)
    setup.embedder.check()  # before anything is read: an embedder that cannot load fails in a second
    scored = upstream_outputs(outputs_dir, subtasks)
    absent = [s for s in SUBTASKS if s not in scored]
    print(f"scoring {len(scored)} of {len(SUBTASKS)} subtasks" + (
        f"; not scored: {', '.join(f'{s.key} ({s.upstream_file})' for s in absent)}" if absent else ""))  # fmt: skip
    print(ss_line(setup.embedder.describe()))
    print(f"signature: {signature_string(setup.signature())}")
    cache_file = setup.cache_file()
    print(f"embedding cache: {cache_file.resolve() if cache_file else 'none (--no-cache)'}")
    curation = CurateOptions.from_config(config)
    rows = score_upstream(outputs_dir, references, out, setup, curation, subtasks=scored, out_items=items)
    for row in rows:
        print(f"{row['subtask']:<28} n={row['n']:>5} of {row['released']:>5} released  S={row['S']:6.2f}")
    mean = item_mean_s(rows)
    facts = f"{len(rows)} subtasks, {sum(row['n'] for row in rows)} items; " + (
        f"mean S {mean:.1f}" if mean is not None else "no item scored")  # fmt: skip
    summary(facts, subject=f"with {setup.embedder.name}", out=out)


def ss_line(embedder: dict[str, Any]) -> str:
    """Which embedder this run's SS uses, beside the paper's (BGE-M3)."""
    used = f"SS embedder: {embedder['name']} ({embedder['revision']})"
    if embedder["kind"] == "bge-m3":
        return f"{used}: BGE-M3, as the paper's SS"
    return f"{used}; the paper's SS uses BGE-M3 (--embedder bge-m3): this SS, and S, differ from the paper's"
