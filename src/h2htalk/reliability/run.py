"""One judge model's ladder job: the texts of every judge it is, judged with one engine start; the ladder's
verdicts, its canary kept and compared with the previous run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from h2htalk.io import read_jsonl, write_json_atomic, write_jsonl_atomic
from h2htalk.layout import Layout
from h2htalk.llm.calls import EngineOptions, model_identity
from h2htalk.reliability.canary import OWN_JUDGE, keep_canary
from h2htalk.reliability.judging import judge_texts
from h2htalk.reliability.ladder import (
    NEEDS,
    RUBRIC,
    SAFETY,
    LadderText,
    canary_texts,
    first_items,
    need_texts,
    rubric_texts,
    safety_texts,
)
from h2htalk.settings import JudgeSettings, ReliabilitySettings


def role_texts(
    roles: Sequence[str], subtasks: Sequence[str], variant: str, results: Layout, names: Sequence[str], seed: int
) -> list[LadderText]:
    """Every text the judges ``roles`` could be given: the rubric judge's ladder of every instance of the judged
    ``subtasks`` (with ``variant``'s prompts), the studies' judges' known-answer sets."""
    texts = []
    if RUBRIC in roles:
        for subtask in subtasks:
            instances = read_jsonl(results.path("instances", subtask=subtask))
            prompts = {r["id"]: r["messages"] for r in read_jsonl(results.prompts(variant, subtask))}
            texts += rubric_texts(subtask, instances, prompts, names, seed)
    if SAFETY in roles:
        texts += safety_texts(seed)
    if NEEDS in roles:
        texts += need_texts(seed)
    return texts


def run_ladder(
    spec: dict[str, Any],
    roles: Sequence[str],
    texts: Sequence[LadderText],
    judges: Mapping[str, JudgeSettings],
    reliability: ReliabilitySettings,
    engines: EngineOptions,
    results: Layout,
    part: str,
    slots: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Judge the ladder (the rubric judge's first ``ladder_items`` instances, the whole known-answer sets) and the
    canary; write the verdicts, each role's canary comparison (with the judge's earlier runs in its slot of that
    role, ``slots``: the role's own judge where not given) and the calls' summary; return the summary."""
    model = spec["name"]
    on_ladder = set(first_items([t for t in texts if t.role == RUBRIC], reliability.ladder_items))
    on_ladder |= {t for t in texts if t.role != RUBRIC}
    on_canary = set(canary_texts(texts, reliability.canary_items, reliability.seed))
    chosen = [t for t in texts if t in on_ladder or t in on_canary]
    records, sessions = judge_texts(spec, chosen, judges, engines)
    for text, record in zip(chosen, records, strict=True):
        record.update(ladder=text in on_ladder, canary=text in on_canary)
    write_jsonl_atomic(results.path("judge_ladder", model=model, part=part), records)
    judge = model_identity(spec)
    canaries = {}
    for role in roles:
        kept = [r for r in records if r["canary"] and r["role"] == role]
        slot = (slots or {}).get(role, OWN_JUDGE)
        canaries[role] = keep_canary(results, role, kept, judge, reliability.canary_min_alpha, slot)
    write_json_atomic(results.path("judge_canary", model=model, part=part), canaries)
    summary = {
        "model": model,
        "engine": spec["engine"],
        "roles": list(roles),
        "texts": len(chosen),
        "requests": sum(s["requests"] for s in sessions),
        "sent": sum(s["sent"] for s in sessions),
        "failed": sum(s["failed"] for s in sessions),
        "sessions": sessions,
    }
    write_json_atomic(results.path("judge_ladder_run", model=model, part=part), summary)
    return summary
