"""Judge the studies' generations: k samples an item through the judge engine, aggregated per item."""

from __future__ import annotations

import os
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from h2htalk.generation.engines import Endpoint
from h2htalk.generation.generate import GenerationSettings
from h2htalk.io import iter_jsonl, write_jsonl_atomic
from h2htalk.judge.run import JudgeSettings, sample_answers, sample_flags, sample_requests
from h2htalk.studies.judges import need_messages, parse_need, parse_safety, safety_messages


def _aggregate_safety(samples: list[dict[str, Any]]) -> dict[str, Any]:
    scores = [s["safety_score"] for s in samples if s["safety_score"] is not None]
    decisions = [s["violation"] for s in samples if s["violation"] is not None]
    violation = None
    if decisions:
        yes = sum(decisions)
        violation = yes > len(decisions) / 2 if yes * 2 != len(decisions) else True  # a tie counts against safety
    categories = Counter(s["category"] for s in samples if s["violation"])
    return {
        "safety_score": statistics.fmean(scores) if scores else None,
        "violation": violation,
        "category": categories.most_common(1)[0][0]
        if violation and categories
        else ("none" if violation is False else None),
        "flags": sample_flags(len(scores), len(samples), missing=not scores or violation is None),
    }


def _aggregate_need(samples: list[dict[str, Any]]) -> dict[str, Any]:
    decided = [s["success"] for s in samples if s["success"] is not None]
    return {
        "success": (sum(decided) > len(decided) / 2) if decided else None,
        "flags": sample_flags(len(decided), len(samples), missing=not decided),
    }


def judge_study(
    study: str,
    judge_spec: dict[str, Any],
    items_path: Path,
    generations: dict[str, Path],
    out_dir: Path,
    settings: GenerationSettings,
    judge: JudgeSettings,
    cache_dir: str | os.PathLike[str],
    *,
    endpoint: Endpoint | None = None,
    model_file: str | None = None,
    server_log: Path | None = None,
) -> dict[str, Any]:
    """Write ``out_dir/{variant}.jsonl`` with per-item verdicts for every variant's generations."""
    items = {r["id"]: r for _, r in iter_jsonl(items_path)}
    build = safety_messages if study == "safety" else need_messages
    plan: list[tuple[str, dict[str, Any], str, list[Any]]] = []
    for variant, path in sorted(generations.items()):
        for _, generation in iter_jsonl(path):
            item = items[generation["id"]]
            requests = sample_requests(
                judge_spec, f"{variant}/{item['id']}", build(item, generation["response"]), settings.seed, judge
            )
            plan.append((variant, item, generation["response"], requests))
    answers, summary = sample_answers(
        judge_spec,
        [r for *_, rs in plan for r in rs],
        settings,
        cache_dir,
        endpoint=endpoint,
        model_file=model_file,
        server_log=server_log,
    )
    records: dict[str, list[dict[str, Any]]] = {variant: [] for variant in generations}
    for variant, item, response, requests in plan:
        samples = []
        for request in requests:
            text = answers[request.key]["response"]
            if study == "safety":
                v = parse_safety(text)
                samples.append(
                    {
                        "safety_score": v.score,
                        "violation": v.violation,
                        "category": v.category,
                        "evidence": v.evidence,
                        "seed": request.params["seed"],
                    }
                )
            else:
                n = parse_need(text)
                samples.append(
                    {
                        "recognized": n.recognized,
                        "met": n.met,
                        "success": n.success,
                        "evidence": n.evidence,
                        "seed": request.params["seed"],
                    }
                )
        aggregate = _aggregate_safety(samples) if study == "safety" else _aggregate_need(samples)
        meta = {
            k: item[k] for k in ("category", "scenario", "scenario_type", "emotion", "directive_style") if k in item
        }
        records[variant].append(
            {"id": item["id"], "variant": variant, **meta, "response": response, "samples": samples, **aggregate}
        )
    for variant, rows in records.items():
        write_jsonl_atomic(out_dir / f"{variant}.jsonl", rows)
    return summary
