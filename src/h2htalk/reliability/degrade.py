"""Worse versions of a reference, each worse in one named way: the middle rungs of the judge's sanity ladder.

Each function returns the changed text, or None when the change cannot be made to this text (one sentence
cannot be shuffled; a text naming no persona cannot have its name swapped); that rung is then left out for
the item, never replaced by an unchanged copy.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

# A name no persona of the release or the demo uses: what the persona's name is swapped for.
OTHER_NAME = "陆景川"

_SENTENCE = re.compile(r"[^。！？!?]*[。！？!?]+[”」』）)]*|[^。！？!?]+$")
_CLOCK = re.compile(r"(?<!\d)([01]?\d|2[0-3])([:：])([0-5]\d)(?!\d)")
_NUMBER = re.compile(r"\d+")
_LIST_MARKER = re.compile(r"^\s*\d+[.、)]", re.M)
_CLOCK_SHIFT_HOURS = 6  # a time six hours off: another part of the day, never the same slot


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.findall(text.strip()) if s.strip()]


def cut_half(text: str) -> str | None:
    """The first half: of its lines when it has several, else of its sentences, else of its characters."""
    for units, joiner in ((lines(text), "\n"), (sentences(text), "")):
        if len(units) > 1:
            return joiner.join(units[: len(units) // 2])
    stripped = text.strip()
    return stripped[: len(stripped) // 2] if len(stripped) > 1 else None


def shuffle_lines(text: str, rng: random.Random) -> str | None:
    """Its lines in another order (a one-paragraph text: its sentences); None when there is nothing to reorder."""
    units, joiner = (lines(text), "\n") if len(lines(text)) > 1 else (sentences(text), "")
    if len(set(units)) < 2:
        return None
    order = units[:]
    rng.shuffle(order)
    if order == units:  # the shuffle drew the same order: move the first unit to the end instead
        order = units[1:] + units[:1]
    return joiner.join(order)


def swap_name(text: str, names: Sequence[str], other: str = OTHER_NAME) -> str | None:
    """Every one of the persona's ``names`` replaced by ``other``; None when the text names none of them."""
    ordered = sorted({n for n in names if n}, key=len, reverse=True)  # 竹内遥斗 before 遥斗
    if not ordered or not any(name in text for name in ordered):
        return None
    return re.sub("|".join(map(re.escape, ordered)), other, text)


def change_fact(text: str, own: Sequence[str] = (), others: Sequence[str] = ()) -> str | None:
    """One fact changed, the first that applies: the first clock time moved by six hours (a plan's times, the
    arrangement Level III must keep); else the first number that is not a list marker, doubled plus one; else
    the first of ``own`` (the item's activities, e.g. its hobbies) found in the text swapped for the first of
    ``others`` (another item's) that the text does not hold. None when nothing applies."""
    clock = _CLOCK.search(text)
    if clock:
        hour = (int(clock.group(1)) + _CLOCK_SHIFT_HOURS) % 24
        moved = f"{hour:0{len(clock.group(1))}d}{clock.group(2)}{clock.group(3)}"
        return text[: clock.start()] + moved + text[clock.end() :]
    markers = {m.end() - 1 for m in _LIST_MARKER.finditer(text)}
    for number in _NUMBER.finditer(text):
        if number.end() not in markers:
            return text[: number.start()] + str(2 * int(number.group()) + 1) + text[number.end() :]
    found = next((fact for fact in own if fact and fact in text), None)
    swap = next((fact for fact in others if fact and fact not in text and fact not in own), None)
    if found is None or swap is None:
        return None
    return text.replace(found, swap, 1)
