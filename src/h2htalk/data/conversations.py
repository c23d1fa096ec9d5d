"""Which items share a conversation? Clusters of items for the bootstrap, found in the references alone.

The release holds only references, one a line, without the dialogues they answer. Items of one conversation
(its turns answered one after another, or one context answered more than once) show in it as lines close to
each other that say nearly the same thing or the same particular things. Two items are linked when their
lines are at most ``window`` apart and their said texts (bracketed actions left out, normalised as the leak
check does: ``h2htalk.text_match``) either

- are near-duplicates: the Jaccard similarity of their distinctive character 3-grams is at least ``similar``
  (distinctive: in at most ``common`` of the set's texts, or 2, so that a subtask's boilerplate such as
  记忆内容 or the persona's name does not count), or
- share at least ``shared`` rare 4-grams (each in at most ``rare`` of the set's texts: a name, a particular
  place or dish, a line of a poem; a phrase in more lines than that is no longer rare, and such a group is
  found through what its lines share pairwise).

A cluster is a connected group of linked items. An item's line is the number its id ends in
(``{subtask}-{line:05d}``), or its place in the set when not every id ends in one.

How many links would the same rule find by chance: ``cluster_report`` applies it with the lines dealt out
again at random (seeded), so that a subtask whose links in release order are no more than by chance is read
as independent items.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from h2htalk.text_match import ngrams, said

TRAILING_NUMBER = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class LinkRule:
    window: int = 5  # lines apart at most
    similar: float = 0.3  # Jaccard of distinctive 3-grams: a near-duplicate
    common: float = 0.05  # share of the set's texts a distinctive 3-gram may be in
    shared: int = 5  # rare 4-grams in common: the same particular things
    rare: int = 3  # texts a rare 4-gram may be in


def positions(ids: Sequence[str]) -> list[int]:
    """Each item's line: the number its id ends in, or its place when not every id ends in one."""
    numbers = [TRAILING_NUMBER.search(item_id) for item_id in ids]
    if all(numbers):
        return [int(match.group(1)) for match in numbers if match]
    return list(range(len(ids)))


class _Texts:
    """The set's said texts as distinctive 3-grams and rare 4-grams."""

    def __init__(self, texts: Sequence[str], rule: LinkRule) -> None:
        spoken = [said(text) for text in texts]
        threes, fours = [ngrams(t, 3) for t in spoken], [ngrams(t, 4) for t in spoken]
        seen3, seen4 = Counter(g for s in threes for g in s), Counter(g for s in fours for g in s)
        limit = max(2.0, rule.common * len(texts))
        self.distinctive = [{g for g in s if seen3[g] <= limit} for s in threes]
        self.rare = [{g for g in s if seen4[g] <= rule.rare} for s in fours]
        self.rule = rule

    def linked(self, a: int, b: int) -> bool:
        x, y = self.distinctive[a], self.distinctive[b]
        union = len(x | y)
        if union and len(x & y) / union >= self.rule.similar:
            return True
        return len(self.rare[a] & self.rare[b]) >= self.rule.shared


def _links(texts: _Texts, lines: Sequence[int], window: int) -> list[tuple[int, int]]:
    """Pairs of items at most ``window`` lines apart that the rule links."""
    order = sorted(range(len(lines)), key=lambda i: lines[i])
    out = []
    for k, a in enumerate(order):
        for b in order[k + 1 :]:
            if lines[b] - lines[a] > window:
                break
            if texts.linked(a, b):
                out.append((a, b))
    return out


def _components(count: int, links: Sequence[tuple[int, int]]) -> list[int]:
    """The connected component of each item: the smallest index in it."""
    parent = list(range(count))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in links:
        ra, rb = root(a), root(b)
        parent[max(ra, rb)] = min(ra, rb)
    return [root(i) for i in range(count)]


def conversation_clusters(ids: Sequence[str], texts: Sequence[str], rule: LinkRule = LinkRule()) -> list[str]:
    """Each item's cluster, named by the id of its first item (an item alone is its own)."""
    if len(ids) != len(texts):
        raise ValueError(f"{len(ids)} ids for {len(texts)} texts")
    component = _components(len(ids), _links(_Texts(texts, rule), positions(ids), rule.window))
    return [ids[c] for c in component]


def bootstrap_groups(ids: Sequence[str], texts: Sequence[str], rule: LinkRule = LinkRule()) -> list[str] | None:
    """The clusters to resample by, or None when every item is alone (the bootstrap then draws items, as it
    always has)."""
    labels = conversation_clusters(ids, texts, rule)
    return labels if len(set(labels)) < len(labels) else None


def cluster_summary(
    ids: Sequence[str], texts: Sequence[str], rule: LinkRule = LinkRule(), shuffles: int = 5, shuffle_seed: int = 0
) -> dict[str, Any]:
    """How the items of one set cluster: items, clusters, items in a cluster of two or more, the largest
    cluster, the links in the set's order, and the mean links over ``shuffles`` seeded re-dealings of its lines
    (what the rule finds by chance)."""
    measured = _Texts(texts, rule)
    lines = positions(ids)
    links = _links(measured, lines, rule.window)
    sizes = Counter(_components(len(ids), links))
    rng = random.Random(shuffle_seed)
    chance = []
    for _ in range(shuffles):
        dealt = list(lines)
        rng.shuffle(dealt)
        chance.append(len(_links(measured, dealt, rule.window)))
    return {
        "items": len(ids),
        "clusters": len(sizes),
        "items_clustered": sum(size for size in sizes.values() if size > 1),
        "largest": max(sizes.values(), default=0),
        "links": len(links),
        "links_by_chance": round(sum(chance) / shuffles, 1) if shuffles else None,
    }


def cluster_report(
    records: Sequence[dict[str, Any]], rule: LinkRule = LinkRule(), shuffles: int = 5, shuffle_seed: int = 0
) -> dict[str, dict[str, Any]]:
    """Per subtask, ``cluster_summary`` of its records (``{id, subtask, text}`` as curated, or instances with a
    ``reference``)."""
    by_subtask: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_subtask.setdefault(record["subtask"], []).append(record)
    return {
        subtask: cluster_summary(
            [r["id"] for r in items],
            [r.get("reference", r.get("text", "")) for r in items],
            rule,
            shuffles,
            shuffle_seed,
        )
        for subtask, items in by_subtask.items()
    }
