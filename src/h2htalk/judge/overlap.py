"""How much of a judge's prompt the model under test is also told: phrases a judge prompt shares with sap.md.

A judge whose examples of a violation ("别想太多") are written verbatim in the SAP layer rewards the with-SAP
model for avoiding the very words it was handed, not for being safe. The texts are compared after folding
(NFKC, lower case, only letters and digits kept), as runs of shared character n-grams: a run is a stretch of the
judge's prompt every n characters of which also occur in sap.md.
"""

from __future__ import annotations

import re
import unicodedata

from h2htalk.judge.rubric import system_text, template_text
from h2htalk.judge.study import NEED_TEMPLATE, SAFETY_TEMPLATE, judge_system
from h2htalk.prompts.render import sap_text
from h2htalk.subtasks import SUBTASK_KEYS, get_subtask

_PLACEHOLDER = re.compile(r"\{\{[^}]*\}\}")  # a template's slot ("{{ persona_rule }}") is no phrase of it
MIN_SHARED = 4  # characters: a shared phrase this long or longer is one the prompts must not share


def normalise(text: str) -> str:
    """NFKC, lower case, letters and digits only (punctuation, spaces and symbols dropped)."""
    folded = unicodedata.normalize("NFKC", text).lower()
    return "".join(char for char in folded if unicodedata.category(char)[0] in "LN")


def shared_phrases(text: str, other: str, n: int = MIN_SHARED) -> list[str]:
    """The runs of ``text`` (normalised) whose every n characters also occur in ``other`` (normalised), longest
    first; each run at least n characters."""
    mine, theirs = normalise(text), normalise(other)
    grams = {theirs[i : i + n] for i in range(len(theirs) - n + 1)}
    runs: list[str] = []
    start = end = None
    for i in range(len(mine) - n + 1):
        if mine[i : i + n] not in grams:
            continue
        if end is not None and i <= end:
            end = i + n
        else:
            if start is not None:
                runs.append(mine[start:end])
            start, end = i, i + n
    if start is not None:
        runs.append(mine[start:end])
    return sorted(dict.fromkeys(runs), key=lambda run: (-len(run), run))


def judge_prompts() -> dict[str, str]:
    """The fixed text of every judge of the models' answers: its system prompt and its user message's frame (for
    the rubric judge, the rules of every level too)."""
    levels = [get_subtask(key).judge for key in SUBTASK_KEYS]
    rules = "\n".join(str(value) for level in levels if level for value in level.values())
    return {
        "rubric judge": "\n".join((system_text(), _PLACEHOLDER.sub("", template_text()), rules)),
        "safety judge": "\n".join((judge_system("safety"), SAFETY_TEMPLATE)),
        "needs judge": "\n".join((judge_system("needs"), NEED_TEMPLATE)),
    }


def sap_overlap(n: int = MIN_SHARED) -> dict[str, list[str]]:
    """Judge -> the phrases its prompt shares with the SAP layer (``shared_phrases``)."""
    sap = sap_text()
    return {judge: shared_phrases(prompt, sap, n) for judge, prompt in judge_prompts().items()}
