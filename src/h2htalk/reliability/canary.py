"""The drift canary: a fixed, seeded set of ladder texts each judge scores whenever its ladder runs, kept run by run
and compared with the previous verdicts of its slot's judge.

The answers come through the content-addressed cache, so an unchanged judge gives the same verdicts again: a
run is identified by the digest of its verdicts (and of the judge's identity), kept once under
``results/judge_canary/{role}/runs/{digest}.jsonl``, and ``history.jsonl`` lists the digests in the order the
runs made them, each with the judge's place in the run (its slot: the role's own judge, the cascade's cheap
judge, or one judge of the panel). "The previous run" is the latest entry of the same slot whose digest differs
from this run's (a rerun that changes nothing adds no line): a changed judge model in that slot, revision,
prompt or sampling, or a fresh cache that got different answers. A role with two judges in one run (cascade
mode, a panel) so compares each with its own past, never one with the other. Krippendorff's alpha of the two
runs' verdicts over the texts both judged says whether the judge still judges as it did; below
``judge_reliability.canary.min_alpha`` the card and Table 2's notes say that the judge changed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from h2htalk.io import iter_jsonl, read_json, write_jsonl_atomic
from h2htalk.layout import Layout
from h2htalk.reliability.agreement import NOMINAL, ORDINAL, krippendorff_alpha
from h2htalk.reliability.ladder import NEEDS, ROLE_NAMES, RUBRIC
from h2htalk.settings import JUDGE_SECTIONS, JudgeMode

KEPT = ("key", "task", "item", "rung", "value")  # what a kept canary verdict holds
OWN_JUDGE, CHEAP_JUDGE = "judge", "cheap judge"  # slots; a panel's judge is a slot of its own


def canary_slot(config: Mapping[str, Any], role: str, model: str) -> str:
    """Where ``model`` judges ``role`` in the run: the role's own judge, the cascade's cheap judge, or a judge
    of the panel (``judge_reliability.panel``) of its own."""
    mode = JudgeMode.from_config(config, JUDGE_SECTIONS[role])
    if model == mode.model:
        return OWN_JUDGE
    if mode.cascade and model == mode.cheap_model:
        return CHEAP_JUDGE
    return f"panel judge {model}"


def _slot(entry: Mapping[str, Any]) -> str:
    return entry.get("slot", OWN_JUDGE)  # histories kept before slots were the role's own judge's


def digest(records: Sequence[dict[str, Any]], judge: dict[str, Any]) -> str:
    """What identifies a canary run: the judge and its verdict on every canary text."""
    verdicts = sorted((r["key"], r["value"], [s["request_key"] for s in r["samples"]]) for r in records)
    text = json.dumps({"judge": judge, "verdicts": verdicts}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _history(path: Path) -> list[dict[str, Any]]:
    return [entry for _, entry in iter_jsonl(path)] if path.exists() else []


def _append(path: Path, entry: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n")


def keep_canary(
    results: Layout,
    role: str,
    records: Sequence[dict[str, Any]],
    judge: dict[str, Any],
    min_alpha: float,
    slot: str = OWN_JUDGE,
) -> dict[str, Any]:
    """Keep this run's canary verdicts of ``role`` by the judge in ``slot`` (when new), and compare them with
    the previous run's in that slot."""
    current = digest(records, judge)
    run_file = Path(results.path("canary_run", role=role, digest=current))
    if not run_file.exists():
        write_jsonl_atomic(run_file, [{k: r[k] for k in KEPT} for r in records])
    history_file = Path(results.path("canary_history", role=role))
    history = [e for e in _history(history_file) if _slot(e) == slot]
    if not history or history[-1]["digest"] != current:
        entry = {"digest": current, "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "judge": judge, "items": len(records), "slot": slot}  # fmt: skip
        _append(history_file, entry)
        history.append(entry)
    previous = next(
        (e for e in reversed(history) if e["digest"] != current
         and Path(results.path("canary_run", role=role, digest=e["digest"])).exists()),
        None,
    )  # fmt: skip
    found = {"role": role, "slot": slot, "judge": judge, "digest": current, "items": len(records),
             "min_alpha": min_alpha, "previous": previous, "alpha": None, "compared": 0, "why": "",
             "flagged": False}  # fmt: skip
    if previous is None:
        return {**found, "why": f"the first canary of this {slot}: nothing to compare"}
    kept = results.path("canary_run", role=role, digest=previous["digest"])
    before = {r["key"]: r["value"] for _, r in iter_jsonl(kept)}
    units = [[before.get(r["key"]), r["value"]] for r in records if r["key"] in before]
    alpha = krippendorff_alpha(units, NOMINAL if role == NEEDS else ORDINAL)
    flagged = alpha.value is not None and alpha.value < min_alpha
    return {**found, "alpha": alpha.value, "compared": alpha.items, "why": alpha.why, "flagged": flagged}


def describe(comparison: dict[str, Any]) -> str:
    """The canary's finding in words."""
    previous = comparison["previous"]
    if previous is None:
        return comparison["why"]
    against = f"the previous canary ({previous['judge']['name']}, {previous['recorded_at']})"
    if comparison["alpha"] is None:
        return f"not comparable with {against}: {comparison['why']}"
    verdict = (
        f"below {comparison['min_alpha']:g}: the judge changed" if comparison["flagged"]
        else f"at least {comparison['min_alpha']:g}: it judges as before"
    )  # fmt: skip
    return f"alpha {comparison['alpha']:.2f} against {against} over {comparison['compared']} texts, {verdict}"


def drift_notes(canary_file: str | Path, role: str = RUBRIC) -> list[str]:
    """A note for under a table when the ``role`` judge's canary flags a change (nothing otherwise)."""
    comparison = read_json(canary_file).get(role)
    if not comparison or not comparison["flagged"]:
        return []
    name = ROLE_NAMES[role]
    return [
        f"The {name} changed: its drift canary agrees with the previous run's at Krippendorff's alpha "
        f"{comparison['alpha']:.2f} (below {comparison['min_alpha']:g}; {comparison['compared']} texts), so its "
        "scores are not comparable with earlier runs' (judge_reliability.md, beside this table)."
    ]
