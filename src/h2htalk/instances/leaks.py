"""Does an instance's input give its reference away? How much of the reference its input fields already hold.

A generator that writes an input from its reference can copy the reference into it (the companion's last turn
saying the answer word for word, a schedule line that is the answer); a model that echoes its input then scores
like the oracle. Every measure is a share of the reference's characters, after normalising both texts (folded
as the judges' fences fold them, ``text_match.fold``: NFKC, which reads full-width letters and digits as ASCII,
with every invisible character and combining mark removed; traditional characters folded to simplified by
OpenCC's t2s; only letters and digits kept, so spacing, punctuation, brackets and invisible characters cannot
hide a copy).

Per input field:

- ``substring``: the longest common substring with the reference, over the reference's length;
- ``ngram``: character n-gram containment, the share of the reference's distinct n-grams found in the field
  (a reference shorter than n is one gram: contained or not). It also catches a copy with small edits.

Over the whole instance, every text of every field together (a reference cut into pieces and spread over
several fields, or over several turns, holds less than half of itself in any one of them):

- ``ngram``: the share of the reference's distinct n-grams found in any text;
- ``pieces``: the share of the reference's characters that lie in a common substring of at least n characters
  with some text: the reference pieced together from what the texts hold, across field and turn boundaries
  (never below the instance's ``ngram``, and equal to ``substring`` for one whole copy).

A reference is read twice: all of it, and what is said in it without its bracketed actions, since an input
can give the answer away by having the companion say it without the gesture (``（放下设计图纸）"要不要来杯
咖啡？我陪你坐会儿。"`` against a last companion turn ``要不要来杯咖啡？我陪你坐会儿。``: half of the whole,
all of what is said). Each measure is the larger of the two readings'.

A field made of several texts (dialogue turns, list items) is read text by text, so no substring or n-gram
spans two turns. An instance's overlap is the largest of any field's measures and the instance's own: it is
flagged when either the largest single field or the instance as a whole crosses the threshold.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from h2htalk.settings import LeakSettings
from h2htalk.text_match import ngrams, normalise, said

DIALOGUE = "history_dialogues"  # the one field made of turns


def field_texts(value: Any) -> list[str]:
    """The texts of one field value: a string, a list of strings, or dialogue turns ``{speaker, text}``."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return field_texts(value.get("text", ""))
    if isinstance(value, list):
        return [text for item in value for text in field_texts(item)]
    return []


