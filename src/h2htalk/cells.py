"""Which cells a run has: the configured models, variants, subtasks, studies and embedders, in one place.

The workflow declares every job's inputs and outputs from these lists, and each command writes exactly the
cells they name, so the two cannot disagree. Each list reads only the config sections it needs, so a command
that declares the sections it reads gets an error, not a stale setting, when it reaches for another.
"""

from __future__ import annotations

from typing import Any

from h2htalk.layout import Cell, Layout
from h2htalk.settings import RUBRIC, STUDIES, JudgeMode
from h2htalk.subtasks import JUDGED


class RunCells:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    @property
    def subtasks(self) -> tuple[str, ...]:
        return tuple(self.config["subtasks"])

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(self.config["variants"])

    @property
    def judged_subtasks(self) -> tuple[str, ...]:
        return tuple(s for s in self.subtasks if s in JUDGED)

    @property
    def models(self) -> tuple[str, ...]:
        """The models under test: an engine answers the benchmark (and the studies: ``study_models``)."""
        return tuple(self.config["models"])

    @property
    def baselines(self) -> tuple[str, ...]:
        """No model: they answer the benchmark from the instances."""
        return tuple(self.config["baselines"])

    @property
    def run_models(self) -> tuple[str, ...]:
        """Everything with answers, scores and Table 2 rows."""
        return (*self.models, *self.baselines)

    @property
    def judged_models(self) -> tuple[str, ...]:
        return (*self.models, *(self.baselines if self.config["rubric_judge"]["baselines"] else ()))

    @property
    def study_models(self) -> tuple[str, ...]:
        """The models that answer the studies (studies.models; null: the models under test; none: no study)."""
        listed = self.config["studies"]["models"]
        return self.models if listed is None else tuple(listed)

    @property
    def judged_roles(self) -> tuple[str, ...]:
        """The judges the run has work for (``settings.JUDGE_ROLES``): the rubric judge where Levels I-III run, the
        studies' judges where a model answers the studies."""
        return ((RUBRIC,) if self.judged_subtasks else ()) + (STUDIES if self.study_models else ())

    @property
    def judges(self) -> dict[str, tuple[str, ...]]:
        """Each judge model and the judges it is, of those the run has work for (``judged_roles``); a role in
        cascade mode has two (its cheap judge, and its own)."""
        return self.judges_in(self.judged_roles)

    @property
    def ladder_judges(self) -> dict[str, tuple[str, ...]]:
        """The judges whose ladders run: the run's judges (``judges``), then the panel's
        (``judge_reliability.panel``), each in every role the run has work for."""
        return self.ladder_judges_in(self.judged_roles)

    def judges_in(self, roles: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        """``judges``, were ``roles`` the roles the run has work for."""
        found: dict[str, tuple[str, ...]] = {}
        for section, judged in (("rubric_judge", (RUBRIC,)), ("study_judge", STUDIES)):
            judged = tuple(role for role in judged if role in roles)
            for model in JudgeMode.from_config(self.config, section).judges if judged else ():
                found[model] = (*found.get(model, ()), *judged)
        return found

    def ladder_judges_in(self, roles: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        """``ladder_judges``, were ``roles`` the roles the run has work for (a ladder job knows its part's: the
        run made the job)."""
        found = self.judges_in(roles)
        for model in self.config["judge_reliability"]["panel"]:
            found[model] = tuple(dict.fromkeys([*found.get(model, ()), *roles]))
        return found

    @property
    def reconstruction_models(self) -> tuple[str, ...]:
        """The reconstruction's generator and voters (``instances.reconstruct``), each once."""
        reconstruct = self.config["instances"]["reconstruct"]
        return tuple(dict.fromkeys([reconstruct["generator"], *reconstruct["voters"]]))

    @property
    def embedders(self) -> tuple[str, ...]:
        return tuple(self.config["scoring"]["embedders"])

    @property
    def embedder(self) -> str:
        """The embedder of the outputs that use one (the review queue, Table 3): the first configured."""
        return self.embedders[0]

    def benchmark(self, model: str, subtasks: tuple[str, ...] | None = None) -> list[Cell]:
        return [Cell(model, v, s) for v in self.variants for s in (self.subtasks if subtasks is None else subtasks)]

    def studies(self, model: str, studies: tuple[str, ...] = STUDIES) -> list[Cell]:
        return [Cell(model, v, study) for study in studies for v in self.variants]

    def scoring(self, model: str, embedder: str) -> list[Cell]:
        """What a model's scoring job scores: its benchmark answers (Table 2's cells)."""
        return [cell.scored_by(embedder) for cell in self.benchmark(model)]

    def study_scoring(self, embedder: str) -> list[Cell]:
        """What an embedder's study scoring job scores: the safety study's answers of every study model (Table 3
        scores them against the safe references)."""
        return [cell.scored_by(embedder) for model in self.study_models for cell in self.studies(model, ("safety",))]

    def judged(self, model: str) -> list[Cell]:
        return self.benchmark(model, self.judged_subtasks)

    def is_judged(self, cell: Cell) -> bool:
        """Whether Table 2 shows J (rubric judge and S) for this cell, or S."""
        return cell.task in self.judged_subtasks and cell.model in self.judged_models

    def table2(self) -> list[Cell]:
        models, variants, subtasks = self.run_models, self.variants, self.subtasks
        return [Cell(m, v, s, e) for e in self.embedders for m in models for v in variants for s in subtasks]

    def table2_summaries(self, results: Layout) -> list[str]:
        """The summary of every Table 2 cell: J where the rubric judge is mixed in, S elsewhere."""
        return [(results.j_summary if self.is_judged(cell) else results.score_summary)(cell) for cell in self.table2()]

    def table2_items(self, results: Layout) -> dict[Cell, str]:
        """The per-item values behind every Table 2 cell of a model under test, whose rows are compared with each
        other (the baselines' rows are calibration rows): J items where the rubric judge is mixed in, S items
        elsewhere."""
        return {
            cell: (results.j_items if self.is_judged(cell) else results.score_items)(cell)
            for cell in self.table2()
            if cell.model in self.models
        }
