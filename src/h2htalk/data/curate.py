"""Turn one upstream file into a curated, flagged, anonymised JSONL of references for one subtask.

Nothing is deleted: every released line becomes one record with a stable id (subtask + upstream line
number), its flags, and ``kept`` (no flag from the configured exclusion list). Text is NFC-normalised
and trimmed of surrounding whitespace; identifiers are replaced or flagged per configuration; it is
otherwise unchanged.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

from h2htalk.data.anonymise import PII_TYPES, NameFinder, anonymise, jieba_name_finder
from h2htalk.data.release import check_line_count, parse_release
from h2htalk.data.screen import QUALITY_FLAGS, load_quality_rules, load_safety_lexicon
from h2htalk.errors import DataError
from h2htalk.io import read_json, sha256_bytes, write_json_atomic, write_jsonl_atomic
from h2htalk.settings import CurateOptions
from h2htalk.stages.declare import stage
from h2htalk.stages.spec import Done, One, Over, Paths
from h2htalk.subtasks import Subtask, get_subtask

FLAGS: tuple[str, ...] = ("empty", *QUALITY_FLAGS, "duplicate", "sensitive", "pii")


def normalise(text: str) -> str:
    return unicodedata.normalize("NFC", text).strip()


def record_id(subtask_key: str, line: int) -> str:
    return f"{subtask_key}-{line:05d}"


def curate_lines(
    subtask: Subtask,
    data: bytes,
    options: CurateOptions,
    source: dict[str, Any],
    name_finder: NameFinder | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Curate one upstream file's bytes; return the records and the subtask's report."""
    lines = parse_release(data, subtask.upstream_file)
    check_line_count(lines, subtask.upstream_file, subtask.released)
    rules = load_quality_rules()
    lexicon = load_safety_lexicon()
    if name_finder is None and options.anonymise.get("person_name", "ignore") != "ignore":
        name_finder = jieba_name_finder(options.persona_names)

    first_seen: dict[str, str] = {}
    records: list[dict[str, Any]] = []
    pii_totals: Counter[str] = Counter()
    sensitive_totals: Counter[str] = Counter()
    for line in lines:
        rid = record_id(subtask.key, line.number)
        text = normalise(line.response)
        flags: list[str] = []
        if not text:
            flags.append("empty")
        flags.extend(rules.flags(text))
        duplicate_of = first_seen.get(text) if text else None
        if duplicate_of is not None:
            flags.append("duplicate")
        elif text:
            first_seen[text] = rid
        categories = lexicon.categories(text)
        if categories:
            flags.append("sensitive")
            sensitive_totals.update(categories)
        cleaned = anonymise(text, options.anonymise, name_finder)
        if cleaned.counts:
            flags.append("pii")
            pii_totals.update(cleaned.counts)
        records.append(
            {
                "id": rid,
                "subtask": subtask.key,
                "text": cleaned.text,
                "kept": not any(f in options.exclude_flags for f in flags),
                "flags": flags,
                "duplicate_of": duplicate_of,
                "pii": dict(cleaned.counts),
                "sensitive": categories,
                "source": {**source, "line": line.number},
            }
        )

    flag_counts = {flag: sum(flag in r["flags"] for r in records) for flag in FLAGS}
    report = {
        "subtask": subtask.key,
        "paper_name": subtask.paper_name,
        "upstream_file": subtask.upstream_file,
        "released": len(records),
        "kept": sum(r["kept"] for r in records),
        "flags": flag_counts,
        "pii": {kind: pii_totals.get(kind, 0) for kind in PII_TYPES},
        "sensitive": {cat: sensitive_totals.get(cat, 0) for cat in lexicon.terms},
        "flagged_ids": {flag: [r["id"] for r in records if flag in r["flags"]] for flag in FLAGS},
        "options": options.as_dict(),
        "source": source,
    }
    return records, report


def manifest_entry(manifest: dict[str, Any], subtask: Subtask) -> dict[str, Any]:
    for entry in manifest.get("files", []):
        if entry.get("subtask") == subtask.key:
            return entry
    raise DataError(f"manifest has no entry for subtask {subtask.key} ({subtask.upstream_file})")


def _upstream_file(scope, labels):
    """The subtask's upstream file, `results/data/upstream/{file}`."""
    return [scope.results.path("upstream", file=get_subtask(labels["subtask"]).upstream_file)]


@stage(
    "curate", "curate one fetched upstream file into flagged JSONL",
    uses=("curation",), reads=("data",), jobs=Over(subtask=lambda run: run.subtasks), minutes=10, memory_mb=1000,
    inputs={"manifest": One("manifest"), "upstream": Paths(_upstream_file)},
    outputs={"curated": One("curated"), "report": One("curation")},
)  # fmt: skip
def curate_subtask(
    subtask: str, upstream: list[str], manifest: str, curated: str, report: str, curation: CurateOptions
) -> Done:
    """Curate a subtask's fetched upstream file (``upstream``, its one path), checking it against the fetch manifest
    first: its records into ``curated``, its report into ``report``."""
    (path,) = map(Path, upstream)
    found, fetched = get_subtask(subtask), read_json(manifest)
    entry = manifest_entry(fetched, found)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found (run the fetch stage first)") from None
    digest = sha256_bytes(data)
    if digest != entry["sha256"]:
        raise DataError(f"{path}: SHA-256 {digest} differs from the manifest's {entry['sha256']}; fetch again")
    source = {"file": found.upstream_file, "commit": fetched["commit"], "sha256": digest}
    records, counts = curate_lines(found, data, curation, source)
    write_jsonl_atomic(curated, records)
    write_json_atomic(report, counts)
    flagged = ", ".join(f"{f}={n}" for f, n in counts["flags"].items() if n)
    kept = f"{counts['released']} released, {counts['kept']} kept" + (f" ({flagged})" if flagged else "")
    return Done(kept, subject=subtask)