def longest_common_substring(a: str, b: str) -> int:
    """Length of the longest string that occurs in both ``a`` and ``b`` (binary search on the length: a common
    substring of length k has common substrings of every shorter length)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        pieces = {a[i : i + middle] for i in range(len(a) - middle + 1)}
        if any(b[i : i + middle] in pieces for i in range(len(b) - middle + 1)):
            low = middle
        else:
            high = middle - 1
    return low


@dataclass(frozen=True)
class FieldOverlap:
    substring: float  # longest common substring / reference length
    ngram: float  # share of the reference's distinct n-grams found in the field

    @property
    def overlap(self) -> float:
        return max(self.substring, self.ngram)

    def as_dict(self) -> dict[str, float]:
        return {"substring": round(self.substring, 4), "ngram": round(self.ngram, 4)}


def reference_readings(reference: str, n: int) -> list[str]:
    """The texts a copy of ``reference`` could be, normalised: all of it, and what is said in it without its
    bracketed actions (（放下咖啡杯）), when that is at least 2n characters (a shorter line is a common phrase)."""
    whole, spoken = normalise(reference), said(reference)
    return [whole] if spoken == whole or len(spoken) < 2 * n else [whole, spoken]


def field_overlap(value: Any, reference: str, n: int) -> FieldOverlap:
    """How much of ``reference`` one field value holds: each measure at its largest over the reference's
    readings."""
    texts = [t for t in map(normalise, field_texts(value)) if t]
    measures = [_overlap(texts, target, n) for target in reference_readings(reference, n) if target]
    return FieldOverlap(
        max((m.substring for m in measures), default=0.0), max((m.ngram for m in measures), default=0.0)
    )


def _overlap(texts: list[str], target: str, n: int) -> FieldOverlap:
    substring = max((longest_common_substring(target, t) for t in texts), default=0) / len(target)
    if len(target) < n:  # the reference is one gram
        return FieldOverlap(substring, float(any(target in t for t in texts)))
    wanted = ngrams(target, n)
    found = wanted & set().union(*(ngrams(t, n) for t in texts))
    return FieldOverlap(substring, len(found) / len(wanted))


@dataclass(frozen=True)
class InstanceOverlap:
    ngram: float  # share of the reference's distinct n-grams found in any text of any field
    pieces: float  # share of the reference's characters in a common substring of >= n characters with some text

    @property
    def overlap(self) -> float:
        return max(self.ngram, self.pieces)

    def as_dict(self) -> dict[str, float]:
        return {"ngram": round(self.ngram, 4), "pieces": round(self.pieces, 4)}


def instance_overlap(instance: dict[str, Any], n: int) -> InstanceOverlap:
    """How much of the reference the instance's input fields hold together: each measure at its largest over
    the reference's readings."""
    texts = [t for value in instance["fields"].values() for t in map(normalise, field_texts(value)) if t]
    measures = [_pieced(texts, target, n) for target in reference_readings(instance["reference"], n) if target]
    return InstanceOverlap(
        max((m.ngram for m in measures), default=0.0), max((m.pieces for m in measures), default=0.0)
    )


def _pieced(texts: list[str], target: str, n: int) -> InstanceOverlap:
    if len(target) < n:  # the reference is one gram: held whole by some text, or not at all
        held = float(any(target in t for t in texts))
        return InstanceOverlap(held, held)
    found = set().union(*(ngrams(t, n) for t in texts))
    covered = np.zeros(len(target), dtype=bool)
    starts = [i for i in range(len(target) - n + 1) if target[i : i + n] in found]
    for i in starts:
        covered[i : i + n] = True
    wanted = ngrams(target, n)
    return InstanceOverlap(len(wanted & found) / len(wanted), float(covered.mean()))


def instance_overlaps(instance: dict[str, Any], n: int) -> dict[str, FieldOverlap]:
    """Field name -> its overlap with the instance's reference."""
    return {name: field_overlap(value, instance["reference"], n) for name, value in instance["fields"].items()}


def overlap_of(overlaps: dict[str, FieldOverlap]) -> float:
    """The largest single field's overlap."""
    return max((o.overlap for o in overlaps.values()), default=0.0)


def leak_record(instance: dict[str, Any], leak: LeakSettings) -> dict[str, Any]:
    """What an instance's provenance records: every field's measures, the whole input's, the largest single
    field's overlap, the overlap (the larger of that and the whole input's), and whether it leaks."""
    overlaps = instance_overlaps(instance, leak.ngram)
    whole = instance_overlap(instance, leak.ngram)
    largest_field = overlap_of(overlaps)
    overlap = max(largest_field, whole.overlap)
    return {
        "ngram": leak.ngram,
        "threshold": leak.threshold,
        "fields": {name: o.as_dict() for name, o in overlaps.items()},
        "instance": whole.as_dict(),
        "largest_field": round(largest_field, 4),
        "overlap": round(overlap, 4),
        "leak": overlap > leak.threshold,
    }


QUANTILES = (0.5, 0.9, 0.99)


def overlap_distribution(overlaps: Sequence[float], threshold: float) -> dict[str, Any]:
    """Count, mean, quantiles, maximum and how many are above the threshold."""
    values = np.asarray(overlaps, dtype=float)
    if values.size == 0:
        return {"count": 0, "above_threshold": 0}
    return {
        "count": int(values.size),
        "mean": round(float(values.mean()), 4),
        **{f"q{round(q * 100)}": round(float(np.quantile(values, q)), 4) for q in QUANTILES},
        "max": round(float(values.max()), 4),
        "above_threshold": int((values > threshold).sum()),
    }


