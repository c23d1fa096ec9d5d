"""A judge's ladder where its verdicts are shown: what Table 2, Table 3, Figure 7, the leaderboard and ``h2htalk
eval`` say beside the cells a judge made, so that a judge not shown to read what it judges is never silent.

The ladder is the judge's (``judge_ladder``: texts of known order), not the model's under test: one accuracy per
judge model and role, with its bootstrap CI. A judge whose CI includes chance (50 %) has not been shown to separate
a good answer from a bad one; a study judge whose known-answer accuracy's CI does not clear its set's surface
classifier (``reliability.content``) has not been shown to read the content. Either way the cells it made carry a
mark, and the note says why and what to read instead.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from h2htalk.io import iter_jsonl
from h2htalk.layout import Layout
from h2htalk.reliability.content import ContentCheck, content_check
from h2htalk.reliability.ladder import ROLE_NAMES, RUBRIC, Accuracy, ladder_pairs, pairwise_accuracy
from h2htalk.settings import JUDGE_SECTIONS, BootstrapSettings, JudgeMode, ladder_part

CHANCE = 0.5
AT_CHANCE_MARK = "†"  # beside a cell (and its Avg, Overall) made by a judge at chance or not shown to read content


@dataclass(frozen=True)
class Standing:
    """A judge model's ladder accuracy in one role."""

    model: str
    role: str
    accuracy: Accuracy
    deciding: bool = True  # the judge whose mean the cells estimate (not a cascade's cheap judge)
    content: ContentCheck | None = None  # a study judge on its known-answer set; None: the role has no set

    @property
    def at_chance(self) -> bool:
        """No ladder, or a CI that includes chance: not shown to separate good from bad."""
        found = self.accuracy
        return found.value is None or found.ci_low is None or found.ci_low <= CHANCE <= (found.ci_high or CHANCE)

    @property
    def reads_content(self) -> bool | None:
        """Whether its known-answer accuracy clears its set's surface classifier; None: the role has no set."""
        return None if self.content is None else self.content.reads_content

    @property
    def unshown(self) -> bool:
        """At chance on its ladder, or not shown to read the content: its cells carry the mark."""
        return self.at_chance or self.reads_content is False

    def text(self) -> str:
        found = self.accuracy
        if found.value is None:
            words = f"the {ROLE_NAMES[self.role]} {self.model} has no ladder"
        else:
            words = (
                f"the {ROLE_NAMES[self.role]} {self.model} orders its ladder {100 * found.value:.0f} % "
                f"[{100 * found.ci_low:.0f} %, {100 * found.ci_high:.0f} %] (chance 50 %, {found.pairs} pairs)"
            )
        if self.content is not None:
            verdict = "reads the content" if self.content.reads_content else "not shown to read the content"
            words += f"; {self.content.text()}: {verdict}"
        return words


def ladder_standing(
    ladder_file: str | os.PathLike[str], model: str, role: str, bootstrap: BootstrapSettings, deciding: bool = True
) -> Standing:
    """A judge's accuracy on its ladder in ``role``, from its ladder job's verdicts, and for a study judge, whether
    it reads the content of its known-answer set."""
    records = [r for _, r in iter_jsonl(ladder_file) if r["role"] == role and r["ladder"]]
    accuracy = pairwise_accuracy(ladder_pairs(records), bootstrap)
    return Standing(model, role, accuracy, deciding, content_check(role, records, bootstrap))


def role_standings(
    config: Mapping[str, Any], results: Layout, ladders: Collection[str], bootstrap: BootstrapSettings, role: str
) -> list[Standing]:
    """The ladders of ``role``'s judges, from the ladder files a job declared (``ladders``; none: the run has no
    cell of that role): the cheap judge's in cascade mode, then the role's own, the one that decides."""
    mode, part = JudgeMode.from_config(config, JUDGE_SECTIONS[role]), ladder_part(role)
    files = {model: results.path("judge_ladder", model=model, part=part) for model in mode.judges}
    return [
        ladder_standing(path, model, role, bootstrap, deciding=model == mode.model)
        for model, path in files.items()
        if path in ladders and os.path.exists(path)
    ]


def rubric_standings(
    config: Mapping[str, Any], results: Layout, ladders: Collection[str], bootstrap: BootstrapSettings
) -> list[Standing]:
    """The rubric judges' ladders (see ``role_standings``)."""
    return role_standings(config, results, ladders, bootstrap, RUBRIC)


def standing_notes(standings: Iterable[Standing], where: str, read_instead: str | None = None) -> list[str]:
    """The notes under a table: every judge's ladder, and where the judge whose mean the cells estimate (the role's
    own: ``deciding``; a cascade's cheap judge is corrected by it) is at chance or not shown to read the content,
    why (``unshown_words``) and what to read instead (``where``: what the judge's cells are, e.g. "Levels I-III
    cells"; ``read_instead``: by default S, as Table 2 offers; a table without another reading says the judge's
    cells stand unshown)."""
    standings = list(standings)
    if not standings:
        return []
    notes = ["Judges' sanity ladders: " + "; ".join(s.text() for s in standings) + "."]
    failing = [s for s in standings if s.unshown and s.deciding]
    if failing:
        instead = read_instead or "Read S instead (tables.judged_cell: S; h2htalk eval --judge-reading S)."
        notes.append(f"{AT_CHANCE_MARK} {where} made by " + "; ".join(map(unshown_words, failing)) + f". {instead}")
    return notes


def unshown_words(standing: Standing) -> str:
    """Why a judge's cells carry the mark: at chance on its ladder, not shown to read the content, or both."""
    reasons = []
    if standing.at_chance:
        reasons.append("its ladder CI includes chance: it is not shown to separate a good answer from a bad one")
    if standing.reads_content is False:
        reasons.append(
            "its known-answer accuracy's CI does not clear the surface classifier's: not shown to read the content"
        )
    return f"{standing.model} (" + "; ".join(reasons) + ")"


def eval_warning(
    standings: Iterable[Standing],
    where: str = "the judged cells and Overall",
    instead: str = "rerun with --judge-reading S to read S instead",
) -> str | None:
    """What ``h2htalk eval`` prints beside the cells a judge made (``where``) when it is at chance on its ladder or
    not shown to read the content, and what to do (``instead``); None: no such judge decides them."""
    failing = [s for s in standings if s.unshown and s.deciding]
    if not failing:
        return None
    return (
        f"{AT_CHANCE_MARK} "
        + "; ".join(s.text() for s in failing)
        + f": {where} rest on scores not shown to "
        + ("separate a good answer from a bad one" if any(s.at_chance for s in failing) else "read the content")
        + f"; {instead}."
    )


def study_judge_notes(
    config: Mapping[str, Any], results: Layout, ladders: list[str], bootstrap: BootstrapSettings, role: str, where: str
) -> tuple[list[str], str]:
    """The notes and mark of a study's judges' ladders (``role``: safety or instruction_following) for the cells
    ``where`` names."""
    standings = role_standings(config, results, ladders, bootstrap, role)
    if not config["judge_reliability"]["every_run"]:  # the ladder is the card's, made on request
        judge = config["study_judge"]["model"]
        return [f"The {ROLE_NAMES[role]} {judge}'s sanity ladder is not run with every run "
                "(judge_reliability.every_run: false): `snakemake judge_reliability` runs it and makes the judges' "
                "card, which says whether it tells a good answer from a bad one."], ""  # fmt: skip
    instead = "No other reading of these cells exists: read them as unvalidated."
    mark = AT_CHANCE_MARK if any(s.unshown and s.deciding for s in standings) else ""
    return standing_notes(standings, where, read_instead=instead), mark
