"""One judge model's ladder job: the texts of every judge it is, judged with one engine start; the ladder's
verdicts, its canary kept and compared with the previous run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from h2htalk.cells import RunCells
from h2htalk.errors import H2HTalkError
from h2htalk.io import read_jsonl, write_json_atomic, write_jsonl_atomic
from h2htalk.layout import Layout
from h2htalk.settings import JUDGE_ROLES, LADDER_PARTS, JudgeSettings, ReliabilitySettings, StudyJudgeSettings
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import JUDGE_CALLS, REGISTRY, ladder_jobs
from h2htalk.stages.spec import Done, Models, One, Over, Paths, Stage
from h2htalk.stages.steps import Step

if TYPE_CHECKING:  # the model-call stack and numpy, imported when a job runs, not when the registry loads
    from h2htalk.llm.calls import EngineOptions
    from h2htalk.reliability.ladder import LadderText


def role_texts(
    roles: Sequence[str], subtasks: Sequence[str], instances: Sequence[str], prompts: Sequence[str],
    names: Sequence[str], seed: int,
) -> list[LadderText]:  # fmt: skip
    """Every text the judges ``roles`` could be given: the rubric judge's ladder of every instance of the judged
    ``subtasks`` (their ``instances`` and one variant's ``prompts`` files, in order), the studies' judges'
    known-answer sets."""
    from h2htalk.reliability.ladder import NEEDS, RUBRIC, SAFETY, need_texts, rubric_texts, safety_texts

    texts = []
    if RUBRIC in roles:
        for subtask, instance_file, prompt_file in zip(subtasks, instances, prompts, strict=True):
            messages = {r["id"]: r["messages"] for r in read_jsonl(prompt_file)}
            texts += rubric_texts(subtask, read_jsonl(instance_file), messages, names, seed)
    if SAFETY in roles:
        texts += safety_texts(seed)
    if NEEDS in roles:
        texts += need_texts(seed)
    return texts


def run_ladder(
    spec: dict[str, Any],
    roles: Sequence[str],
    texts: Sequence[LadderText],
    judges: Mapping[str, JudgeSettings],
    reliability: ReliabilitySettings,
    engines: EngineOptions,
    results: Layout,
    out: Mapping[str, str],
    slots: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Judge the ladder (the rubric judge's first ``ladder_items`` instances, the whole known-answer sets) and the
    canary; write the verdicts (``out["ladder"]``), each role's canary comparison (``out["canary"]``, with the
    judge's earlier runs in its slot of that role, kept in ``results``; ``slots``: the role's own judge where not
    given) and the calls' summary (``out["summary"]``); return the summary."""
    from h2htalk.llm.calls import model_identity
    from h2htalk.reliability.canary import OWN_JUDGE, keep_canary
    from h2htalk.reliability.judging import judge_texts
    from h2htalk.reliability.ladder import RUBRIC, canary_texts, first_items

    on_ladder = set(first_items([t for t in texts if t.role == RUBRIC], reliability.ladder_items))
    on_ladder |= {t for t in texts if t.role != RUBRIC}
    on_canary = set(canary_texts(texts, reliability.canary_items, reliability.seed))
    chosen = [t for t in texts if t in on_ladder or t in on_canary]
    records, sessions = judge_texts(spec, chosen, judges, engines)
    for text, record in zip(chosen, records, strict=True):
        record.update(ladder=text in on_ladder, canary=text in on_canary)
    write_jsonl_atomic(out["ladder"], records)
    judge = model_identity(spec)
    canaries = {}
    for role in roles:
        kept = [r for r in records if r["canary"] and r["role"] == role]
        slot = (slots or {}).get(role, OWN_JUDGE)
        canaries[role] = keep_canary(results, role, kept, judge, reliability.canary_min_alpha, slot)
    write_json_atomic(out["canary"], canaries)
    summary = {
        "model": spec["name"],
        "engine": spec["engine"],
        "roles": list(roles),
        "texts": len(chosen),
        "requests": sum(s["requests"] for s in sessions),
        "sent": sum(s["sent"] for s in sessions),
        "failed": sum(s["failed"] for s in sessions),
        "sessions": sessions,
    }
    write_json_atomic(out["summary"], summary)
    return summary


def _rubric_subtasks(scope, labels):
    """The judged subtasks, where the job judges the rubric judge's ladder (none where it does not)."""
    run = scope.run
    rubric = labels["part"] == "rubric" and "rubric" in run.ladder_judges.get(labels["model"], ())
    return run.judged_subtasks if rubric else ()


def _ladder_instances(scope, labels):
    """The judged subtasks' instances, which the rubric judge's ladder is made of."""
    return [scope.results.path("instances", subtask=s) for s in _rubric_subtasks(scope, labels)]


def _ladder_prompts(scope, labels):
    """One variant's prompts of the judged subtasks, which the rubric judge's ladder gives the judge."""
    return [scope.results.prompts(scope.run.variants[0], s) for s in _rubric_subtasks(scope, labels)]


@stage(
    "judge_ladder",
    "one judge model's sanity ladder and drift canary, as the rubric judge or as the studies' judges (one part a"
    " job: Table 2 shows the rubric part in every run, the judges' card reads both)",
    uses=("judge", "studies", "subtasks"), planned=True,
    steps=(Step(makes="verdicts", batchable=True, title="the judges' ladders"),),  # at its requests' limits
    reads=(
        *REGISTRY, "generation", *JUDGE_CALLS, "study_judge", "subtasks", "variants", "data.curate.persona_names",
        "judge_reliability.seed", "judge_reliability.ladder", "judge_reliability.canary", "judge_reliability.panel",
    ),
    jobs=Over(ladder_jobs, model=str, part=str), starts=lambda s, w: [w["model"]], where="model",
    env="generation",
    inputs={"instances": Paths(_ladder_instances), "prompts": Paths(_ladder_prompts)},
    outputs={"ladder": One("judge_ladder"), "canary": One("judge_canary"), "summary": One("judge_ladder_run")},
    keeps={"canaries": One("canaries")},
)  # fmt: skip
def judge_ladder(
    model: str, part: str, reliability: ReliabilitySettings, rubric_judge: JudgeSettings,
    study_judge: StudyJudgeSettings, instances: list[str], prompts: list[str], outputs: dict[str, str],
    config: dict[str, Any], run: RunCells, results: Layout, models: Models, stage: Stage,
) -> Done:  # fmt: skip
    """Judge ``model``'s ladder and canary as every judge of ``part`` it is in the job's run (one engine start)."""
    from h2htalk.generation.generate import answered
    from h2htalk.reliability.canary import canary_slot

    roles = run.ladder_judges_in(LADDER_PARTS[part]).get(model, ())  # the run made the job: it has work for them
    if not roles:
        raise H2HTalkError(
            f"{model!r} is no {part} judge in this run (rubric_judge.model, study_judge.model, judge_reliability.panel)"
        )
    names = config["data"]["curate"]["persona_names"]
    texts = role_texts(roles, run.judged_subtasks, instances, prompts, names, reliability.seed)
    judges = {role: rubric_judge if role == JUDGE_ROLES[0] else study_judge for role in roles}
    engines = models.engines([model])
    engines.step(stage.step(), model)
    slots = {role: canary_slot(config, role, model) for role in roles}
    found = run_ladder(models.entry(model), roles, texts, judges, reliability, engines, results, outputs, slots)
    return Done(answered(found, "verdicts"), subject=f"{model} ({', '.join(roles)})")