def measure_leak(instance: dict[str, Any], leak: LeakSettings) -> bool:
    """Record in the instance how much of its reference each input field, and the input as a whole, holds; flag
    it ``leak`` (and say so) when either is above the threshold."""
    record = leak_record(instance, leak)
    instance["provenance"]["leak"] = record
    if record["leak"]:
        instance["flags"].append("leak")
    return record["leak"]


def leak_report(instances: Sequence[dict[str, Any]], leak: LeakSettings) -> dict[str, Any]:
    """The overlap distribution of a set of instances (the overlap that decides; the largest single field's; the
    whole input's) and per field, with the settings it was measured with, and the votes that said an input
    leaks. Instances measured by ``measure_leak`` keep their numbers; others (a file of instances, say) are
    measured here."""
    records = [i["provenance"]["leak"] if "leak" in i["provenance"] else leak_record(i, leak) for i in instances]
    ballots = [b for i in instances for b in i["provenance"].get("votes", [])]
    names = dict.fromkeys(name for r in records for name in r["fields"])
    return {
        "threshold": leak.threshold,
        "ngram": leak.ngram,
        "action": leak.action,
        "overlap": overlap_distribution([r["overlap"] for r in records], leak.threshold),
        "largest_field": overlap_distribution([r["largest_field"] for r in records], leak.threshold),
        "instance": overlap_distribution([max(r["instance"].values()) for r in records], leak.threshold),
        "fields": {
            name: overlap_distribution(
                [max(r["fields"][name].values()) for r in records if name in r["fields"]], leak.threshold
            )
            for name in names
        },
        "votes_saying_leak": sum(b.get("leaks") is True for b in ballots),
    }


def overlap_note(instance: dict[str, Any]) -> str:
    """One line for the review file: how much of the reference the input holds, field by field and as a whole."""
    record = instance["provenance"]["leak"]
    fields = ", ".join(
        f"{name} {values['substring']:.2f}/{values['ngram']:.2f}" for name, values in record["fields"].items()
    )
    whole = record["instance"]
    return (
        f"the input holds {record['overlap']:.0%} of the reference (> {record['threshold']:.0%}; "
        f"longest common substring / {record['ngram']}-gram share: {fields}; all fields together, "
        f"{record['ngram']}-gram share {whole['ngram']:.2f}, pieced together {whole['pieces']:.2f})"
    )


def plant_leak(
    instance: dict[str, Any], field: str | None = None, edits: int = 0, speaker: str = "companion"
) -> dict[str, Any]:
    """A known answer for the leak check: a copy of ``instance`` whose input holds its reference, with ``edits``
    of its characters changed (evenly spaced). Without ``field``: in the dialogue's last turn of ``speaker``
    (companion: as a generator that copies its reference would put it; a turn added at the end when there is
    none); with ``field`` (a text or a list of texts): appended to it."""
    copy = json.loads(json.dumps(instance))
    text = _edited(instance["reference"], edits)
    fields = copy["fields"]
    if field is None:
        turns = fields[DIALOGUE]
        theirs = [turn for turn in turns if turn["speaker"] == speaker]
        if theirs:
            theirs[-1]["text"] = text
        else:
            turns.append({"speaker": speaker, "text": text})
    elif isinstance(fields[field], list):
        fields[field].append(text)
    else:
        fields[field] = f"{fields[field]}\n{text}"
    return copy


def _edited(text: str, edits: int) -> str:
    """``text`` with ``edits`` evenly spaced characters replaced by 某 (one of 〇 where it already is 某)."""
    chars = list(text)
    for k in range(1, edits + 1):
        i = k * len(chars) // (edits + 1)
        chars[i] = "〇" if chars[i] == "某" else "某"
    return "".join(chars)
