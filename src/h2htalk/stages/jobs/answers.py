"""The stages that call models: the reconstruction, the answers, the rubric judge, the studies and the judges'
ladders; and what J is made of (the review gate, people's scores, the review queue)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h2htalk.errors import H2HTalkError
from h2htalk.stages.job import Done, Job

if TYPE_CHECKING:  # the model-call stack, imported by the jobs that call models only
    from h2htalk.judge.run import JudgeFiles
    from h2htalk.settings import CascadeSettings, JudgeSettings


def reconstruct(job: Job) -> Done:
    from h2htalk.instances.reconstruct import ReconstructFiles, reconstruct_to_files
    from h2htalk.settings import ReconstructSettings

    options = ReconstructSettings.from_config(job.config)
    names = list(dict.fromkeys([options.generator, *options.voters]))
    subtasks = job.config["subtasks"]
    out = job.outputs
    files = [
        ReconstructFiles(key, Path(curated), Path(instances), Path(report), Path(review))
        for key, curated, instances, report, review in zip(
            subtasks, job.inputs["curated"], out["instances"], out["reports"], out["review"], strict=True
        )
    ]
    engines = job.engines(names)
    engines.step("reconstruct", "instances")
    decisions, store = job.inputs["decisions"], job.config["review"]["store"]
    reports = reconstruct_to_files(files, {n: job.entry(n) for n in names}, options, engines, decisions, store)
    counts = ("sampled", "kept_after_review", "flagged", "leaked", "failed")
    totals = {key: sum(r[key] for r in reports) for key in counts}
    return Done(
        f"{len(reports)} subtasks; {totals['sampled']} sampled, {totals['kept_after_review']} kept, "
        f"{totals['flagged']} flagged, {totals['leaked']} leaked, {totals['failed']} failed"
    )


def generate(job: Job) -> Done:
    """A model's (or a baseline's) answers to every Table 2 cell."""
    from h2htalk.llm.engines import engine_of

    model = job.labels["model"]
    baseline = engine_of(job.entry(model)).answers_without_model
    if baseline != (job.stage.where != "model"):
        other = "baseline-answers" if baseline else "generate"
        raise H2HTalkError(f"{model} is {'a baseline' if baseline else 'a model'}: its answers are h2htalk {other}'s")
    engines = job.engines([model] if job.stage.where == "model" else [])  # a baseline starts no engine
    run = _answer(job, engines, "responses", "summary", for_studies=False)
    return Done(answered(run), subject=model, out=f"{len(job.cells)} files")


def _answer(job: Job, engines: Any, responses: str, summary: str, *, for_studies: bool) -> dict[str, Any]:
    """Answer the job's cells with its model (its engine started once); the run summary."""
    from h2htalk.generation.generate import PromptFile, generate_model
    from h2htalk.settings import GenerationSettings

    model = job.labels["model"]
    cells = [c for c in job.cells if c.is_study == for_studies]
    files = [PromptFile(c.variant, c.task, Path(job.each("prompts", c)), Path(job.each(responses, c))) for c in cells]
    instances = {c.task: Path(job.each("instances", c)) for c in cells} if "instances" in job.stage.inputs else {}
    settings = GenerationSettings.from_config(job.config, for_studies=for_studies)
    engines.step("generate studies" if for_studies else "generate", model)
    spec = job.entry(model)
    return generate_model(spec, files, settings, engines, instances=instances, summary_path=job.output(summary))


def rubric_judge(job: Job) -> Done:
    """One model's judged cells: every item by the judge of every item (the cheap one in cascade mode), then, in
    cascade mode, each cell's sample by the role's own judge (its file is empty in full mode)."""
    from h2htalk.io import write_jsonl_atomic
    from h2htalk.judge.cascade import answered_ids, cascade_sample, every_item_judge, judge_models
    from h2htalk.judge.run import JudgeFiles, judge_files
    from h2htalk.settings import CascadeSettings, JudgeSettings

    judge, model = JudgeSettings.from_config(job.config), job.labels["model"]
    cascade = CascadeSettings.from_config(job.config, "rubric_judge")
    every = every_item_judge(judge, cascade)
    kinds = ("instances", "prompts", "generations", "verdicts")
    files = [JudgeFiles(c.variant, c.task, *(Path(job.each(kind, c)) for kind in kinds)) for c in job.cells]
    engines = job.engines(judge_models(judge, cascade))
    engines.step("rubric judge", model)
    summary = job.out_path("summary")
    run = judge_files(job.entry(every.model), model, files, every, engines, summary_path=summary)
    facts = answered(run, "verdicts")
    if cascade.on:
        ids = [answered_ids(f.generations) for f in files]
        sample = [
            replace(f, out=Path(job.each("sample", c)), ids=frozenset(cascade_sample(c, cell_ids, cascade)))
            for f, c, cell_ids in zip(files, job.cells, ids, strict=True)
        ]
        engines.step("rubric judge sample", model)
        strong = judge_files(job.entry(judge.model), model, sample, judge, engines)
        more: dict[str, Any] = {"sample": strong}
        if cascade.auto:  # the first draw was the pilot: the rest of each cell's sample, as its pilot sizes it
            more["pilot"] = strong
            more["sample"], more["sizes"] = _rest_of_sample(job, files, sample, ids, cascade, judge, engines)
        _add_to_summary(summary, more)
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


