"""Score files: generation records against references (the workflow), and upstream-format outputs."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h2htalk.data.conversations import bootstrap_groups
from h2htalk.data.curate import curate_lines, normalise
from h2htalk.data.release import parse_release
from h2htalk.errors import DataError
from h2htalk.io import iter_jsonl, write_json_atomic, write_jsonl_atomic, write_text_atomic
from h2htalk.scoring.cache import EmbeddingCache, cache_file
from h2htalk.scoring.embedders import Embedder, make_embedder
from h2htalk.scoring.metrics import COLUMNS, SKIPPED, Pair, cell_value, score_pairs, signature, summarise
from h2htalk.scoring.signatures import signature_string
from h2htalk.scoring.tokenizers import Tokenizer, get_tokenizer
from h2htalk.settings import BootstrapSettings, CurateOptions
from h2htalk.subtasks import SUBTASKS, Subtask, get_subtask


@dataclass(frozen=True)
class ScoringSetup:
    """Everything scoring needs besides the texts: tokens, the embedder, its cache, the bootstrap, the ROUGE
    measure and what an empty answer scores."""

    tokenizer: Tokenizer
    embedder: Embedder
    cache_dir: str | os.PathLike[str] | None
    bootstrap: BootstrapSettings
    rouge_measure: str
    empty_answers: str

    @classmethod
    def from_config(
        cls, config: dict[str, Any], name: str, embedder: dict[str, Any], *, cache: bool = True
    ) -> ScoringSetup:
        """The configured tokenizer, bootstrap and cache, and the embedder ``name`` defined by ``embedder``."""
        scoring = config["scoring"]
        return cls(
            tokenizer=get_tokenizer(scoring["tokenizer"], scoring["whitespace_tokens"]),
            embedder=make_embedder(name, embedder),
            cache_dir=scoring["cache_dir"] if cache else None,
            bootstrap=BootstrapSettings.from_config(config),
            rouge_measure=scoring["rouge_measure"],
            empty_answers=scoring["empty_answers"],
        )

    def cache(self) -> EmbeddingCache | None:
        return EmbeddingCache(self.cache_dir, self.embedder.key) if self.cache_dir else None

    def cache_file(self) -> Path | None:
        """Where the embedder's vectors are cached (None: no cache)."""
        return cache_file(self.cache_dir, self.embedder.key) if self.cache_dir else None

    def score(self, pairs: list[Pair]) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """Score ``pairs`` through the embedding cache (closed again afterwards)."""
        cache = self.cache()
        try:
            return score_pairs(pairs, self.tokenizer, self.embedder, cache, self.rouge_measure, self.empty_answers)
        finally:
            if cache is not None:
                cache.close()

    def signature(self) -> dict[str, Any]:
        return signature(self.tokenizer, self.embedder, self.rouge_measure, self.empty_answers)


def read_references(path: str | os.PathLike[str]) -> dict[str, str]:
    """``id -> reference`` from instance records (``reference``) or curated records (``text``)."""
    references: dict[str, str] = {}
    for number, record in iter_jsonl(path):
        text = record.get("reference", record.get("text"))
        if not isinstance(record.get("id"), str) or not isinstance(text, str):
            raise DataError(f"{path}: line {number}: needs a string 'id' and a string 'reference' (or 'text')")
        if record["id"] in references:
            raise DataError(f"{path}: line {number}: duplicate id {record['id']!r}")
        references[record["id"]] = text
    return references


