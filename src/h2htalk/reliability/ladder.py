"""The sanity ladder: texts of known quality that each judge scores, and the ordered pairs they make.

For the rubric judge, every chosen Level I-III instance gives the reference (the oracle), four degradations of
it (``degrade``: cut to the first half, lines shuffled, the persona's name swapped, one fact changed) and
another instance's reference (random); the expected order is oracle > each degradation > random. The safety
judge scores its known-answer set: every safe reply should score above every unsafe one. The
instruction-following judge scores, per case of its known-answer set, a reply that meets the user's need above
one that misses it and above a reply written for another scenario.

A pair is judged right when the better text scores higher, wrong when lower; a tie, or a text without a
verdict, counts half: a judge that cannot tell, or does not answer, is at chance, not at zero. The share of
right pairs is the pairwise accuracy (the AUC of the pairs): 50 % is chance, 100 % a judge that always orders
them as expected.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from h2htalk.reliability import degrade
from h2htalk.settings import JUDGE_ROLES, BootstrapSettings

RUBRIC, SAFETY, NEEDS = JUDGE_ROLES
ROLE_NAMES = {RUBRIC: "rubric judge", SAFETY: "safety judge", NEEDS: "instruction-following judge"}

ORACLE, RANDOM = "oracle", "random"
DEGRADATIONS: tuple[str, ...] = ("half", "shuffled", "name_swapped", "fact_changed")
RUBRIC_RUNGS: tuple[str, ...] = (ORACLE, *DEGRADATIONS, RANDOM)
SAFE, UNSAFE = "safe", "unsafe"
MET, MISSED, MISMATCHED = "met", "missed", "mismatched"


@dataclass(frozen=True)
class LadderText:
    """One text a judge scores: which judge (``role``), the task, the item it belongs to, its rung and tier (0 is
    best; within a group a lower tier should score higher), and the judge's messages."""

    role: str
    task: str
    item: str
    rung: str
    tier: int
    group: str  # texts compared with each other: an instance, a scenario, or the whole known-answer set
    rank: int  # the item's place in its task's seeded order (``seeded_order``)
    answer: str  # the text judged as the answer
    messages: tuple[tuple[str, str], ...]  # (role, content): what the judge is sent

    @property
    def key(self) -> str:
        """What the judge sees, hashed: the same text in two runs has the same key whatever judge reads it."""
        return hashlib.sha256(json.dumps(self.messages, ensure_ascii=False).encode("utf-8")).hexdigest()

    def chat(self) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in self.messages]

    def label(self) -> dict[str, Any]:
        return {"role": self.role, "task": self.task, "item": self.item, "rung": self.rung, "tier": self.tier,
                "group": self.group, "rank": self.rank, "answer": self.answer, "key": self.key}  # fmt: skip


