"""The judges and people: the rubric judge's verdicts, the judges' sanity ladders, J from S, the verdicts and
people's scores, and the queue of what people review."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h2htalk.errors import H2HTalkError
from h2htalk.ratings import REVIEW_SCORES
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import (
    GATE,
    JUDGE_CALLS,
    REGISTRY,
    REVIEW_MODE,
    RUBRIC_JUDGE_MODE,
    config_files,
    judge_models,
    judged_cells,
    ladder_jobs,
)  # fmt: skip
from h2htalk.stages.jobs.answers import add_to_summary, answered
from h2htalk.stages.spec import Done, Each, Job, One, Over, Paths
from h2htalk.stages.steps import SAMPLE, step

if TYPE_CHECKING:  # the model-call stack, imported by the jobs that call models only
    from h2htalk.judge.run import JudgeFiles
    from h2htalk.settings import CascadeSettings, JudgeSettings


@stage(
    "rubric_judge",
    "rubric-judge one model's itinerary plans (the judge's engine started once; in cascade mode the cheap judge's"
    " on every item, then the role's own judge's on each cell's sample)",
    uses=("judge", "subtasks"), planned=True,
    reads=(*REGISTRY, "generation", *JUDGE_CALLS, "subtasks", "variants"),
    jobs=Over(model=lambda run: run.judged_models if run.judged_subtasks else ()),
    cells=lambda run, w: run.judged(w["model"]), starts=lambda s, w: judge_models(s, "rubric_judge"),
    where="model", env="generation", options=("engine", "rubric_judge"),
    inputs={"instances": Each("references"), "prompts": Each("prompts"), "generations": Each("generations")},
    outputs={"verdicts": Each("judge_samples"), "sample": Each("judge_sample"), "summary": One("judge_run")},
)  # fmt: skip
def rubric_judge(job: Job) -> Done:
    """One model's judged cells: every item by the judge of every item (the cheap one in cascade mode), then, in
    cascade mode, each cell's sample by the role's own judge (its file is empty in full mode)."""
    from h2htalk.io import write_jsonl_atomic
    from h2htalk.judge.cascade import answered_ids, cascade_sample
    from h2htalk.judge.run import JudgeFiles, judge_files
    from h2htalk.settings import CascadeSettings, JudgeSettings

    judge, model = JudgeSettings.from_config(job.config), job.labels["model"]
    cascade = CascadeSettings.from_config(job.config, "rubric_judge")
    every = cascade.every_item_judge(judge)
    kinds = ("instances", "prompts", "generations", "verdicts")
    files = [JudgeFiles(c.variant, c.task, *(Path(job.each(kind, c)) for kind in kinds)) for c in job.cells]
    engines = job.engines(cascade.judge_models(judge))
    engines.step(job.stage.name, model)
    summary = job.out_path("summary")
    run = judge_files(job.entry(every.model), model, files, every, engines, summary_path=summary)
    facts = answered(run, "verdicts")
    if cascade.on:
        ids = [answered_ids(f.generations) for f in files]
        sample = [
            replace(f, out=Path(job.each("sample", c)), ids=frozenset(cascade_sample(c, cell_ids, cascade)))
            for f, c, cell_ids in zip(files, job.cells, ids, strict=True)
        ]
        engines.step(step(job.stage.name, SAMPLE), model)
        strong = judge_files(job.entry(judge.model), model, sample, judge, engines)
        more: dict[str, Any] = {"sample": strong}
        if cascade.auto:  # the first draw was the pilot: the rest of each cell's sample, as its pilot sizes it
            more["pilot"] = strong
            more["sample"], more["sizes"] = _rest_of_sample(job, files, sample, ids, cascade, judge, engines)
        add_to_summary(summary, more)
        pilot = f"the pilot: {answered(strong, 'verdicts')}, the rest of " if cascade.auto else ""
        facts += f"; {pilot}the sample: {answered(more['sample'], 'verdicts')} by {judge.model}"
    else:
        for cell in job.cells:
            write_jsonl_atomic(job.each("sample", cell), [])
    subject = f"{model} by {every.model}" + (f" and {judge.model} ({cascade.mode})" if cascade.on else "")
    return Done(facts, subject=subject, out=f"{len(files)} files")


def _rest_of_sample(
    job: Job,
    files: list[JudgeFiles],
    pilots: list[JudgeFiles],
    ids: list[list[str]],
    cascade: CascadeSettings,
    judge: JudgeSettings,
    engines: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Auto mode: each cell's sample sized from its pilot's verdicts (``pilots``, judged), the items beyond the
    pilot judged and added to its file; the rest's run summary and each cell's size record."""
    from h2htalk.io import iter_jsonl, write_jsonl_atomic
    from h2htalk.judge.cascade import judge_reading, sized_sample
    from h2htalk.judge.run import judge_files

    sizes, rest = {}, []
    for f, pilot, cell, cell_ids in zip(files, pilots, job.cells, ids, strict=True):
        sample, sizes[f"{cell.variant}/{cell.task}"] = sized_sample(
            cell, cell_ids, cascade, judge_reading(f.out), judge_reading(pilot.out)
        )
        rest.append(replace(pilot, out=pilot.out.with_suffix(".rest.jsonl"), ids=frozenset(sample) - pilot.ids))
    judged = judge_files(job.entry(judge.model), job.labels["model"], rest, judge, engines)
    for pilot, more in zip(pilots, rest, strict=True):
        write_jsonl_atomic(pilot.out, [r for path in (pilot.out, more.out) for _, r in iter_jsonl(path)])
        more.out.unlink()
    return judged, sizes