def read_generation_records(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """``id -> record`` from generation records ``{id, response, ...}``."""
    records: dict[str, dict[str, Any]] = {}
    for number, record in iter_jsonl(path):
        if not isinstance(record.get("id"), str) or not isinstance(record.get("response"), str):
            raise DataError(f"{path}: line {number}: needs a string 'id' and a string 'response'")
        records[record["id"]] = record
    return records


ANSWER_FLAGS = ("cut_off", "failed")
NO_ANSWER_FLAG = "no_answer"  # a baseline had no answer to give (a one-item set's random reference): not scored


def answer_flags(record: dict[str, Any]) -> list[str]:
    """``cut_off``: the answer stopped at its token limit; ``failed``: no answer came (a refusal, an over-long
    prompt), so it is scored as empty."""
    return (["cut_off"] if record.get("finish_reason") == "length" else []) + (
        ["failed"] if record.get("failure") else []
    )


def match_pairs(references: dict[str, str], responses: dict[str, str], where: str) -> list[Pair]:
    missing = [rid for rid in references if rid not in responses]
    extra = [rid for rid in responses if rid not in references]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"{len(missing)} references have no response (e.g. {', '.join(missing[:5])})")
        if extra:
            parts.append(f"{len(extra)} responses match no reference (e.g. {', '.join(extra[:5])})")
        raise DataError(f"{where}: {'; '.join(parts)}")
    return [Pair(rid, normalise(ref), normalise(responses[rid])) for rid, ref in references.items()]


def score_generation_file(
    generations: str | os.PathLike[str],
    references: str | os.PathLike[str],
    out_items: str | os.PathLike[str],
    out_summary: str | os.PathLike[str],
    setup: ScoringSetup,
    labels: dict[str, Any],
) -> dict[str, Any]:
    """Score one cell's answers; write per-item rows and the summary (with CI), each carrying the cell's
    ``labels`` (model, variant, subtask or study, embedder). Each item carries its ``cluster`` (the items that
    share a conversation, found in the references: ``h2htalk.data.conversations``), and where some share one,
    the CI resamples whole clusters. An answer a baseline could not give (``no_answer``) is missing, not 0, and
    the summary's ``notes`` say why."""
    records = read_generation_records(generations)
    texts = read_references(references)
    pairs = match_pairs(texts, {k: r["response"] for k, r in records.items()}, str(generations))
    groups = bootstrap_groups(list(texts), list(texts.values()))
    cluster_of = dict(zip(texts, groups or texts, strict=True))
    items, work = setup.score(pairs)
    for item in items:
        item["flags"] += answer_flags(records[item["id"]])
        item["cluster"] = cluster_of[item["id"]]
        if "no_answer" in records[item["id"]]:  # a baseline with nothing to give: missing, not 0
            item.update(dict.fromkeys(COLUMNS), flags=[NO_ANSWER_FLAG])
    sig = setup.signature()
    write_jsonl_atomic(out_items, ({**item, **labels, "signature": sig} for item in items))
    scores = summarise(items, setup.bootstrap, [item["cluster"] for item in items] if groups else None)
    value = (scores["S"], scores["S_ci_low"], scores["S_ci_high"]) if scores["n"] else (None, None, None)
    summary = {
        **labels,
        "measure": "S",
        **cell_value(*value),
        **scores,
        "answers": {flag: sum(flag in item["flags"] for item in items) for flag in ANSWER_FLAGS},
        "notes": sorted({r["no_answer"] for r in records.values() if "no_answer" in r}),
        "work": work,
        "inputs": {"generations": str(generations), "references": str(references)},
        "signature": sig,
    }
    write_json_atomic(out_summary, summary)
    return summary


def _read_upstream_file(folder: Path, subtask: Subtask, role: str) -> bytes:
    path = folder / subtask.upstream_file
    if not path.is_file():
        raise DataError(f"{role} file missing: {path} (subtask {subtask.key})")
    return path.read_bytes()


def upstream_outputs(outputs_dir: str | os.PathLike[str], named: Iterable[str] = ()) -> list[Subtask]:
    """The subtasks to score in ``outputs_dir``: those ``named`` (subtask keys), or else every subtask whose
    upstream file is there."""
    folder = Path(outputs_dir)
    if not folder.is_dir():
        raise DataError(f"outputs folder {folder} does not exist")
    if named:
        return [get_subtask(key) for key in named]
    present = [subtask for subtask in SUBTASKS if (folder / subtask.upstream_file).is_file()]
    if not present:
        expected = ", ".join(sorted(s.upstream_file for s in SUBTASKS))
        raise DataError(f"{folder} holds no output file of any subtask (upstream file names: {expected})")
    return present


