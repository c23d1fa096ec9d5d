"""What a known-answer set gives away on its surface: a classifier of characters, and single cues, that never read
what a reply means.

A known-answer set shows that a judge reads what a reply does only if its surface does not give the label away.
The sets are minimal pairs (each bad reply is its good twin with one meaning-changing edit), so openings, endings,
length and stock phrases are alike on both sides by construction; this module measures what is left. The surface
classifier is a logistic regression on character 1-2-grams (scikit-learn, nothing tuned); each single cue (the
ending character, a coaxing tag question, a length above the set's median, a bracketed action, a hotline number,
each SAP phrase) calls a reply what most replies with its value of the cue are: the best any reader of that cue
alone can learn. Every one is fitted and scored leave-one-pair-out: a
situation's good and bad reply are left out together, so no reply is labelled by a model that saw it or its twin,
and each fold's training set stays balanced. A set that a surface reader labels well above chance has a tell that a
judge's verdict could come from instead of the content; a judge no better than the surface classifier is not shown
to read the content.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from h2htalk.reliability.ladder import NEEDS, SAFETY

if TYPE_CHECKING:  # numpy waits for a set's surface to be read
    import numpy as np

# what the SAP layer (resources/prompts/sap.md) asks a reply to say or forbids it, as phrases a reply can show
SAP_PHRASES: tuple[str, ...] = (
    "理解", "深呼吸", "温水", "感受", "陪", "一起", "身边", "信任", "安全", "热线", "专业", "医生", "朋友", "家人",
    "保密", "别想太多", "想开点", "只有我懂你", "你只需要我",
)  # fmt: skip
_TAG_QUESTION = re.compile(r"(好吗|好不好|对吧|对不对|行吗|行不行|可以吗|是不是|信我吗|听我的|怎么样|好么)[？?]$")
_BRACKETED = re.compile(r"（[^（）]{1,30}）|\([^()]{1,30}\)")
_HOTLINE = re.compile(r"\d{3,}(?:-\d{3,})*")


@dataclass(frozen=True)
class Reply:
    """A reply of a known-answer set: its text, whether it is the good one (safe, or meeting the need), and its pair
    (the situation whose good and bad reply it is one of)."""

    text: str
    good: bool
    pair: str


def safety_replies() -> list[Reply]:
    """The safety judge's known-answer set as replies: safe is good."""
    from h2htalk.judge.study import read_known_answers

    return [Reply(case["reply"], case["label"] == "safe", case["pair"]) for case in read_known_answers()]


def need_replies() -> list[Reply]:
    """The needs judge's known-answer set as replies: per case, the meeting reply (good) and the missing one."""
    from h2htalk.judge.study import read_need_answers

    return [
        Reply(text, good, case["id"])
        for case in read_need_answers()
        for text, good in ((case["met"], True), (case["missed"], False))
    ]


# A cue: a reply's value of it (the median length is the set's, so a cue sees the whole set).
Cue = Callable[[Sequence[Reply]], list[object]]


def _flag(test: Callable[[str], bool]) -> Cue:
    return lambda replies: [test(r.text) for r in replies]


def _long(replies: Sequence[Reply]) -> list[object]:
    import numpy as np

    median = float(np.median([len(r.text) for r in replies]))
    return [len(r.text) > median for r in replies]


CUES: dict[str, Cue] = {
    "ending character": lambda replies: [r.text[-1:] for r in replies],
    "tag question": _flag(lambda text: bool(_TAG_QUESTION.search(text))),
    "longer than the median": _long,
    "bracketed action": _flag(lambda text: bool(_BRACKETED.search(text))),
    "hotline number": _flag(lambda text: bool(_HOTLINE.search(text))),
    **{f"SAP phrase {phrase}": _flag(lambda text, phrase=phrase: phrase in text) for phrase in SAP_PHRASES},
}


def _labels_and_pairs(replies: Sequence[Reply]) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    return np.array([int(r.good) for r in replies]), np.array([r.pair for r in replies])


def _left_out_predictions(replies: Sequence[Reply], features: Callable[[np.ndarray, np.ndarray], tuple]) -> np.ndarray:
    """Each reply's predicted label from a logistic regression fitted on every other pair; ``features(train, test)``
    (boolean masks) gives the two feature matrices, so a vocabulary is learned from the training pairs alone."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    labels, pairs = _labels_and_pairs(replies)
    predicted = np.zeros(len(replies), dtype=int)
    for pair in dict.fromkeys(pairs):
        test = pairs == pair
        train_x, test_x = features(~test, test)
        predicted[test] = LogisticRegression(max_iter=1000).fit(train_x, labels[~test]).predict(test_x)
    return predicted


def _accuracy(replies: Sequence[Reply], predicted: np.ndarray) -> float:
    import numpy as np

    labels, _ = _labels_and_pairs(replies)
    return float(np.mean(predicted == labels))


def surface_accuracy(replies: Sequence[Reply]) -> float:
    """The surface classifier's leave-one-pair-out accuracy: logistic regression on character 1-2-gram counts."""
    from sklearn.feature_extraction.text import CountVectorizer

    texts = [r.text for r in replies]

    def grams(train: np.ndarray, test: np.ndarray) -> tuple:
        vectorizer = CountVectorizer(analyzer="char", ngram_range=(1, 2))
        fitted = vectorizer.fit_transform([t for t, keep in zip(texts, train, strict=True) if keep])
        return fitted, vectorizer.transform([t for t, keep in zip(texts, test, strict=True) if keep])

    return _accuracy(replies, _left_out_predictions(replies, grams))


def cue_accuracy(replies: Sequence[Reply], cue: str) -> float:
    """One cue's leave-one-pair-out accuracy (``CUES``): each reply is called what most replies of the other pairs
    with its value of the cue are (good on a majority of good ones; a tie, or a value no other pair has, is bad)."""
    import numpy as np

    values = CUES[cue](replies)
    labels, pairs = _labels_and_pairs(replies)
    predicted = np.zeros(len(replies), dtype=int)
    for index, (value, pair) in enumerate(zip(values, pairs, strict=True)):
        same = [label for label, v, p in zip(labels, values, pairs, strict=True) if p != pair and v == value]
        predicted[index] = 2 * sum(same) > len(same)
    return _accuracy(replies, predicted)


@dataclass(frozen=True)
class Surface:
    """What a set's surface gives away: the surface classifier's accuracy and the best single cue's."""

    replies: int
    classifier: float
    best_cue: str
    best_cue_accuracy: float


def surface_of(replies: Sequence[Reply]) -> Surface:
    cues = {cue: cue_accuracy(replies, cue) for cue in CUES}
    best = max(cues, key=cues.__getitem__)
    return Surface(len(replies), surface_accuracy(replies), best, cues[best])


@cache
def set_surface(role: str) -> Surface:
    """The surface of a study judge's known-answer set (``role``: safety or instruction_following)."""
    return surface_of({SAFETY: safety_replies, NEEDS: need_replies}[role]())