def _canary_histories(scope, labels):
    """The drift canary's history of every judge role (what each run's judge said), kept across runs."""
    return [str(Path(scope.results.path("canary_history", role="-")).parent.parent)]


def _ladder_inputs(scope, labels):
    """What the rubric judge's ladder is made of: the judged subtasks' instances and one variant's prompts."""
    run = scope.run
    rubric = labels["part"] == "rubric" and "rubric" in run.ladder_judges.get(labels["model"], ())
    if not (rubric and run.judged_subtasks):
        return []
    return [
        *(scope.results.path("instances", subtask=s) for s in run.judged_subtasks),
        *(scope.results.prompts(run.variants[0], s) for s in run.judged_subtasks),
    ]


@stage(
    "judge_ladder",
    "one judge model's sanity ladder and drift canary, as the rubric judge or as the studies' judges (one part a"
    " job: Table 2 shows the rubric part in every run, the judges' card reads both)",
    uses=("judge", "studies", "subtasks"), planned=True,
    reads=(
        *REGISTRY, "generation", *JUDGE_CALLS, "study_judge", "subtasks", "variants", "data.curate.persona_names",
        "judge_reliability.seed", "judge_reliability.ladder", "judge_reliability.canary", "judge_reliability.panel",
    ),
    jobs=Over(ladder_jobs, model=str, part=str), starts=lambda s, w: [w["model"]], where="model",
    env="generation", options=("engine",),
    inputs={"rubric": Paths(_ladder_inputs)},
    outputs={"ladder": One("judge_ladder"), "canary": One("judge_canary"), "summary": One("judge_ladder_run")},
    keeps={"canary_history": Paths(_canary_histories)},
)  # fmt: skip
def judge_ladder(job: Job) -> Done:
    from h2htalk.reliability.canary import canary_slot
    from h2htalk.reliability.run import role_texts, run_ladder
    from h2htalk.settings import JUDGE_ROLES, LADDER_PARTS, JudgeSettings, ReliabilitySettings, StudyJudgeSettings

    config, run, model, part = job.config, job.run, job.labels["model"], job.labels["part"]
    roles = tuple(role for role in run.ladder_judges.get(model, ()) if role in LADDER_PARTS[part])
    if not roles:
        raise H2HTalkError(
            f"{model!r} is no {part} judge in this run (rubric_judge.model, study_judge.model, judge_reliability.panel)"
        )
    reliability = ReliabilitySettings.from_config(config)
    names = config["data"]["curate"]["persona_names"]
    texts = role_texts(roles, run.judged_subtasks, run.variants[0], job.results, names, reliability.seed)
    rubric, study_judge = JudgeSettings.from_config(config), StudyJudgeSettings.from_config(config)
    judges = {role: rubric if role == JUDGE_ROLES[0] else study_judge for role in roles}
    engines = job.engines([model])
    engines.step(job.stage.name, model)
    slots = {role: canary_slot(config, role, model) for role in roles}
    found = run_ladder(job.entry(model), roles, texts, judges, reliability, engines, job.results, part, slots)
    return Done(answered(found, "verdicts"), subject=f"{model} ({', '.join(roles)})")


