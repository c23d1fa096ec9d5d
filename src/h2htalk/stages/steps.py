"""The one name of each piece of work a job asks models for, as the plan (``plan.csv``'s ``stage``), the time said
before a run and ``config/throughput.yaml`` call it: the stage's declared name, or, where one job of a stage does
several pieces of work, the stage's name and the part it declares (``study.answers``). A stage that calls models
declares its steps (``Stage.steps``); the plan and the time said read them from the stages they are given."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from h2htalk.settings import JudgeSettings

SAMPLE = "sample"  # in cascade mode: each cell's sample judged again by the role's own judge


@dataclass(frozen=True)
class Step:
    """A piece of a stage's model calls: ``part`` of its work (none: the stage's own name); ``makes``: a model's
    answers, as long as the plan's placeholders (the throughput table's ``answer_length``), a judge's verdicts
    (``verdict_tokens``), or the instances of a reconstructed benchmark (the plan runs it only for one, a demo
    instance in place of each missing one); ``batchable``: its requests may go through a Batch API (its section's
    ``batch`` key); ``sampled``: in cascade mode a sample of it is judged again (``NAME.sample``); ``judges``: the
    step whose answers its verdicts are of (the plan lists them in that order); ``limit``: the judge's settings
    whose ``max_new_tokens`` the plan plans a missing verdict at (none: its request's own ``max_tokens``);
    ``title``: what the plan's table of the judges calls it (none: its name)."""

    part: str = ""
    makes: Literal["answers", "verdicts", "instances", ""] = ""
    batchable: bool = False
    sampled: bool = False
    judges: str = ""
    limit: type[JudgeSettings] | None = None
    title: str = ""

    def names(self, stage: str) -> tuple[str, ...]:
        """Its name in ``stage``, and its sample's where it is sampled."""
        own = f"{stage}.{self.part}" if self.part else stage
        return (own, f"{own}.{SAMPLE}") if self.sampled else (own,)


class Stepped(Protocol):
    """A stage, as far as its steps go (``h2htalk.stages.spec.Stage``)."""

    @property
    def name(self) -> str: ...

    @property
    def steps(self) -> tuple[Step, ...]: ...


def declared_steps(stages: Iterable[Stepped]) -> dict[str, Step]:
    """Every step of ``stages`` by its name (a sample's: its step's), in the plan report's order: the steps that make
    no verdicts in the stages' order, then the verdicts in the order of the steps they judge (a judge of what it
    makes itself: in its own place)."""
    found = {name: step for stage in stages for step in stage.steps for name in step.names(stage.name)}
    place = {name: index for index, name in enumerate(found)}
    key = {name: (step.makes == "verdicts", place.get(step.judges, place[name])) for name, step in found.items()}
    return {name: found[name] for name in sorted(found, key=key.__getitem__)}


def steps_making(stages: Iterable[Stepped], makes: str) -> list[str]:
    """The names of the steps of ``stages`` that make ``makes`` (answers, verdicts), samples left out."""
    return [name for name, step in declared_steps(stages).items() if step.makes == makes and name == unsampled(name)]


def unsampled(name: str) -> str:
    """The step whose work a cascade's sample does again (``rubric_judge.sample`` -> ``rubric_judge``)."""
    return name.removesuffix(f".{SAMPLE}")
