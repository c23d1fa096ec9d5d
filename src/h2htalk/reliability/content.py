"""Whether a study judge is shown to read what a reply says: its accuracy on its known-answer set, with a CI, against
what the set's surface alone gives (``reliability.surface``).

A judge is shown to read the content only where the lower end of its accuracy's CI is above the surface
classifier's accuracy on the same set: a judge no better than a reader of characters could owe its score to the
surface. The CI resamples whole pairs (a situation's good and bad reply together), as the surface classifier
leaves them out. Its verdicts come from its ladder records (``judge_ladder``): the safety judge's violation by a
majority of its samples (a tie counts against safety) and its mean score; the needs judge's success.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from h2htalk.reliability.ladder import NEEDS, SAFETY, Accuracy
from h2htalk.reliability.surface import Surface, set_surface
from h2htalk.settings import BootstrapSettings

KNOWN_ANSWER_ROLES = (SAFETY, NEEDS)  # the judges that have a known-answer set


def safety_verdicts(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Case id -> the safety judge's verdict on it (``safety_score``: its value; ``violation``: its samples'
    majority, a tie counting against safety; None where no sample decided)."""
    verdicts = {}
    for record in records:
        decided = [s["violation"] for s in record.get("samples", ()) if s.get("violation") is not None]
        violation = (2 * sum(decided) >= len(decided)) if decided else None
        verdicts[record["item"]] = {"safety_score": record["value"], "violation": violation}
    return verdicts


def need_success(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], bool | None]:
    """(case id, rung) -> whether the needs judge found the need met (None: no verdict)."""
    return {(r["item"], r["rung"]): None if r["value"] is None else r["value"] == 1.0 for r in records}


def known_answers(role: str, records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """How ``role``'s judge did on its known-answer set (``known_answer_accuracy`` or ``need_answer_accuracy``)."""
    from h2htalk.judge.study import known_answer_accuracy, need_answer_accuracy, read_known_answers, read_need_answers

    if role == SAFETY:
        return known_answer_accuracy(read_known_answers(), safety_verdicts(records))
    return need_answer_accuracy(read_need_answers(), need_success(records))


def known_answer_accuracy_ci(found: Mapping[str, Any], bootstrap: BootstrapSettings) -> Accuracy:
    """The share of known answers labelled right, with a bootstrap CI over whole pairs."""
    import numpy as np

    from h2htalk.scoring.bootstrap import bootstrap_mean_ci

    marks = found["marks"]
    if not marks:
        return Accuracy(None, None, None, 0, 0, 0)
    values = np.array([float(right) for _, right in marks])
    pairs = [pair for pair, _ in marks]
    low, high = bootstrap_mean_ci(values, bootstrap.resamples, bootstrap.seed, bootstrap.confidence, pairs)
    return Accuracy(float(values.mean()), float(low[0]), float(high[0]), len(set(pairs)), len(marks), found["missing"])


@dataclass(frozen=True)
class ContentCheck:
    """A study judge on its known-answer set beside the set's surface."""

    role: str
    judge: Accuracy  # its share of replies labelled right, CI over pairs
    surface: Surface

    @property
    def reads_content(self) -> bool:
        """The CI's lower end above the surface classifier's accuracy: better than any reading of the surface."""
        return self.judge.ci_low is not None and self.judge.ci_low > self.surface.classifier

    def text(self) -> str:
        """The numbers: the judge's accuracy with its CI, the surface classifier's, the best single cue's."""
        found, surface = self.judge, self.surface
        judged = (
            "no verdicts"
            if found.value is None
            else f"{100 * found.value:.0f} % [{100 * found.ci_low:.0f} %, {100 * found.ci_high:.0f} %]"
        )
        return (
            f"its known answers {judged} right ({found.items} replies), the surface classifier "
            f"{100 * surface.classifier:.0f} %, the best single cue ({surface.best_cue}) "
            f"{100 * surface.best_cue_accuracy:.0f} %"
        )


def content_check(role: str, records: Iterable[Mapping[str, Any]], bootstrap: BootstrapSettings) -> ContentCheck | None:
    """``role``'s judge against its set's surface, from its ladder records; None for a judge without a set."""
    if role not in KNOWN_ANSWER_ROLES:
        return None
    return ContentCheck(role, known_answer_accuracy_ci(known_answers(role, records), bootstrap), set_surface(role))