@stage(
    "combine_j",
    "J from S and the judge (corrected on the role's own judge's sample in cascade mode), the review gate or"
    " sample, people's scores",
    reads=(
        *GATE, "scoring.bootstrap", "review.imports", "review.store", *REVIEW_MODE, "subtasks", "variants",
        "models", "baselines", "rubric_judge.baselines", *RUBRIC_JUDGE_MODE,
    ),
    jobs=Over(model=lambda run: run.judged_models if run.judged_subtasks else (), embedder=lambda run: run.embedders),
    cells=lambda run, w: [c.scored_by(w["embedder"]) for c in run.judged(w["model"])],
    ratings=(REVIEW_SCORES,), ratings_of_model=True, env="metrics", memory_mb=1000, minutes=10,
    options=("bootstrap",),
    inputs={
        "scores": Each("score_items"), "judgments": Each("judge_samples"), "sample": Each("judge_sample"),
        "human": config_files("review.imports"),
    },
    outputs={"scored": Each("j_items"), "summaries": Each("j_summary")},
)  # fmt: skip
def combine_j(job: Job) -> Done:
    from h2htalk.judge.combine import combine_to_files, read_human_scores
    from h2htalk.settings import BootstrapSettings, GateSettings, JudgeMode, ReviewSettings

    config, run = job.config, job.run
    gate, bootstrap = GateSettings.from_config(config), BootstrapSettings.from_config(config)
    review, mode = ReviewSettings.from_config(config), JudgeMode.from_config(config, "rubric_judge")
    judges = (mode.cheap_model, mode.model) if mode.cascade else None
    human = read_human_scores(job.inputs["human"], job.cells, job.results, run.judged_models, config["review"]["store"])
    results = [combine_to_files(cell, job.results, gate, bootstrap, human, review, judges) for cell in job.cells]
    return Done(
        f"{len(results)} cells, {sum(r['n'] for r in results)} items ({review.mode} mode, {mode.mode} judge); "
        f"{sum(r['to_review'] for r in results)} to review, {sum(r['human_items'] for r in results)} rated by "
        f"people, {sum(r['missing'] for r in results)} missing",
        subject=job.labels["model"],
    )


@stage(
    "review_queue", "collect the items sent to people (gated, or sampled) into one CSV",
    reads=("models", "baselines", "rubric_judge.baselines", "scoring.embedders", "subtasks", "variants"),
    cells=lambda run, w: [c.scored_by(run.embedder) for c in judged_cells(run, w)], env="metrics",
    inputs={"j_items": Each("j_items")}, outputs={"queue": One("review_queue")},
)  # fmt: skip
def review_queue(j_items: list[str], queue: str) -> Done:
    from h2htalk.judge.combine import write_review_queue

    count = write_review_queue([Path(p) for p in j_items], Path(queue))
    return Done(f"{count} items to review", out=Path(queue))
