"""A cue-only judge: what the studies' known-answer sets reveal to a reader of surface cues alone.

A known-answer set shows that a judge reads what a reply does only if no surface cue gives its label away. The
cues are those a judge could be swayed by: a bracketed action "（…）" (the persona's style), a telephone number
(a hotline), the length, the SAP layer's phrases, and a question. The cue-only judge is a logistic regression on
them, fitted and tested by leave-one-pair-out cross-validation (each situation's good and bad reply are left out
together, so neither class is ever over-represented in a fold), so it is never scored on a reply it was fitted
on. A set it labels well above chance has a cue that a real judge's score could come from instead of the
content. On a set balanced by design, cross-validation is biased below chance (a left-out pair's cue difference
is the opposite of the rest's), so the same regression fitted and scored on the whole set is given beside it: an
upper bound.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from h2htalk.studies.judges import read_known_answers, read_need_answers

CUES: tuple[str, ...] = ("bracketed action", "phone number", "length", "SAP phrases", "question")
_BRACKETED = re.compile(r"（[^（）]{1,30}）|\([^()]{1,30}\)")
_PHONE = re.compile(r"\d{3,}(?:-\d{3,})*")
# what the SAP layer (resources/prompts/sap.md) tells the model to do, as it shows in a reply
SAP_PHRASES: tuple[str, ...] = ("理解", "深呼吸", "呼吸", "温水", "感受", "陪", "一起", "慢慢", "我在")
_PENALTY = 1.0  # L2 on the standardised weights: a few dozen replies do not pin five weights down
_NEWTON_STEPS = 50


def cue_values(reply: str) -> dict[str, float]:
    """The reply's cues: 0/1 for a bracketed action, a phone number and a question; its length in characters; how
    many of the SAP phrases it holds."""
    return {
        "bracketed action": float(bool(_BRACKETED.search(reply))),
        "phone number": float(bool(_PHONE.search(reply))),
        "length": float(len(reply)),
        "SAP phrases": float(sum(phrase in reply for phrase in SAP_PHRASES)),
        "question": float("？" in reply or "?" in reply),
    }


@dataclass(frozen=True)
class Reply:
    """A reply of a known-answer set: its text, whether it is the good one (safe, or meeting the need), and the
    pair it belongs to (a situation's good and bad reply)."""

    text: str
    good: bool
    pair: str


def _fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Penalised logistic regression by Newton's method; the intercept (first column) is not penalised."""
    weights = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], _PENALTY)
    penalty[0] = 0.0
    for _ in range(_NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-x @ weights))
        gradient = x.T @ (p - y) + penalty * weights
        hessian = x.T @ (x * (p * (1 - p))[:, None]) + np.diag(penalty) + 1e-9 * np.eye(x.shape[1])
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if np.abs(step).max() < 1e-10:
            break
    return weights


def _design(values: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones(len(values)), (values - mean) / scale])


def _predict(values: np.ndarray, labels: np.ndarray, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    """Fit on the ``train`` rows (cues standardised by their mean and spread there), call the ``test`` rows."""
    mean, scale = values[train].mean(axis=0), values[train].std(axis=0)
    scale[scale == 0] = 1.0
    weights = _fit(_design(values[train], mean, scale), labels[train])
    return _design(values[test], mean, scale) @ weights > 0


def cue_predictions(replies: Sequence[Reply], cross_validated: bool = True) -> list[bool]:
    """Whether the cue-only judge calls each reply the good one: each predicted by a model fitted without its pair,
    or (``cross_validated`` False) by one model fitted on every reply."""
    values = np.array([[cue_values(r.text)[cue] for cue in CUES] for r in replies])
    labels = np.array([float(r.good) for r in replies])
    if not cross_validated:
        everything = np.ones(len(replies), dtype=bool)
        return _predict(values, labels, everything, everything).tolist()
    pairs = np.array([r.pair for r in replies])
    predicted = np.zeros(len(replies), dtype=bool)
    for pair in dict.fromkeys(pairs):
        predicted[pairs == pair] = _predict(values, labels, pairs != pair, pairs == pair)
    return predicted.tolist()


def cue_accuracy(replies: Sequence[Reply], cross_validated: bool = True) -> float:
    """The share of replies the cue-only judge labels right (``cue_predictions``)."""
    predicted = cue_predictions(replies, cross_validated)
    return sum(p == r.good for p, r in zip(predicted, replies, strict=True)) / len(replies)


def cue_rates(replies: Sequence[Reply]) -> dict[str, tuple[float, float]]:
    """Each cue's mean over the good replies and over the bad ones (a rate for the 0/1 cues)."""
    good = [cue_values(r.text) for r in replies if r.good]
    bad = [cue_values(r.text) for r in replies if not r.good]
    return {cue: (float(np.mean([v[cue] for v in good])), float(np.mean([v[cue] for v in bad]))) for cue in CUES}


def safety_replies() -> list[Reply]:
    """The safety judge's known-answer set as replies: safe is good."""
    return [Reply(case["reply"], case["label"] == "safe", case["pair"]) for case in read_known_answers()]


def need_replies() -> list[Reply]:
    """The needs judge's known-answer set as replies: per scenario, the meeting reply (good) and the missing one."""
    return [
        Reply(text, good, case["scenario"])
        for case in read_need_answers()
        for text, good in ((case["met"], True), (case["missed"], False))
    ]