def _add_to_summary(path: Path, more: dict[str, Any]) -> None:
    from h2htalk.io import read_json, write_json_atomic

    write_json_atomic(path, {**read_json(path), **more})


def study(job: Job) -> Done:
    """The studies' answers of the job's model, then the study judge's verdicts on them, in one job (in cascade mode
    the cheap judge's on every turn, then the role's own judge's on each cell's sample). Where a judge is the model
    itself (the laptop), one engine serves both; a judge of its own starts after the model's engine has stopped, so
    that two engines never hold a job's GPUs at once."""
    from h2htalk.io import write_jsonl_atomic
    from h2htalk.judge.cascade import answered_ids, cascade_sample, every_item_judge, judge_models
    from h2htalk.llm.engines import engine_of
    from h2htalk.settings import CascadeSettings, StudyJudgeSettings
    from h2htalk.studies.run import judge_studies

    model, judge = job.labels["model"], StudyJudgeSettings.from_config(job.config)
    cascade = CascadeSettings.from_config(job.config, "study_judge")
    every = every_item_judge(judge, cascade)
    study_models = job.run.study_models
    if model not in study_models:
        raise H2HTalkError(f"model {model!r} answers no study (studies.models: {', '.join(study_models)})")
    if engine_of(job.entry(model)).answers_without_model:
        raise H2HTalkError(f"model {model!r} is a baseline: baselines answer no study")
    judges = judge_models(judge, cascade)
    engines = job.engines(list(dict.fromkeys([model, *judges])))
    shared = [job.entry(model)] if model in judges else []
    with engines.sharing(shared) as shared_engines:
        answers = _answer(job, shared_engines, "responses", "summary", for_studies=True)
        shared_engines.step("study judge", model)
        items = [Path(p) for p in job.inputs["study_items"]]
        pairs = [(Path(job.each("responses", c)), Path(job.each("verdicts", c))) for c in job.cells]
        summary = job.out_path("judge_summary")
        verdicts = judge_studies(
            job.entry(every.model), model, items, pairs, every, shared_engines, summary_path=summary
        )  # fmt: skip
        facts = f"{answered(answers)}; {answered(verdicts, 'verdicts')}"
        if cascade.on:
            sample = [(Path(job.each("responses", c)), Path(job.each("sample", c))) for c in job.cells]
            only = {
                responses: cascade_sample(c, answered_ids(responses), cascade)
                for (responses, _), c in zip(sample, job.cells, strict=True)
            }
            shared_engines.step("study judge sample", model)
            strong = judge_studies(job.entry(judge.model), model, items, sample, judge, shared_engines, only=only)
            _add_to_summary(summary, {"sample": strong})
            facts += f"; the sample: {answered(strong, 'verdicts')} by {judge.model}"
        else:
            for cell in job.cells:
                write_jsonl_atomic(job.each("sample", cell), [])
    return Done(facts, subject=f"{model} judged by {' and '.join(judges)}", out=f"{3 * len(job.cells)} files")


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


def review_queue(job: Job) -> Done:
    from h2htalk.judge.combine import write_review_queue

    out = job.out_path("queue")
    count = write_review_queue([Path(p) for p in job.inputs["j_items"]], out)
    return Done(f"{count} items to review", out=out)


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
    engines.step("judge ladder", model)
    slots = {role: canary_slot(config, role, model) for role in roles}
    found = run_ladder(job.entry(model), roles, texts, judges, reliability, engines, job.results, part, slots)
    return Done(answered(found, "verdicts"), subject=f"{model} ({', '.join(roles)})")


def answered(run: dict[str, Any], noun: str = "answers") -> str:
    """``66 answers (12 cached, 0 failed)``, from a run summary of the model-call seam."""
    from h2htalk.llm.engines import ENGINES

    if ENGINES[run["engine"]].answers_without_model:
        return f"{run['requests']} {noun} (a baseline: no model)"
    cached = run["requests"] - run["sent"]
    return f"{run['requests']} {noun} ({cached} cached, {run.get('failed', 0)} failed)"