def score_upstream(
    outputs_dir: str | os.PathLike[str],
    references_dir: str | os.PathLike[str],
    out_csv: str | os.PathLike[str],
    setup: ScoringSetup,
    curation: CurateOptions,
    subtasks: Iterable[Subtask] = SUBTASKS,
    out_items: str | os.PathLike[str] | None = None,
) -> list[dict[str, Any]]:
    """Score outputs in the upstream layout (one file per upstream name, matched to the released references by
    line order) against the references Table 1 keeps: each reference file is curated with ``curation``
    (data.curate), and the lines it flags out (a meta refusal, an empty line ...) are not scored."""
    outputs, refs = Path(outputs_dir), Path(references_dir)
    subtasks = list(subtasks)
    # check every file before scoring any, so a bad layout fails in seconds, not after an hour
    loaded: list[tuple[Subtask, list[dict[str, Any]], list[str]]] = []
    problems: list[str] = []
    for subtask in subtasks:
        try:
            answers = parse_release(
                _read_upstream_file(outputs, subtask, "output"), str(outputs / subtask.upstream_file)
            )
            hyps = [normalise(line.response) for line in answers]
            data = _read_upstream_file(refs, subtask, "reference")
            curated, _ = curate_lines(subtask, data, curation, {"file": subtask.upstream_file})
        except DataError as exc:
            problems.append(str(exc))
            continue
        if len(hyps) != len(curated):
            problems.append(
                f"{outputs / subtask.upstream_file}: {len(hyps)} lines, but its reference file "
                f"{refs / subtask.upstream_file} has {len(curated)}"
            )
            continue
        loaded.append((subtask, curated, hyps))
    if problems:
        raise DataError("cannot score these outputs:\n" + "\n".join(f"  - {p}" for p in problems))

    pairs_by_subtask = [
        (subtask, curated, [Pair(r["id"], r["text"], hyp) for r, hyp in zip(curated, hyps, strict=True) if r["kept"]])
        for subtask, curated, hyps in loaded
    ]
    # one pass over every subtask: texts shared across subtasks are embedded once
    items, _ = setup.score([pair for _, _, pairs in pairs_by_subtask for pair in pairs])
    sig = setup.signature()
    rows, start = [], 0
    for subtask, curated, pairs in pairs_by_subtask:
        chunk = items[start : start + len(pairs)]
        start += len(pairs)
        groups = bootstrap_groups([p.id for p in pairs], [p.reference for p in pairs])
        summary = summarise(chunk, setup.bootstrap, groups)
        rows.append(
            {
                "subtask": subtask.key,
                "n": summary["n"],
                **{c: summary[c] for c in COLUMNS},
                "S_ci_low": summary["S_ci_low"],
                "S_ci_high": summary["S_ci_high"],
                "empty_responses": summary["flagged"]["empty_response"],
                "released": len(curated),
                "kept": len(pairs),
                "skipped": summary["flagged"][SKIPPED],
                "signature": sig,
            }
        )
    write_text_atomic(out_csv, _upstream_csv(rows))
    if out_items is not None:
        write_jsonl_atomic(out_items, ({**item, "signature": sig} for item in items))
    return rows


def _upstream_csv(rows: list[dict[str, Any]]) -> str:
    columns = ["subtask", "n", *COLUMNS, "S_ci_low", "S_ci_high", "empty_responses", "released", "kept", "skipped"]
    columns.append("signature")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        out = {k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in row.items()}
        out["signature"] = signature_string(row["signature"])
        writer.writerow(out)
    return buffer.getvalue()


def item_mean_s(cells: list[dict[str, Any]]) -> float | None:
    """S over every scored item of ``cells`` (score summaries or rows: ``S`` and ``n``; cells weighted by items)."""
    scored = [cell for cell in cells if cell["n"]]
    return sum(c["S"] * c["n"] for c in scored) / sum(c["n"] for c in scored) if scored else None


def mean_s_by_variant(summaries: list[dict[str, Any]]) -> str:
    """``mean S 24.1 (nosap), 23.9 (sap)``: each variant's item mean."""
    variants = dict.fromkeys(cell["variant"] for cell in summaries)
    means = {v: item_mean_s([c for c in summaries if c["variant"] == v]) for v in variants}
    shown = [f"{mean:.1f} ({variant})" for variant, mean in means.items() if mean is not None]
    return "mean S " + ", ".join(shown) if shown else "no item scored"