def _frozen(messages: list[dict[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((m["role"], m["content"]) for m in messages)


def seeded_order(ids: Iterable[str], seed: int, name: str) -> list[str]:
    """``ids`` in a seeded order of their own (per ``name``): the first n of it are the same whatever n is, so a
    small ladder is part of a larger one and the canary part of the ladder."""
    order = sorted(ids)
    random.Random(f"{seed}/{name}").shuffle(order)
    return order


# --- the rubric judge -----------------------------------------------------------------------------------------


def instance_facts(instance: dict[str, Any]) -> list[str]:
    """The activities an instance's fields list (its hobbies and the like): the facts ``change_fact`` may swap."""
    return [value for field in instance["fields"].values() if isinstance(field, list) for value in field]


def rubric_rungs(
    instance: dict[str, Any], other: dict[str, Any] | None, names: Sequence[str], seed: int
) -> dict[str, str]:
    """Rung -> the text judged as the answer: the reference, each degradation that applies, and ``other``'s
    reference (random) when there is another instance."""
    reference = instance["reference"]
    rng = random.Random(f"{seed}/{instance['id']}")
    others = instance_facts(other) if other else []
    texts = {
        ORACLE: reference,
        "half": degrade.cut_half(reference),
        "shuffled": degrade.shuffle_lines(reference, rng),
        "name_swapped": degrade.swap_name(reference, names),
        "fact_changed": degrade.change_fact(reference, instance_facts(instance), others),
        RANDOM: other["reference"] if other and other["reference"] != reference else None,
    }
    return {rung: text for rung, text in texts.items() if text is not None and (rung == ORACLE or text != reference)}


def rubric_texts(
    subtask: str,
    instances: Sequence[dict[str, Any]],
    prompts: Mapping[str, list[dict[str, str]]],
    names: Sequence[str],
    seed: int,
) -> list[LadderText]:
    """The ladder of every instance, in the subtask's seeded order, each text judged as the rubric judge judges
    a model's answer: with the model's system prompt and task (``prompts``: id -> messages) and the reference.
    Each instance's random rung is the next instance's reference in that order."""
    from h2htalk.judge.rubric import judge_messages

    by_id = {instance["id"]: instance for instance in instances if instance["id"] in prompts}
    order = seeded_order(by_id, seed, subtask)
    texts = []
    for index, item_id in enumerate(order):
        instance = by_id[item_id]
        other = by_id[order[(index + 1) % len(order)]] if len(order) > 1 else None
        system = next(m["content"] for m in prompts[item_id] if m["role"] == "system")
        task = next(m["content"] for m in prompts[item_id] if m["role"] == "user")
        for rung, answer in rubric_rungs(instance, other, names, seed).items():
            tier = 0 if rung == ORACLE else 2 if rung == RANDOM else 1
            messages = judge_messages(subtask, system, task, answer, instance["reference"])
            texts.append(LadderText(RUBRIC, subtask, item_id, rung, tier, item_id, index, answer, _frozen(messages)))
    return texts


# --- the study judges -------------------------------------------------------------------------------------------


def safety_texts(seed: int) -> list[LadderText]:
    """The safety judge's known-answer set: safe replies (tier 0) above unsafe ones (tier 1), all compared."""
    from h2htalk.judge.study import read_known_answers, safety_messages

    cases = {case["id"]: case for case in read_known_answers()}
    texts = []
    for rank, case_id in enumerate(seeded_order(cases, seed, SAFETY)):
        case = cases[case_id]
        messages = _frozen(safety_messages({"turns": case["turns"]}, case["reply"]))
        tier = 0 if case["label"] == SAFE else 1
        group = "known answers"
        texts.append(LadderText(SAFETY, SAFETY, case_id, case["label"], tier, group, rank, case["reply"], messages))
    return texts


def need_texts(seed: int) -> list[LadderText]:
    """Per known-answer case: the reply that meets the need (tier 0) above the one that misses it and above a
    meeting reply written for another scenario (mismatched, tier 1: the next case in the seeded order whose
    scenario differs)."""
    from h2htalk.judge.study import need_messages, read_need_answers
    from h2htalk.studies.data import if_items, read_scenarios

    scenarios = {item["id"]: item for item in if_items(read_scenarios(NEEDS))}
    answers = {case["id"]: case for case in read_need_answers()}
    order = seeded_order(answers, seed, NEEDS)
    texts = []
    for index, case_id in enumerate(order):
        case = answers[case_id]
        later = order[index + 1 :] + order[:index]
        other = next((answers[c] for c in later if answers[c]["scenario"] != case["scenario"]), None)
        replies = {MET: case["met"], MISSED: case["missed"], **({MISMATCHED: other["met"]} if other else {})}
        for rung, reply in replies.items():
            messages = _frozen(need_messages(scenarios[case["scenario"]], reply))
            tier = 0 if rung == MET else 1
            texts.append(LadderText(NEEDS, NEEDS, case_id, rung, tier, case_id, index, reply, messages))
    return texts


# --- which texts are judged ----------------------------------------------------------------------------------


def first_items(texts: Iterable[LadderText], count: int | None) -> list[LadderText]:
    """The texts of the first ``count`` items of each task's seeded order (None: all)."""
    return [text for text in texts if count is None or text.rank < count]


def canary_texts(texts: Iterable[LadderText], count: int, seed: int) -> list[LadderText]:
    """The drift canary: the first ``count`` items of each task's seeded order (fewer where the task has fewer),
    each with one of its rungs drawn by the seed, so that the canary holds good and bad texts alike."""
    by_item: dict[tuple[str, str, str], list[LadderText]] = {}
    for text in texts:
        if text.rank < count:
            by_item.setdefault((text.role, text.task, text.item), []).append(text)
    return [
        random.Random(f"{seed}/canary/{role}/{task}/{item}").choice(sorted(members, key=lambda t: t.rung))
        for (role, task, item), members in sorted(by_item.items())
    ]


# --- pairs and their accuracy -------------------------------------------------------------------------------


Record = Mapping[str, Any]  # a text's label (``LadderText.label``) with the judge's ``value`` (None: no verdict)


@dataclass(frozen=True)
class Pair:
    better: Record
    worse: Record

    @property
    def comparison(self) -> str:
        return f"{self.better['rung']} > {self.worse['rung']}"

    @property
    def cluster(self) -> str:
        """What the bootstrap resamples together: an instance's or a scenario's pairs; in the safety set, where
        every safe reply meets every unsafe one, an unsafe reply's pairs."""
        return self.worse["item"] if self.better["role"] == SAFETY else self.better["group"]

    def outcome(self) -> float:
        """1 when the better text scores higher, 0 when lower; a tie or a missing verdict counts half."""
        better, worse = self.better["value"], self.worse["value"]
        if better is None or worse is None or better == worse:
            return 0.5
        return 1.0 if better > worse else 0.0

    @property
    def unread(self) -> bool:
        return self.better["value"] is None or self.worse["value"] is None


def ladder_pairs(records: Iterable[Record]) -> list[Pair]:
    """Every (better, worse) pair within a group: a text of a lower tier against each of a higher tier."""
    groups: dict[tuple[str, str, str], list[Record]] = {}
    for record in records:
        groups.setdefault((record["role"], record["task"], record["group"]), []).append(record)
    return [Pair(a, b) for members in groups.values() for a in members for b in members if a["tier"] < b["tier"]]


@dataclass(frozen=True)
class Accuracy:
    value: float | None
    ci_low: float | None
    ci_high: float | None
    pairs: int
    items: int
    unread: int  # pairs with a text that has no verdict (counted as ties)


def pairwise_accuracy(pairs: Sequence[Pair], bootstrap: BootstrapSettings) -> Accuracy:
    """The share of ``pairs`` the judge orders right (ties and missing verdicts count half), with a bootstrap CI
    that resamples whole clusters (an instance's pairs together)."""
    import numpy as np

    from h2htalk.scoring.bootstrap import bootstrap_mean_ci

    if not pairs:
        return Accuracy(None, None, None, 0, 0, 0)
    values = np.array([pair.outcome() for pair in pairs])
    clusters = [pair.cluster for pair in pairs]
    low, high = bootstrap_mean_ci(values, bootstrap.resamples, bootstrap.seed, bootstrap.confidence, clusters)
    items = len({(r["task"], r["item"]) for pair in pairs for r in (pair.better, pair.worse)})
    unread = sum(pair.unread for pair in pairs)
    return Accuracy(float(values.mean()), float(low[0]), float(high[0]), len(pairs), items, unread)
