"""The one name of each piece of work a job asks models for, as the plan (``plan.csv``'s ``stage``), the time said
before a run and ``config/throughput.yaml`` call it: the stage's declared name, or, where one job of a stage does
several pieces of work, the stage's name and one of the parts declared here (``study.answers``)."""

from __future__ import annotations

SAMPLE = "sample"  # in cascade mode: each cell's sample judged again by the role's own judge

PARTS: dict[str, tuple[str, ...]] = {
    "study": ("answers", "judge", f"judge.{SAMPLE}"),  # the studies' answers, then the study judge's verdicts
    "rubric_judge": (SAMPLE,),  # the verdicts of the judge of every item are the stage's own name
}

STEPS = (
    "reconstruct_instances", "generate", "baseline_answers", "study.answers", "rubric_judge", "rubric_judge.sample",
    "study.judge", "study.judge.sample", "judge_ladder",
)  # fmt: skip  # in the plan report's order
VERDICTS = ("rubric_judge", "study.judge", "judge_ladder")  # the steps whose answers are a judge's verdicts
ANSWERS = ("generate", "study.answers")  # the steps whose answers are a model's, as long as the plan's placeholders


def step(stage: str, part: str | None = None) -> str:
    """The name of ``part`` of ``stage``'s work (the stage's own name without a part)."""
    if part is None:
        return stage
    if part not in PARTS.get(stage, ()):
        raise ValueError(f"stage {stage!r} declares no part {part!r} (h2htalk.stages.steps.PARTS)")
    return f"{stage}.{part}"


def unsampled(name: str) -> str:
    """The step whose work a cascade's sample does again (``rubric_judge.sample`` -> ``rubric_judge``)."""
    return name.removesuffix(f".{SAMPLE}")


def is_verdicts(name: str) -> bool:
    return unsampled(name) in VERDICTS
